# One file, several descriptors or several writers: the descriptors of one
# file in a process share its state as the kernel's do, and the processes
# that write their own parts of one shared file (the N-1 pattern of MPI-IO
# and HDF5) all find their bytes in it. The real files are compared with
# what the same programs leave without the library.

shared_descriptors() {
	need_helper
	mkdir -p ref
	run_ok "the same program without the library" plain "$HELPER" sharedfd "$T/ref" 21
	helper_ok "several descriptors of one file" -- sharedfd "$T/ck" 21
	local f
	for f in two-opens second-trunc map-dup; do
		same "ref/$f.bin" "ck/$f.bin" "$f.bin at its real path"
	done
	run_ok "two-opens.bin read back with the library" ck -- "$HELPER" check ck/two-opens.bin 3M 21
}

# n1_writers HOW [warm] [ROUNDS SIZE]: four processes write 4 MiB (SIZE) each into ck/shared.bin,
# with pwrite at their own offsets, fsync and close (HOW: existing: the
# file is there; new: it is not; trunc-first: the first opens it with
# O_TRUNC and the others open it after that; trunc-one: the first opens
# it with O_TRUNC at the same time as the others open it, and all write
# once all have opened it; shell: the launching shell creates it empty
# with ": >" and starts the writers). warm: each writes checkpoints of its
# own first (its cache has started: a version it opens with O_TRUNC is
# cached unless another process writes the file in place, and the others
# are asked to write in place once it is), three rounds.
n1_writers() {
	need_helper
	local how=$1 warm=${2:-} rounds=${3:-} size=${4:-4M} f=$T/ck/shared.bin seed=31 r rc pids=() round
	[ -n "$rounds" ] || rounds=$([ -n "$warm" ] && echo 3 || echo 1)
	for round in $(seq 1 "$rounds"); do
		rm -rf marks "$f" "$f".rank*
		mkdir -p marks
		[ "$how" = existing ] && plain "$HELPER" gen "$f" 5M 77
		local script='
			f=$1 how=$2 helper=$3 seed=$4 warm=$5 size=$6
			[ "$how" = shell ] && : >"$f"
			for r in 0 1 2 3; do
				fl=w
				[ "$how" = trunc-first ] || [ "$how" = trunc-one ] && [ $r = 0 ] && fl=t
				# (the others a moment after the first, where asked)
				[ $r = 1 ] && [ -n "${N1_LATER:-}" ] && sleep "$N1_LATER"
				"$helper" n1part "$f" $r "$size" "$seed" $fl marks $warm &
				# the first rank opens first, as an MPI program creates a
				# file on one rank and opens it on the others after a barrier
				if [ "$how" = trunc-first ] && [ $r = 0 ]; then
					while [ ! -e marks/opened.0 ]; do sleep 0.01; done
				fi
			done
			n=0
			while [ $(ls marks | grep -c opened) -lt 4 ] && [ $n -lt 3000 ]; do sleep 0.01; n=$((n + 1)); done
			touch marks/go
			rc=0
			for p in $(jobs -p); do wait $p || rc=1; done
			exit $rc
		'
		ck -- bash -c "$script" _ "$f" "$how" "$HELPER" $seed "$warm" "$size" ||
			fail "round $round: a writer of the shared file failed$(last_error)"
		run_ok "the shared file at its real path (round $round)" plain "$HELPER" check "$f" $((4 * ${size%M}))M $seed
		run_ok "the shared file read back with the library (round $round)" ck -- "$HELPER" check "$f" $((4 * ${size%M}))M $seed
		grep -q 'ckptcache: error' "$T/.log" && fail "the library reported an error$(first_error 'ckptcache: error')"
	done
	return 0
}

case_add shared/descriptors-of-one-file shared_descriptors
case_add shared/n1-existing-file n1_writers existing
case_add shared/n1-new-file n1_writers new
case_add shared/n1-first-truncates n1_writers trunc-first
case_add shared/n1-shell-creates n1_writers shell
case_add shared/n1-warm-existing-file n1_writers existing warm
case_add shared/n1-warm-new-file n1_writers new warm
case_add shared/n1-warm-first-truncates n1_writers trunc-first warm
case_add shared/n1-warm-one-truncates n1_writers trunc-one warm

# Many rounds of the race in trunc-one, each writer a new process (its
# cache cold): four ranks open one shared file at once, rank 0 with
# O_TRUNC, and write their own 1 MiB once all have opened it. Rank 0's
# look for writers in place and its version's entry in the node's table
# came apart from the others' announcement and ask, so that in some rounds
# neither saw the other: its version, published at its close, found the
# file the others had written and was kept in a rescue file instead, with
# an error (1 of 20 rounds of a program written that way).
n1_truncating_storm() {
	# (a race of processes, not of memory: the plain build runs it; under
	# the sanitizers the single rounds of trunc-one above run)
	under_sanitizer && note "a race between processes: the plain build runs its rounds"
	n1_writers trunc-one "" 40 1M
}
case_add shared/n1-one-truncates-storm n1_truncating_storm

# The same four opens with their windows made wide (a shim preloaded after
# the library delays a writer's real open that makes the file, the
# truncating rank's start of its node service, and a publication onto the
# file): rank 0's truncating open caches an empty version, a writer in
# place makes the file before rank 0 finds it and hands its version over,
# and the hand-over's publication finds a file made after its version
# began. Its truncation comes first, as the kernel may order the two
# opens: the file is kept, silently (the library said it was "changed by
# another program" and saved 0 bytes in a rescue file, 1 round in 1,000
# under load, 2 of 3 with the windows wide).
n1_truncating_wide() {
	under_sanitizer && note "a race between processes: the plain build runs its rounds"
	cat >wide.c <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
static int shared(const char *p)
{
	return p && strstr(p, "/ck/shared.bin");
}
static void wait_ms(long ms)
{
	struct timespec t = { 0, ms * 1000000 };
	while (nanosleep(&t, &t) != 0)
		;
}
int openat(int d, const char *p, int fl, ...)
{
	static int (*real)(int, const char *, int, ...);
	if (!real)
		real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
	va_list ap;
	va_start(ap, fl);
	mode_t mode = (mode_t)va_arg(ap, int);
	va_end(ap);
	if (shared(p) && (fl & O_CREAT) && !(fl & O_TRUNC) && (fl & O_TMPFILE) != O_TMPFILE)
		wait_ms(20);
	return real(d, p, fl, mode);
}
int socket(int a, int t, int pr)
{
	static int (*real)(int, int, int);
	if (!real)
		real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	if (t & SOCK_NONBLOCK)
		wait_ms(50);
	return real(a, t, pr);
}
int linkat(int a, const char *o, int b, const char *n, int f)
{
	static int (*real)(int, const char *, int, const char *, int);
	if (!real)
		real = (int (*)(int, const char *, int, const char *, int))dlsym(RTLD_NEXT, "linkat");
	if (shared(n))
		wait_ms(100);
	return real(a, o, b, n, f);
}
C
	gcc -O2 -shared -fPIC -o wide.so wide.c -ldl || fail "the shim that widens the windows did not compile"
	N1_LATER=0.02 PRELOAD="$PRELOAD $T/wide.so" n1_writers trunc-one "" 8 1M
}
case_add_waits shared/n1-one-truncates-wide n1_truncating_wide

# rewritten_while_written HOW RUN: process A opens ck/a.bin for writing,
# writes 3 MB and keeps it open; another process B rewrites the path with
# O_TRUNC (HOW: python's "wb" or "w+b", or a dash redirection) and closes;
# A writes 3 MB more at its offset and closes. Without the library B
# truncates the file A writes: 50 bytes of B, a hole, A's last 3 MB. RUN is
# ck or plain (the reference).
rewrite_while_written_run() {
	local how=$1 run=$2 f=$3 line
	coproc A { "$run" -- "$PY" -c '
import sys
f = open(sys.argv[1], "wb"); f.write(b"A" * 3000000); f.flush()
print("wrote", flush=True); sys.stdin.readline()
f.write(b"B" * 3000000); f.close(); print("closed", flush=True)
' "$f" 2>>"$T/.log"; }
	read -r -t 30 line <&"${A[0]}" || fail "A did not write its first part"
	case $how in
	wb | w+b) "$run" -- "$PY" -c 'import sys; open(sys.argv[1], sys.argv[2]).write(b"R" * 50)' "$f" "$how" ||
		fail "B's rewrite failed$(last_error)" ;;
	dash) "$run" -- dash -c 'printf RRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRR >"$1"' _ "$f" ||
		fail "B's rewrite failed$(last_error)" ;;
	esac
	echo >&"${A[1]}"
	read -r -t 30 line <&"${A[0]}"
	[ "$line" = closed ] || fail "A did not close after B's rewrite (said '$line')$(last_error)"
	wait "$A_PID" 2>/dev/null
}

rewrite_while_written() {
	local how=$1
	[ "$(command -v dash)" ] || note "dash is not installed"
	mkdir -p ref
	plain_run() { shift; plain "$@"; }
	rewrite_while_written_run "$how" plain_run "$T/ref/a.bin"
	rewrite_while_written_run "$how" ck "$T/ck/a.bin"
	same ref/a.bin ck/a.bin "the file two processes wrote, at its real path"
	grep -q 'ckptcache: error' "$T/.log" && fail "the library reported an error$(first_error 'ckptcache: error')"
	return 0
}

# replaced_kept_open HOW PERSIST: a process without the library keeps the
# real state.bin open (an earlier run's); the program saves a new version
# by an atomic replace (write tmp.part, os.replace over state.bin), then
# (HOW) updates it in place with "r+b", or replaces it again by a file it
# made with O_CREAT alone (which the library leaves at its real path).
# Without the library the rename gives state.bin a new file: the kept
# descriptor reads the earlier run's bytes to the end. The same program
# runs without the library in ref, and the real files are compared.
replaced_kept_open_run() {
	local how=$1 d=$2 run=$3
	shift 3
	rm -rf "$d/marks"
	mkdir -p "$d/marks"
	"$PY" -c 'import sys; open(sys.argv[1], "wb").write(b"the earlier run\n" * 40000)' "$d/state.bin"
	plain "$PY" -c '
import os, sys, time
d = sys.argv[1]
fd = os.open(d + "/state.bin", os.O_RDONLY)
old = os.pread(fd, 1 << 20, 0)
open(d + "/marks/kept", "w").close()
t0 = time.time()
while not os.path.exists(d + "/marks/done") and time.time() - t0 < 30:
    time.sleep(0.01)
got = os.pread(fd, 1 << 20, 0)
if got != old:
    print("the kept descriptor reads %d bytes beginning %r, not the %d it read first" % (len(got), got[:20], len(old)))
    sys.exit(1)
' "$d" >"$d/marks/reader.out" 2>&1 &
	local reader=$! n=0
	while [ ! -e "$d/marks/kept" ] && [ $n -lt 3000 ]; do sleep 0.01; n=$((n + 1)); done
	[ -e "$d/marks/kept" ] || fail "the reader did not open state.bin"
	"$run" "$@" -- "$PY" -c '
import os, sys
d, how = sys.argv[1], sys.argv[2]
with open(d + "/tmp.part", "wb") as f:
    f.write(b"the new version\n" * 30000)
os.replace(d + "/tmp.part", d + "/state.bin")
if how == "update":
    with open(d + "/state.bin", "r+b") as f:
        f.seek(100)
        f.write(b"UPDATED")
else:
    fd = os.open(d + "/side.part", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"made in place\n" * 20000)
    os.close(fd)
    os.replace(d + "/side.part", d + "/state.bin")
got = open(d + "/state.bin", "rb").read()
want = b"made in place\n" * 20000
if how == "update":
    want = bytearray(b"the new version\n" * 30000)
    want[100:107] = b"UPDATED"
assert got == want, "state.bin read back: %d bytes beginning %r" % (len(got), got[:20])
open(d + "/marks/done", "w").close()
' "$d" "$how" || { touch "$d/marks/done"; fail "the program ($run)$(last_error)"; }
	wait $reader || fail "$run: $(cat "$d/marks/reader.out")"
}

replaced_kept_open() {
	local how=$1 persist=$2
	mkdir -p ref
	plain_ck() { shift; plain "$@"; }
	replaced_kept_open_run "$how" "$T/ref" plain_ck
	replaced_kept_open_run "$how" "$T/ck" ck CKPTCACHE_PERSIST="$persist"
	same ref/state.bin ck/state.bin "state.bin at its real path"
	absent ck/tmp.part "the saved temporary file"
	absent ck/side.part "the file renamed over state.bin"
	grep -q 'ckptcache: error' "$T/.log" && fail "the library reported an error$(first_error 'ckptcache: error')"
	return 0
}

case_add shared/replaced-kept-open-update replaced_kept_open update unconsumed
case_add shared/replaced-kept-open-replace replaced_kept_open replace unconsumed
case_add shared/replaced-kept-open-update-always replaced_kept_open update always
case_add shared/replaced-kept-open-replace-always replaced_kept_open replace always
case_add shared/rewritten-while-written-wb rewrite_while_written wb
case_add shared/rewritten-while-written-wplus rewrite_while_written w+b
case_add shared/rewritten-while-written-dash rewrite_while_written dash

# folder_ops_run OP RUN D: process W writes and closes 50 small files in
# the folder D, keeps a 3 MB file open and waits; another process runs OP
# on D (rm -rf, shutil.rmtree, mv to D2); W then writes 1000 bytes more,
# closes, and creates one more file in D. RUN is ck or plain_run.
folder_ops_run() {
	local op=$1 run=$2 d=$3 line
	mkdir -p "$d"
	coproc W { "$run" -- "$PY" -c '
import hashlib, sys
d = sys.argv[1]
for i in range(50):
    with open(f"{d}/c{i}.bin", "wb") as f:
        f.write(hashlib.sha256(str(i).encode()).digest() * (100 * (i + 1)))
big = open(f"{d}/open.bin", "wb"); big.write(b"A" * 3000000)
print("ready", flush=True); sys.stdin.readline()
big.write(b"B" * 1000); big.close()
try:
    open(f"{d}/late.bin", "wb").write(b"late"); print("late created", flush=True)
except OSError as e:
    print("late:", e.strerror, flush=True)
' "$d" 2>>"$T/.log"; }
	read -r -t 30 line <&"${W[0]}" || fail "W did not write its files"
	case $op in
	rm) "$run" -- rm -rf "$d" || fail "rm -rf $d failed$(last_error)" ;;
	rmtree) "$run" -- "$PY" -c 'import shutil, sys; shutil.rmtree(sys.argv[1])' "$d" ||
		fail "shutil.rmtree($d) failed$(last_error)" ;;
	mv) "$run" -- mv "$d" "$d.moved" || fail "mv $d failed$(last_error)" ;;
	esac
	echo >&"${W[1]}"
	read -r -t 30 line <&"${W[0]}"
	echo "$line" >"$d.said"
	wait "$W_PID" 2>/dev/null
}

folder_ops() {
	local op=$1
	mkdir -p ref
	plain_run() { shift; plain "$@"; }
	folder_ops_run "$op" plain_run "$T/ref/d"
	folder_ops_run "$op" ck "$T/ck/d"
	same ref/d.said ck/d.said "what W's last open said"
	[ "$(cd ref && find . -type f ! -name d.said | sort)" = "$(cd ck && find . -type f ! -name d.said | sort)" ] ||
		fail "the files differ: $(cd ck && find . -type f ! -name d.said | sort | head -5 | tr '\n' ' ')" \
			"against $(cd ref && find . -type f ! -name d.said | sort | head -5 | tr '\n' ' ')"
	local f
	for f in $(cd ref && find . -type f ! -name d.said); do
		same "ref/$f" "ck/$f" "$f at its real path"
	done
	grep -q 'ckptcache: error' "$T/.log" && fail "the library reported an error$(first_error 'ckptcache: error')"
	return 0
}

case_add shared/folder-removed-rm folder_ops rm
case_add shared/folder-removed-rmtree folder_ops rmtree
case_add shared/folder-moved folder_ops mv

# watched_status HOW: the program has written a checkpoint (its cache has
# started), then keeps a status file open in the same folder and flushes a
# line into it; a process without the library waits for that line, and
# the program waits for the watcher's answer (a file) before it writes the
# next line; three rounds. HOW: python (a text file object's flush), or
# shell (printf into a descriptor bash keeps open with exec 3>). Without
# the library each handshake takes a poll; with it the status file is left
# unwritten, open, and must reach its real path (at most 10 s a round
# before the case fails, where it would wait for ever).
watched_status() {
	local how=$1
	rm -rf marks
	mkdir -p marks
	plain "$PY" -c '
import os, sys, time
d = sys.argv[1]
for r in range(1, 4):
    t0 = time.time()
    seen = b""
    while b"round %d ready" % r not in seen and time.time() - t0 < 10:
        try:
            seen = open(d + "/ck/status.txt", "rb").read()
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    if b"round %d ready" % r not in seen:
        print("the watcher did not see round %d in 10 s: %r" % (r, seen[-60:]))
        sys.exit(1)
    print("round %d seen after %.2f s" % (r, time.time() - t0))
    open(d + "/marks/ack.%d" % r, "w").close()
' "$T" >marks/watcher.out 2>&1 &
	local watcher=$!
	case $how in
	python)
		ck -- "$PY" -c '
import os, sys, time
d = sys.argv[1]
open(d + "/ck/first.bin", "wb").write(os.urandom(3 << 20))
with open(d + "/ck/status.txt", "w") as f:
    for r in range(1, 4):
        f.write("round %d ready\n" % r)
        f.flush()
        t0 = time.time()
        while not os.path.exists(d + "/marks/ack.%d" % r) and time.time() - t0 < 12:
            time.sleep(0.01)
        if not os.path.exists(d + "/marks/ack.%d" % r):
            sys.exit("no answer to round %d" % r)
    f.write("finished\n")
' "$T" || { kill $watcher 2>/dev/null; fail "the program$(last_error): $(cat marks/watcher.out)"; } ;;
	shell)
		ck -- bash -c '
d=$1
head -c 3145728 /dev/urandom >"$d/ck/first.bin"
# the shell waits with its own read, not sleep: a child given the open
# status file would take it to its real path
mkfifo "$d/marks/tick"
exec 5<>"$d/marks/tick"
exec 3>"$d/ck/status.txt"
for r in 1 2 3; do
	printf "round %d ready\n" $r >&3
	n=0
	while [ ! -e "$d/marks/ack.$r" ] && [ $n -lt 1200 ]; do read -r -t 0.01 -u 5; n=$((n + 1)); done
	[ -e "$d/marks/ack.$r" ] || { echo "no answer to round $r" >&2; exit 1; }
done
echo finished >&3
exec 3>&-
' _ "$T" || { kill $watcher 2>/dev/null; fail "the program$(last_error): $(cat marks/watcher.out)"; } ;;
	esac
	wait $watcher || fail "$(cat marks/watcher.out)"
	cat marks/watcher.out
	printf 'round %d ready\n' 1 2 3 >want.txt
	echo finished >>want.txt
	same want.txt ck/status.txt "status.txt at its real path"
	[ "$(plain wc -c <ck/first.bin)" = 3145728 ] || fail "first.bin at its real path: $(plain wc -c <ck/first.bin) bytes"
	return 0
}
case_add_waits shared/watched-status-python watched_status python
case_add_waits shared/watched-status-shell watched_status shell

# A status log the program keeps open and flushes every 0.2 s for 2.4 s
# (never unwritten for the half second after which a small open
# checkpoint goes to its real file): a monitor without the library (a
# tail -f) sees each line within 1.5 s of its flush (without the library
# it sees it at once; before the bound on how long such a file stays in
# the cache while open, it saw every line at the close, 2.4 s after the
# first), and the log holds every line at its real path.
status_log_flushed_often() {
	plain "$PY" -c '
import sys, time
f, seen, t0, worst = sys.argv[1], 0, time.time(), 0.0
while time.time() - t0 < 5:
    try:
        lines = open(f).read().splitlines()
    except FileNotFoundError:
        lines = []
    for l in lines[seen:]:
        p = l.split()
        if len(p) == 3:
            worst = max(worst, time.time() - float(p[2]))
    seen = max(seen, len(lines))
    if seen >= 12:
        break
    time.sleep(0.02)
print(seen, "%.2f" % worst)
' "$T/ck/status.log" >monitor.out 2>&1 &
	local mon=$! lines worst
	ck -- "$PY" -c '
import os, sys, time
d = sys.argv[1]
open(d + "/first.bin", "wb").write(os.urandom(3 << 20))
with open(d + "/status.log", "w") as f:
    for i in range(12):
        f.write("step %d %.3f\n" % (i, time.time()))
        f.flush()
        time.sleep(0.2)
' "$T/ck" || { kill $mon 2>/dev/null; fail "the program$(last_error)"; }
	wait $mon || fail "the monitor: $(cat monitor.out)"
	read -r lines worst <monitor.out
	[ "$lines" = 12 ] || fail "the monitor saw $lines of 12 lines: $(cat monitor.out)"
	awk -v w="$worst" 'BEGIN { exit !(w < 1.5) }' || fail "a line reached the monitor $worst s after its flush (bound 1.5 s)"
	[ "$(plain wc -l <ck/status.log)" = 12 ] || fail "status.log at its real path: $(plain wc -l <ck/status.log) lines"
	echo "monitor: $lines lines, worst $worst s" >&2
	# the folder takes no new file (ENOSPC for the library's files and
	# renames): the hand-over fails once and is not tried at each look
	# after it (each try an error), the program reads its 12 lines, and
	# they are in the rescue file the end makes
	rm -rf "$T/ck" rescue && mkdir -p "$T/ck" rescue
	FAIL_ERRNO=28 ck SLOWFS_OPS=rename,open CKPTCACHE_RESCUE_DIR="$T/rescue" -- "$PY" -c '
import sys, time
d = sys.argv[1]
with open(d + "/status.log", "w") as f:
    for i in range(12):
        f.write("step %d\n" % i)
        f.flush()
        time.sleep(0.2)
assert open(d + "/status.log").read().count("step") == 12
' "$T/ck" 2>err.txt || fail "the program, its folder full$(last_error)"
	local tries
	tries=$(grep -c 'could not write checkpoint .*status.log' err.txt)
	[ "$tries" -le 2 ] || fail "$tries errors for one checkpoint whose folder is full (the hand-over tried at each look)"
	plain "$PY" -c '
import glob, sys
r = glob.glob(sys.argv[1] + "/*/rescue.*-status.log")
assert len(r) == 1 and open(r[0]).read() == "".join("step %d\n" % i for i in range(12)), r
' "$T/rescue" || fail "the rescue file of status.log$(last_error): $(head -c 300 err.txt)"
	return 0
}
case_add_waits shared/status-log-flushed-often status_log_flushed_often

# Patterns with the rank ("%r"): rank 1 writes and closes its checkpoints,
# tells rank 0 through a pipe and stays; rank 0, which holds checkpoints of
# its own, opens and stats rank 1's (untagged for it): it reads them whole,
# as without the library (their holder is asked to publish them first; its
# publications take 0.7 s each here, as on a slow file system). Before,
# rank 0's open met ENOENT.
other_rank_reads() {
	[ -n "$SLOWFS" ] || fail "the slow-metadata shim (tests/e2e/slowfs.c) did not compile"
	cat >ranks.py <<'PYEOF'
import os, sys, time
d, role = sys.argv[1], sys.argv[2]
size = 1 << 20
if role == "w":
    for k in range(3):
        with open(f"{d}/ckpt{k}.1", "wb") as f:
            f.write(bytes([65 + k]) * size)
    print("done", flush=True)
    time.sleep(1.5)
    sys.exit(0)
for k in range(2):
    with open(f"{d}/ckpt{k}.0", "wb") as f:
        f.write(bytes([97 + k]) * size)
sys.stdin.readline()
bad = []
for k in range(3):
    p = f"{d}/ckpt{k}.1"
    try:
        st = os.stat(p).st_size
        data = open(p, "rb").read()
    except OSError as e:
        bad.append(f"{p}: {e}")
        continue
    if st != size or data != bytes([65 + k]) * size:
        bad.append(f"{p}: stat {st}, read {len(data)} bytes")
if bad:
    sys.exit("rank 0: " + "; ".join(bad))
PYEOF
	local round
	for round in $(seq "$(rounds 2 2 1)"); do
		rm -rf ck && mkdir ck
		timeout -k 5 "$CASE_TIMEOUT" bash -c '
			w() { OMPI_COMM_WORLD_RANK=1 "$@"; }
			r() { OMPI_COMM_WORLD_RANK=0 "$@"; }
			set -o pipefail
			w env CKPTCACHE_PATHS="$1/*.%r" CKPTCACHE_STEP_ASIDE=off LD_PRELOAD="$2 $4" SLOWFS_MATCH="$1" \
				SLOWFS_OPS=rename SLOWFS_US=700000 "$3" ranks.py "$1" w |
				r env CKPTCACHE_PATHS="$1/*.%r" CKPTCACHE_STEP_ASIDE=off LD_PRELOAD="$2" "$3" ranks.py "$1" r
		' _ "$T/ck" "$PRELOAD" "$PY" "$SLOWFS" || fail "round $round: rank 0 did not read rank 1's checkpoints$(last_error)"
		plain "$PY" -c '
import sys
for k in range(3):
    assert open(f"{sys.argv[1]}/ckpt{k}.1", "rb").read() == bytes([65 + k]) * (1 << 20), k
for k in range(2):
    assert open(f"{sys.argv[1]}/ckpt{k}.0", "rb").read() == bytes([97 + k]) * (1 << 20), k
' "$T/ck" || fail "round $round: the checkpoints at their real paths"
	done
}
case_add_waits shared/other-rank-reads other_rank_reads

# A reader that looked at a folder in which no process held anything
# (while another job held checkpoints in a folder beside it), then, after
# a new holder closed new versions of that folder's files, reads them:
# it gets the new versions, as without the library. The reader keeps the
# folder it found empty of holders only while no process has begun to
# hold something in a folder since; a reader that kept it longer read the
# old bytes here. The holders' publications take 2 s each, as on a
# slow file system, so that the versions are still theirs when the
# reader looks.
stat_after_folder_held() {
	[ -n "$SLOWFS" ] || fail "the slow-metadata shim (tests/e2e/slowfs.c) did not compile"
	cat >roles.py <<'PYEOF'
import os, sys, time
d, role = sys.argv[1], sys.argv[2]
def body(tag, k, n):
    return bytes([tag + k]) * n
if role == "hold":  # checkpoints in a folder of their own, kept
    for k in range(2):
        with open(f"{d}/a/x{k}.bin", "wb") as f:
            f.write(body(97, k, 300000))
    print("ready", flush=True)
    sys.stdin.readline()
elif role == "new":  # new versions of b's files
    for k in range(2):
        with open(f"{d}/b/c{k}.bin", "wb") as f:
            f.write(body(75, k, 200000 + k))
    print("ready", flush=True)
    sys.stdin.readline()
else:  # the reader: b's files, before and after the new holder's
    def look(want):
        bad = []
        for k in range(2):
            p = f"{d}/b/c{k}.bin"
            st = os.stat(p).st_size
            data = open(p, "rb").read()
            if (st, data) != (len(want(k)), want(k)):
                bad.append(f"c{k}.bin: stat {st}, read {len(data)} bytes starting {data[:1]!r}")
        return bad
    bad = look(lambda k: body(65, k, 100000))
    print("looked", flush=True)
    sys.stdin.readline()
    bad += look(lambda k: body(75, k, 200000 + k))
    print("bad: " + "; ".join(bad) if bad else "ok", flush=True)
PYEOF
	cat >drive.py <<'PYEOF'
import subprocess, sys
d, lib, slow, py = sys.argv[1:5]
env = dict(__import__("os").environ, CKPTCACHE_PATHS=f"{d}/*/*.bin", CKPTCACHE_STEP_ASIDE="off")
slowenv = dict(env, LD_PRELOAD=f"{lib} {slow}", SLOWFS_MATCH=d, SLOWFS_OPS="rename", SLOWFS_US="2000000")
def start(role, e):
    return subprocess.Popen([py, "roles.py", d, role], env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def line(p, want):
    got = p.stdout.readline().strip()
    if got != want:
        sys.exit(f"expected {want!r}, got {got!r}")
hold = start("hold", slowenv)
line(hold, "ready")
reader = start("read", dict(env, LD_PRELOAD=lib))
line(reader, "looked")
new = start("new", slowenv)
line(new, "ready")
reader.stdin.write("go\n")
reader.stdin.flush()
out = reader.stdout.readline().strip()
for p in (hold, new):
    p.stdin.write("end\n")
    p.stdin.flush()
rc = [p.wait(timeout=60) for p in (reader, hold, new)]
print(out)
sys.exit(0 if out == "ok" and rc == [0, 0, 0] else f"reader: {out}; exits {rc}")
PYEOF
	local round k
	for round in $(seq "$(rounds 2 1)"); do
		rm -rf ck && mkdir -p ck/a ck/b
		plain "$PY" -c '
import sys
for k in range(2):
    open(f"{sys.argv[1]}/b/c{k}.bin", "wb").write(bytes([65 + k]) * 100000)' "$T/ck"
		plain "$PY" drive.py "$T/ck" "$PRELOAD" "$SLOWFS" "$PY" >drive.out 2>&1 ||
			fail "round $round: $(tail -3 drive.out)$(last_error)"
		plain "$PY" -c '
import sys
for k in range(2):
    assert open(f"{sys.argv[1]}/b/c{k}.bin", "rb").read() == bytes([75 + k]) * (200000 + k), k
    assert open(f"{sys.argv[1]}/a/x{k}.bin", "rb").read() == bytes([97 + k]) * 300000, k
' "$T/ck" || fail "round $round: the checkpoints at their real paths"
	done
}
case_add_waits shared/stat-after-a-folder-is-held stat_after_folder_held
