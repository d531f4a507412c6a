# Robustness: long but legal names, a thread writing while the program
# exits, a symbolic link followed by "..", rescue and statistics files that
# another user (nobody, through setpriv) cannot read, replace or redirect,
# what a killed program leaves behind and who cleans it up, SIGTERM, settings
# checked at start, hint files that are FIFOs or floods of bad lines, and the
# POSIX results of O_CREAT|O_EXCL and of a rename into a missing folder.

# A checkpoint's bytes, made once per case.
src_file() {
	[ -f src.bin ] || randfile src.bin "${1:-3000017}"
}

# The rescue files of the case: in the private folder of the rescue
# directory (the case folder).
rescue_files() {
	find "$T/ckptcache-$(id -u)" -maxdepth 1 -name 'rescue.*' ! -name rescue.index 2>/dev/null
}

# as_nobody CMD...: CMD as the user nobody, or the case is noted as not
# runnable here.
as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
}

need_nobody() {
	command -v setpriv >/dev/null || note "no setpriv here: the other-user cases need it"
	[ "$(id -u)" -eq 0 ] || note "not root: setpriv cannot become nobody"
	id nobody >/dev/null 2>&1 && getent group nogroup >/dev/null || note "no user nobody or group nogroup here"
	# the case folder is the shared folder the other user may write into
	chmod 1777 "$T"
}

# ---- long names ------------------------------------------------------------------

# Names of 244 and 255 bytes (the longest a component may be): copied with
# cp and written by Python, read back in the process and at the real path.
long_names() {
	src_file
	local n244 n255
	n244=$(printf 'a%.0s' $(seq 240)).bin
	n255=$(printf 'b%.0s' $(seq 251)).bin
	ck -- sh -c 'cp src.bin "ck/$1" && cmp src.bin "ck/$1" && dd if=src.bin of="ck/$2" bs=1M status=none &&
		cmp src.bin "ck/$2"' \
		sh "$n244" "$n255" || fail "long names: copy or read back in the process failed$(last_error)"
	ck -- "$PY" -c '
import sys
data = open("src.bin", "rb").read()
p = "ck/" + "c" * 250 + ".npy"
with open(p, "wb") as f:
    f.write(data)
assert open(p, "rb").read() == data, "read back in the process"
' || fail "long names: Python's write and read back failed$(last_error)"
	grep -a 'ckptcache: error' "$T/.log" && fail "long names: the library reported an error$(first_error 'ckptcache: error')"
	same src.bin "ck/$n244" "a 244-byte name at its real path"
	same src.bin "ck/$n255" "a 255-byte name at its real path"
	same src.bin "ck/$(printf 'c%.0s' $(seq 250)).npy" "a 254-byte name written by Python at its real path"
	only_names ck '^[abc]+\.(bin|npy)$' "after exit"
	[ -z "$(rescue_files)" ] || fail "long names: rescue files were made: $(rescue_files)"
}

# A path of about 600 characters whose real file cannot be written (its
# publication fails): the rescue file keeps it, with the real path in the
# rescue index, and the process reads it back.
long_path_rescue() {
	src_file
	local d=ck/$(printf 'd%.0s' $(seq 200))/$(printf 'e%.0s' $(seq 200))
	mkdir -p "$d" warm
	local p=$d/$(printf 'f%.0s' $(seq 180)).bin
	# (warm/w.bin, tagged and published there, is the first checkpoint,
	# which stepping aside sends to its real path before the cache starts)
	SLOW_MATCH="$T/ck/" SLOWFS_OPS=rename FAIL_ERRNO=5 ck CKPTCACHE_PATHS="$T/ck/**:$T/warm/*" -- "$PY" -c '
import sys
open("warm/w.bin", "wb").write(b"first")
p, data = sys.argv[1], open("src.bin", "rb").read()
with open(p, "wb") as f:
    f.write(data)
assert open(p, "rb").read() == data, "read back in the process"
' "$p" >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "long path rescue: exit status $rc"
	local r
	r=$(sed -n 's/.*its [0-9]* bytes are saved in \(.*\)$/\1/p' err.txt | head -1)
	[ -n "$r" ] || fail "long path rescue: no message saying where the bytes are$(first_error 'ckptcache: error')"
	[ "$(dirname "$r")" = "$T/ckptcache-$(id -u)" ] || fail "long path rescue: the rescue file $r is not in the private folder"
	same src.bin "$r" "the rescue file"
	grep -qF "	$T/$p" "$(dirname "$r")/rescue.index" || fail "long path rescue: the index does not map $(basename "$r") to the real path"
}

# ---- a thread writing while the program exits -------------------------------------

# exit_race_run ACTION STATUS [OTHER_STATUS]: 30 checkpoints closed, one empty file left
# open, and a thread writing when the main thread calls exit(0), with slow
# publications so that the exit drain takes a while; the thread gives up
# (exit(1), abort()) if one of its calls fails, or aborts during the drain.
exit_race_run() {
	local action=$1 want=$2 also=${3:-$2} i f
	need_helper
	rm -rf ck && mkdir ck
	SLOW_US=40000 SLOWFS_OPS=rename ck CKPTCACHE_HOST_CACHE=128M -- "$HELPER" exitrace "$T/ck" 30 1M 5 "$action" \
		>out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	grep -a 'writer:' err.txt && fail "$action: a write of the thread failed while the program exited$(first_error 'writer:')"
	[ $rc -eq "$want" ] || [ $rc -eq "$also" ] ||
		fail "$action: $(status_text $rc), expected $(status_text "$want")$(last_error)"
	for ((i = 0; i < 30; i++)); do
		run_ok "$action: closed checkpoint $i at its real path" plain "$HELPER" check "$(printf 'ck/done_%02d.bin' $i)" 1M $((5 + i))
	done
	[ -f ck/empty.bin ] && [ ! -s ck/empty.bin ] || fail "$action: the empty file still open at exit is not there, empty"
	for f in ck/live_*.bin; do
		i=$((10#$(basename "$f" .bin | sed 's/live_//')))
		run_ok "$action: $f holds what the thread wrote" plain "$HELPER" prefix "$f" $((5 + 1000 + i))
	done
	only_names ck '^(done|live)_[0-9]+\.bin$|^empty\.bin$' "$action: after exit"
}

exit_race() {
	exit_race_run exit 0
	# the exit may also end first, once the drain is done
	exit_race_run abort-late 134 0
}

# ---- symbolic links -------------------------------------------------------------------

# ck/lnk -> deep/sub: ck/lnk/../x.bin is ck/deep/x.bin for the kernel, not
# ck/x.bin; ck/none/../y.bin does not exist for it at all.
symlink_dotdot() {
	src_file
	mkdir -p ck/deep/sub
	ln -s deep/sub ck/lnk
	echo "the file that must stay" >ck/x.bin
	cp ck/x.bin keep.txt
	ck -- sh -c 'cp src.bin ck/lnk/../x.bin && cmp src.bin ck/lnk/../x.bin && cmp src.bin ck/deep/x.bin' ||
		fail "cp through lnk/..: failed, or read back other bytes in the process$(last_error)"
	ck -- sh -c 'cp src.bin ck/none/../y.bin' 2>err.txt && fail "cp into ck/none/../y.bin succeeded: the kernel says ENOENT"
	grep -q 'No such file' err.txt || fail "cp into ck/none/../y.bin: $(cat err.txt)"
	same src.bin ck/deep/x.bin "ck/lnk/../x.bin (ck/deep/x.bin) at its real path"
	same keep.txt ck/x.bin "ck/x.bin, which ck/lnk/../x.bin is not"
	absent ck/y.bin "ck/none/../y.bin"
}

# Checkpoints waiting to be published (each naming slowed), read through
# links by open(2), fopen(3) and Python: a "latest" link made before its
# new file, a folder's link both ways, a link to a file rewritten, a folder
# link retargeted after a file was written through it, a dangling link.
# The kernel's walk finds the new files missing and the rewritten one old:
# each read gets the bytes written, and the real paths get them after exit.
links_unpublished() {
	mkdir -p ck/run_real ck/blk ref
	echo "the version before" >ck/old.bin
	SLOW_US=400000 SLOWFS_OPS=rename ck -- "$PY" -c '
import ctypes, errno, os, random, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fread.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]

def write(path, i, n):
    b = random.Random(i).randbytes(n)
    with open(path, "wb") as f:
        f.write(b)
    with open("ref/" + path.replace("/", "_"), "wb") as f:
        f.write(b)
    return b

def fread(path, n):
    f = libc.fopen(path.encode(), b"rb")
    if not f:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), path)
    buf = ctypes.create_string_buffer(n + 1)
    k = libc.fread(buf, 1, n + 1, f)
    libc.fclose(f)
    return buf.raw[:k]

def osread(path, n):
    fd = os.open(path, os.O_RDONLY)
    out = b""
    while True:
        c = os.read(fd, n + 1)
        if not c:
            break
        out += c
    os.close(fd)
    return out

def check(path, want, what):
    assert os.stat(path).st_size == len(want), f"{what}: stat {path}: {os.stat(path).st_size}"
    for how, r in (("open", lambda: open(path, "rb").read()), ("os.open", lambda: osread(path, len(want))),
                   ("fopen", lambda: fread(path, len(want)))):
        got = r()
        assert got == want, f"{what}: {how} of {path} read {len(got)} bytes, other than written"

# their slowed namings in another folder keep the others waiting (a naming
# in a folder holds the lookups of the program there until it ends)
for k in range(4):
    write(f"ck/blk/b{k}.bin", k, 100)
# (a link made to a checkpoint held publishes it: these are made first)
for k in range(3):
    if os.path.lexists("ck/latest.bin"):
        os.unlink("ck/latest.bin")
    os.symlink(f"c{k}.bin", "ck/latest.bin")
    b = write(f"ck/c{k}.bin", 10 + k, 70000 + k)
    check("ck/latest.bin", b, "a latest link to a new file")
os.symlink("run_real", "ck/run")
b = write("ck/run_real/s.bin", 20, 50000)
check("ck/run/s.bin", b, "written in a folder, read through its link")
b = write("ck/run/t.bin", 21, 40000)
check("ck/run_real/t.bin", b, "written through a folder link, read in the folder")
b = write("ck/old.bin", 22, 30000)
os.symlink("old.bin", "ck/cur.bin")
check("ck/cur.bin", b, "a link to a file rewritten")
# a folder link retargeted (a rename over it) while a file written through
# it waits: that file is in the folder the link led to
os.makedirs("ck/r1")
os.makedirs("ck/r2")
os.symlink("r1", "ck/cur")
b = write("ck/cur/c.bin", 23, 20000)
os.symlink("r2", "ck/cur.tmp")
os.rename("ck/cur.tmp", "ck/cur")
check("ck/r1/c.bin", b, "written through a folder link since retargeted")
assert not os.path.exists("ck/cur/c.bin"), "the retargeted link shows the file of the folder it left"
os.symlink("missing.bin", "ck/none.bin")
for how, r in (("open", lambda: open("ck/none.bin", "rb")), ("fopen", lambda: fread("ck/none.bin", 1))):
    try:
        r()
        raise AssertionError(f"{how} of a dangling link succeeded")
    except OSError as e:
        assert e.errno == errno.ENOENT, f"{how} of a dangling link: {e}"
print("ok")
' || fail "a read through a link$(last_error)"
	grep -q 'ckptcache: error' "$T/.log" && fail "an error message:$(first_error 'ckptcache: error')"
	same ref/ck_c2.bin ck/c2.bin "c2.bin at its real path"
	same ref/ck_c2.bin ck/latest.bin "latest.bin at its real path"
	same ref/ck_run_real_s.bin ck/run_real/s.bin "run_real/s.bin at its real path"
	same ref/ck_run_t.bin ck/run_real/t.bin "run_real/t.bin at its real path"
	same ref/ck_old.bin ck/old.bin "old.bin at its real path"
	same ref/ck_cur_c.bin ck/r1/c.bin "r1/c.bin, written through the link cur before it was retargeted"
	absent ck/r2/c.bin "the retargeted link's new folder"
}

# err.txt says that a checkpoint was changed at its real path by another
# program, and the folder rescue holds the version "cached version" of $1.
rescued_said() {
	grep -q 'was changed at its real path by another program' err.txt ||
		fail "no message that $1 was changed by another program"
	local r
	r=$(find rescue -type f -name "rescue.*$1" | head -1)
	[ -n "$r" ] || fail "no rescue file of the cached version of $1"
	[ "$(cat "$r")" = "cached version" ] || fail "the rescue file of $1 holds '$(cat "$r")'"
}

# A new checkpoint closed and waiting to be published (its publication
# slowed); another program makes a symbolic link at its name meanwhile (no
# target). That link is newer than the cached version: it is kept, and the
# version goes to a rescue file, said where.
symlink_made_meanwhile() {
	mkdir -p ck/sub rescue
	SLOW_US=400000 SLOWFS_OPS=open ck CKPTCACHE_RESCUE_DIR="$T/rescue" -- "$PY" -c '
import sys, time
with open("ck/sub/x.bin", "wb") as f:
    f.write(b"cached version\n")
print("closed", flush=True)
time.sleep(1.5)
' 2>err.txt | { read -r l; [ "$l" = closed ] && ln -s "$T/nowhere" ck/sub/x.bin; cat >/dev/null; }
	cat err.txt
	[ -L ck/sub/x.bin ] || fail "the symbolic link made at the name while the version waited was replaced"
	absent nowhere "the link's target (nothing wrote through the link)"
	rescued_said x.bin
}

# A checkpoint that replaces a file is published by a rename that takes a
# second (a parallel file system's metadata); another program replaces
# the file with a rename of its own after the library last looked at it,
# while that rename waits. The other program's file is newer: it keeps
# the name, and the version goes to a rescue file, said where (a rename of
# the version would have replaced it for good).
replaced_while_publishing() {
	mkdir -p rescue
	printf 'first version\n' >ck/r.bin
	printf 'the other program\n' >other.tmp
	SLOW_US=1000000 SLOW_MATCH="$T/ck/r.bin" SLOWFS_OPS=rename ck CKPTCACHE_RESCUE_DIR="$T/rescue" \
		CKPTCACHE_STEP_ASIDE=off -- "$PY" -c '
import time
with open("ck/r.bin", "wb") as f:
    f.write(b"cached version\n")
print("closed", flush=True)
time.sleep(3)
assert open("ck/r.bin", "rb").read() == b"the other program\n", "the program reads another version"
' 2>err.txt | { read -r l; [ "$l" = closed ] && sleep 0.3 && mv other.tmp ck/r.bin; cat >/dev/null; }
	cat err.txt
	[ "$(cat ck/r.bin)" = "the other program" ] ||
		fail "the other program's file was replaced by the version it replaced: r.bin holds '$(cat ck/r.bin)'"
	rescued_said r.bin
	[ -z "$(find ck -name '.ckc.*')" ] || fail "temporary files left: $(find ck -name '.ckc.*')"
}

# One thread fsyncs a checkpoint in a loop while another closes it (a
# logger's flush beside the main thread's close): every file is complete at
# its real path, and no false report of a checkpoint that did not reach it.
fsync_beside_close() {
	ck CKPTCACHE_HOST_CACHE=64M -- "$PY" -c '
import os, threading
for i in range(20):
    data = bytes([97 + i % 26]) * 4000000
    fd = os.open(f"ck/f{i:02d}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = threading.Event()
    def syncer():
        os.write(fd, data)
        written.set()
        while True:
            try:
                os.fsync(fd)
            except OSError:
                break
    t = threading.Thread(target=syncer)
    t.start()
    written.wait()
    os.close(fd)
    t.join()
    with open(f"ck/f{i:02d}.bin", "rb") as f:
        assert f.read() == data, f"f{i:02d}.bin read back in the process"
' 2>err.txt || fail "the program failed: $(tail -1 err.txt)"
	if grep -q 'ckptcache: error' err.txt; then
		fail "the library reported an error: $(grep -m1 'ckptcache: error' err.txt)"
	fi
	plain "$PY" -c '
for i in range(20):
    assert open(f"ck/f{i:02d}.bin", "rb").read() == bytes([97 + i % 26]) * 4000000, f"f{i:02d}.bin at its real path"
' || fail "the files at their real paths$(last_error)"
}

# utime on a checkpoint still open for writing, then more writes: its
# modification time is the writes' again, as on a real file, before and
# after the close.
utime_then_write() {
	ck -- "$PY" -c '
import os, time
p = "ck/last.bin"
with open(p, "wb") as f:
    f.write(b"part1")
    f.flush()
    os.utime(p, (1000000000, 1000000000))
    assert os.stat(p).st_mtime == 1000000000, "utime did not take"
    f.write(b"part2")
    f.flush()
    now = time.time()
    for what, m in (("stat", os.stat(p).st_mtime), ("fstat", os.fstat(f.fileno()).st_mtime)):
        assert abs(m - now) < 60, f"{what} before close: mtime {m:.0f}, now {now:.0f}"
assert abs(os.stat(p).st_mtime - time.time()) < 60, "after close"
' || fail "the modification time after utime and a write$(last_error)"
	[ "$(cat ck/last.bin)" = part1part2 ] || fail "ck/last.bin holds '$(cat ck/last.bin)'"
}

# A checkpoint, then a marker file the program writes after it (a build
# tool's stamp, a job's "done" file): once the library published the
# checkpoint, it is not newer than the marker, and its times are those
# stat(2) reported in the process before the publication; a checkpoint
# whose times the program set keeps them. Bytes compared at the real paths.
times_order() {
	ck -- "$PY" -c '
import os, time
data = bytes(range(256)) * 8192
with open("ck/a.bin", "wb") as f:
    f.write(data)
seen = os.stat("ck/a.bin")
with open("ck/set.bin", "wb") as f:
    f.write(data[::-1])
os.utime("ck/set.bin", ns=(1000000000123456789, 1000000000987654321))
time.sleep(0.05)
with open("marker", "w") as f:
    f.write("done")
open("seen.txt", "w").write("%d %d" % (seen.st_atime_ns, seen.st_mtime_ns))
assert open("ck/a.bin", "rb").read() == data, "a.bin read back in the process"
' || fail "the program failed$(last_error)"
	plain "$PY" -c '
import os
data = bytes(range(256)) * 8192
# the times first: a read moves the access time (relatime)
a, m, s = os.stat("ck/a.bin"), os.stat("marker"), os.stat("ck/set.bin")
assert open("ck/a.bin", "rb").read() == data, "a.bin at its real path"
assert open("ck/set.bin", "rb").read() == data[::-1], "set.bin at its real path"
atime, mtime = map(int, open("seen.txt").read().split())
assert a.st_mtime_ns <= m.st_mtime_ns, f"a.bin ({a.st_mtime_ns}) is newer than the marker written after it ({m.st_mtime_ns})"
assert (a.st_atime_ns, a.st_mtime_ns) == (atime, mtime), f"a.bin: {a.st_atime_ns} {a.st_mtime_ns}, stat said {atime} {mtime}"
assert (s.st_atime_ns, s.st_mtime_ns) == (1000000000123456789, 1000000000987654321), f"set.bin: {s.st_atime_ns} {s.st_mtime_ns}"
' || fail "the published times$(last_error)"
}

# ---- other users ----------------------------------------------------------------------

# plant_and_run PLANT -- CMD...: runs PLANT as nobody (with $PID, the pid the
# program will have, set), then CMD (under the library) in the same process.
plant_and_run() {
	local plant=$1
	shift 2
	ck "${RUN_ENV[@]}" -- sh -c 'PID=$$ setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c "$1" && shift && exec "$@"' \
		sh "$plant" "$@"
}

# Another user plants files where an earlier library put rescue files (the
# shared folder, a name made of the pid and the path): a 0666 file to read
# the rescued checkpoint, and a symbolic link to make the victim overwrite
# its own file. The rescue files must go elsewhere, privately.
rescue_planted() {
	need_nobody
	src_file
	echo "the victim's own file" >victim.txt
	chmod 644 victim.txt
	cp victim.txt victim.ref
	local flat_a flat_b
	flat_a=$(printf '%s' "$T/ck/a.bin" | tr / _)
	flat_b=$(printf '%s' "$T/ck/b.bin" | tr / _)
	mkdir -p warm
	chmod 777 warm
	# (warm/w.bin: the first checkpoint, as in long_path_rescue)
	RUN_ENV=(CKPTCACHE_HOST_CACHE=32M CKPTCACHE_PATHS="$T/ck/**:$T/warm/*")
	SLOW_MATCH="$T/ck/" SLOWFS_OPS=rename FAIL_ERRNO=5 plant_and_run "
		umask 0; : >'$T/ckptcache-rescue.'\$PID'$flat_a'; chmod 666 '$T/ckptcache-rescue.'\$PID'$flat_a'
		ln -s '$T/victim.txt' '$T/ckptcache-rescue.'\$PID'$flat_b'" -- "$PY" -c '
open("warm/w.bin", "wb").write(b"first")
data = open("src.bin", "rb").read()
for p in ("ck/a.bin", "ck/b.bin"):
    with open(p, "wb") as f:
        f.write(data)
    assert open(p, "rb").read() == data
' >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "rescue with planted files: exit status $rc"
	same victim.ref victim.txt "the victim's file, which a planted symbolic link points to"
	local f
	for f in "$T"/ckptcache-rescue.*; do
		[ -L "$f" ] && continue
		[ -s "$f" ] && fail "the other user's planted file $(basename "$f") received $(stat -c %s "$f") bytes"
	done
	local priv=$T/ckptcache-$(id -u) n=0
	[ "$(stat -c '%a %U' "$priv")" = "700 $(id -un)" ] || fail "the private folder is $(stat -c '%a %U' "$priv")"
	for f in $(rescue_files); do
		n=$((n + 1))
		[ "$(stat -c '%a %U' "$f")" = "600 $(id -un)" ] || fail "rescue file $f is $(stat -c '%a %U' "$f")"
		same src.bin "$f" "rescue file $(basename "$f")"
	done
	[ $n -eq 2 ] || fail "expected 2 rescue files in $priv, found $n"
	as_nobody cat "$(rescue_files | head -1)" >/dev/null 2>&1 && fail "the other user can read a rescue file"
	return 0
}

# A symbolic link planted where the statistics (or trace) file will be
# written, towards a file of the victim's.
stats_planted() {
	need_nobody
	echo "the victim's own file" >victim.txt
	cp victim.txt victim.ref
	as_nobody ln -s "$T/victim.txt" "$T/stats.json"
	as_nobody ln -s "$T/victim.txt" "$T/trace.txt"
	src_file 100000
	ck CKPTCACHE_STATS="$T/stats.json" CKPTCACHE_TRACE="$T/trace.txt" -- "$PY" -c '
data = open("src.bin", "rb").read()
with open("ck/s.bin", "wb") as f:
    f.write(data)
assert open("ck/s.bin", "rb").read() == data
' >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "statistics towards a planted link: exit status $rc"
	same victim.ref victim.txt "the victim's file, which planted links named CKPTCACHE_STATS and CKPTCACHE_TRACE point to"
	grep -q 'CKPTCACHE_STATS' err.txt || fail "no message about the statistics file that was not written"
	grep -q 'CKPTCACHE_TRACE' err.txt || fail "no message about the trace file that was not written"
	same src.bin ck/s.bin "ck/s.bin at its real path"
}

# The private folder made by another user: the cache says whose it is and
# what to do, and the program's bytes are right.
foreign_folder() {
	need_nobody
	as_nobody mkdir -m 0755 "$T/ckptcache-$(id -u)"
	src_file
	ck CKPTCACHE_SSD_CACHE=16M -- sh -c 'cp src.bin ck/a.bin && cmp src.bin ck/a.bin' >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "a foreign private folder: exit status $rc"
	grep -q "belongs to user nobody" err.txt || fail "the message does not say whose the folder is: $(head -3 err.txt)"
	grep -q "remove it" err.txt || fail "the message does not say what to do: $(head -3 err.txt)"
	same src.bin ck/a.bin "ck/a.bin at its real path"
}

# ---- killed programs --------------------------------------------------------------------

# bg_writer ENV... -- N: python writes N checkpoints of src.bin, says
# "ready" and sleeps, under the library, in the background: $BG is its pid,
# $BGJOB the job to wait for.
bg_writer() {
	local envs=()
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	local n=$2
	# (the last writer's word goes first: the new one's redirection may
	# come after the first look)
	rm -f out.txt err.txt
	ck "${envs[@]}" -- "$PY" -c '
import os, sys, time
data, n = open("src.bin", "rb").read(), int(sys.argv[1])
for i in range(n):
    with open(f"ck/k{i}.bin", "wb") as f:
        f.write(data)
print("ready", os.getpid(), flush=True)
time.sleep(60)
' "$n" >out.txt 2>err.txt &
	BGJOB=$!
	local i
	for ((i = 0; i < 300; i++)); do
		BG=$(sed -n 's/^ready //p' out.txt 2>/dev/null)
		[ -n "$BG" ] && return 0
		sleep 0.05
	done
	fail "the writer never got ready$(last_error)"
}

# The leftovers of a process killed with SIGKILL while flushes were running
# (named temporary files, as file systems without O_TMPFILE need, and its ssd
# tier file) are shown and removed by ckptcache doctor, or by the next
# process that starts the cache.
killed_leftovers() {
	src_file 2000000
	local who
	for who in doctor next; do
		rm -rf ck "$T"/ckptcache-* && mkdir ck
		SLOW_US=3000000 SLOWFS_OPS=rename SLOWFS_NOTMPFILE=1 bg_writer CKPTCACHE_SSD_CACHE=64M -- 3
		sleep 0.3
		kill -9 $BG
		wait $BGJOB 2>/dev/null
		local left
		left=$(find ck "$T/ckptcache-$(id -u)" -name '.*ckc*' -o -name 'ssd.*' 2>/dev/null | sort)
		[ -n "$left" ] || note "the killed writer left nothing to clean up (too fast)"
		echo "left: $left"
		if [ $who = doctor ]; then
			CKPTCACHE_LIB=$LIB CKPTCACHE_DOCTOR=$(dirname "$LIB")/../doctor "$ROOT/scripts/ckptcache" doctor \
				--paths "$T/ck/**" --ssd-dir "$T" >doctor.txt 2>&1
			cat doctor.txt
			local f
			for f in $left; do
				grep -qF "$f" doctor.txt || fail "ckptcache doctor does not show $f"
			done
		else
			ck -- cp src.bin ck/z.bin || fail "the next run failed"
			same src.bin ck/z.bin "the next run's checkpoint"
		fi
		local f
		for f in $left; do
			[ -e "$f" ] && fail "$who: $f, left by the killed process, is still there"
		done
	done
	return 0
}

# The other signals whose default ends the program (a hang-up, a quit, a
# time limit's warning sent as SIGUSR1, an alarm) drain the cache as
# SIGTERM does: the program ends by the signal, and every checkpoint it
# closed is at its real path.
other_signals_drain() {
	src_file 1000000
	local sig num i rc
	for sig in HUP USR1 ALRM; do
		rm -f ck/*
		SLOW_US=150000 SLOWFS_OPS=rename bg_writer -- 3
		kill -$sig $BG
		wait $BGJOB
		rc=$?
		num=$(kill -l $sig)
		[ $rc -eq $((128 + num)) ] || fail "SIG$sig: $(status_text $rc), expected killed by SIG$sig"
		for ((i = 0; i < 3; i++)); do
			same src.bin ck/k$i.bin "SIG$sig: checkpoint $i at its real path"
		done
	done
}

# A signal whose default the program set back only after its first
# checkpoint (Python ignores SIGPIPE at its start; a program that wants
# "prog | head" to end it sets the default again, here after writing): the
# end by that signal drains the cache too. The closed checkpoints were
# lost: the library caught only the defaults left at its start.
default_set_later_drains() {
	local prog='
import os, signal, sys
d, sig = sys.argv[1], sys.argv[2]
data = bytes(range(256)) * 4000
for i in range(3):
    with open(f"{d}/late{i}.bin", "wb") as f:
        f.write(data)
signal.signal(getattr(signal, sig), signal.SIG_DFL)
print("set", flush=True)
if sig == "SIGPIPE":
    r, w = os.pipe()
    os.close(r)
    os.write(w, b"x")
else:
    os.kill(os.getpid(), getattr(signal, sig))
print("not ended", flush=True)
'
	local sig rc want i
	mkdir -p plainrun
	for sig in SIGPIPE SIGINT; do
		rm -f ck/* plainrun/*
		plain "$PY" -c "$prog" "$T/plainrun" $sig >want.txt
		want=$?
		SLOW_US=150000 SLOWFS_OPS=rename ck -- "$PY" -c "$prog" "$T/ck" $sig >got.txt
		rc=$?
		[ $rc -eq $want ] || fail "$sig: $(status_text $rc), without the library $(status_text $want)$(last_error)"
		outputs_match want.txt got.txt
		for ((i = 0; i < 3; i++)); do
			same plainrun/late$i.bin ck/late$i.bin "$sig: checkpoint $i at its real path"
		done
	done
}
case_add robust/default-set-later-drains default_set_later_drains

# exit(7) while four threads write and close checkpoints: the exit stops the
# node registry while the threads still close files, and hands over the
# files they still write while they close them; the process must end with
# status 7 every time (it died of SIGSEGV about one run in three), with no
# error (a use-after-free and false reports of lost checkpoints, about one
# run in twenty).
exit_beside_writers() {
	need_helper
	local i rc
	for ((i = 0; i < 10; i++)); do
		rm -rf ck
		mkdir ck
		ck CKPTCACHE_STEP_ASIDE=auto -- "$HELPER" exitthreads "$T/ck"
		rc=$?
		[ $rc -eq 7 ] || fail "run $i: $(status_text $rc), expected exit status 7$(last_error)"
		# a thread's close meeting the exit's hand-over: no error, no
		# false report of a checkpoint that did reach its real path
		if grep -aq 'ckptcache: error\|AddressSanitizer' "$T/.log"; then
			fail "run $i: the library reported an error$(first_error 'ckptcache: error|AddressSanitizer')"
		fi
	done
}

# A thread closes a cached checkpoint's descriptor while another reads it
# (pread, read, readv): the reader gets the file's bytes or EBADF, as
# without the library; under it the reader went on with the descriptor's
# freed handle (malloc_consolidate(): unaligned fastbin chunk detected, an
# abort, every run; ASan: a heap use after free in read_account).
close_during_read() {
	need_helper
	local i rc mode=${1:-closeread}
	for ((i = 0; i < 3; i++)); do
		rm -rf ck
		mkdir ck
		ck CKPTCACHE_STEP_ASIDE=off -- "$HELPER" "$mode" "$T/ck/c.bin"
		rc=$?
		[ $rc -eq 0 ] || fail "run $i: $(status_text $rc)$(last_error)"
		if grep -aq 'ckptcache: error\|AddressSanitizer\|malloc_\|double free\|corrupted' "$T/.log"; then
			fail "run $i: $(first_error 'ckptcache: error|AddressSanitizer|malloc_|double free|corrupted')"
		fi
		plain "$HELPER" rawcheck "$T/ck/c.bin" 4194381 31 || fail "run $i: the real file differs"
	done
}
case_add robust/close-during-read close_during_read
# The same for the calls that neither read nor write (ftruncate, fchmod,
# ioctl, fcntl, flock, poll, dup, the /proc name...): each took the
# descriptor without holding it.
case_add robust/close-during-meta close_during_read closemeta
# A close while flock waits for another descriptor's lock on the file.
case_add robust/close-during-flock close_during_read closeflock

# Two descriptors' flocks of one checkpoint, the first taken before its
# publication (an fsync; the checkpoint is kept in the cache until then),
# the second after it, exclude each other.
flock_across_publication() {
	need_helper
	ck CKPTCACHE_STEP_ASIDE=off CKPTCACHE_PERSIST=unconsumed -- "$HELPER" flockpub "$T/ck/c.bin" ||
		fail "$(status_text $?)$(last_error)"
	plain "$HELPER" rawcheck "$T/ck/c.bin" 4194381 31 || fail "the real file differs"
}
case_add robust/flock-across-publication flock_across_publication

# Two descriptors' shared flocks converted to exclusive at once: one after
# the other, as without the library, not each waiting for the other.
flock_upgrade_at_once() {
	need_helper
	ck CKPTCACHE_STEP_ASIDE=off -- timeout 120 "$HELPER" flockupgrade "$T/ck/c.bin" ||
		fail "$(status_text $?)$(last_error)"
	plain "$HELPER" rawcheck "$T/ck/c.bin" 4194381 31 || fail "the real file differs"
}
case_add robust/flock-upgrade-at-once flock_upgrade_at_once

# A vfork child's flocks of a descriptor its parent holds locked (the same
# open file): answered at once, for a checkpoint not yet published and for
# a published one, and the parent's lock still excludes others after.
vfork_flock() {
	need_helper
	ck CKPTCACHE_STEP_ASIDE=off -- timeout 60 "$HELPER" vforkflock "$T/ck" ||
		fail "$(status_text $?)$(last_error)"
	plain "$HELPER" rawcheck "$T/ck/vf1.bin" 4194381 31 || fail "the real file differs"
}
case_add robust/vfork-flock vfork_flock

# A program that crashes (a store through a null pointer, a read past the end
# of a mapped file, a division by zero) after closing its checkpoints: they
# are at their real paths, and the program ends by the fault's signal.
crash_keeps_closed() {
	need_helper
	# a sanitizer's runtime preloaded first catches the faults itself
	[ "$PRELOAD" = "$LIB" ] || note "a runtime is preloaded before the library ($PRELOAD): it takes the faults"
	local how num rc i
	for how in segv bus fpe; do
		rm -f ck/*
		SLOW_US=150000 SLOWFS_OPS=rename ck -- bash -c 'ulimit -c 0; exec "$@"' crash \
			"$HELPER" crash "$T/ck" 3 1M 40 $how
		rc=$?
		num=$(kill -l "${how^^}")
		[ $rc -eq $((128 + num)) ] || fail "$how: $(status_text $rc), expected killed by SIG${how^^}$(last_error)"
		for ((i = 0; i < 3; i++)); do
			run_ok "$how: checkpoint $i at its real path" plain "$HELPER" check "ck/crash_0$i.bin" 1M $((40 + i))
		done
	done
}

# holder_ready TRIES: the pid a background holder printed ("ready PID")
# to out.txt, waiting TRIES x 50 ms at most; fails the case if it never did.
holder_ready() {
	local i pid=
	for ((i = 0; i < $1; i++)); do
		pid=$(sed -n 's/^ready //p' out.txt 2>/dev/null)
		[ -n "$pid" ] && break
		sleep 0.05
	done
	[ -n "$pid" ] || fail "the holder never got ready$(last_error)"
	echo "$pid"
}

# A process that holds a checkpoint open for writing is stopped (Ctrl-Z, a
# debugger's breakpoint): another process that opens the file does not wait
# for it to publish (it cannot answer until it runs again), the 12th reader
# neither (the stopped holder's queue of requests is full by then).
holder_stopped() {
	ck -- "$PY" -c '
import os, sys, time
f = open("ck/train.log", "w"); f.write("epoch 1\n"); f.flush()
print("ready", os.getpid(), flush=True)
sys.stdin.read()
f.write("epoch 2\n"); f.close()
' >out.txt 2>err.txt < <(sleep 30) &
	local job=$! pid i
	pid=$(holder_ready 300) || exit 1
	kill -STOP "$pid"
	local t0 t1 ms
	# the first open, timed in the reader: no wait for the stopped holder
	ms=$(ck -- "$PY" -c '
import time
t = time.perf_counter()
try:
    open("ck/train.log", "rb").close()
except OSError:
    pass
print(int((time.perf_counter() - t) * 1000))
' 2>/dev/null)
	[ -n "$ms" ] && [ "$ms" -lt 150 ] || fail "an open of a file a stopped process holds took ${ms:-?} ms"
	# the same 13 processes reading an untagged file, timed beside them:
	# what starting them costs on this machine now (under a sanitizer
	# beside other cases, 13 took 2 s)
	echo "epoch 1" >untagged.log
	local b0 b1
	b0=$(date +%s%N)
	for ((i = 0; i < 13; i++)); do
		ck -- timeout 20 cat untagged.log >/dev/null 2>&1
	done
	b1=$(date +%s%N)
	t0=$(date +%s%N)
	for ((i = 0; i < 13; i++)); do
		ck -- timeout 20 cat ck/train.log >/dev/null 2>&1
	done
	t1=$(date +%s%N)
	kill -CONT "$pid"
	kill "$pid" 2>/dev/null
	wait $job 2>/dev/null
	# a wait for the holder is 200 ms a reader: 13 of them, 2.6 s more
	local more=$(((t1 - t0 - (b1 - b0)) / 1000000))
	[ "$more" -lt 1000 ] ||
		fail "13 reads of a file a stopped process holds took $(((t1 - t0) / 1000000)) ms, of an untagged file $(((b1 - b0) / 1000000)) ms"
}

# A process that holds a checkpoint open for writing is killed (SIGKILL)
# while it holds 1 GiB, which takes the kernel a while to free: a reader
# that asks it to publish in that while does not wait for an answer that
# never comes (it waited 60 s), and finds what the real path holds.
holder_killed() {
	ck -- "$PY" -c '
import os, sys, mmap
big = mmap.mmap(-1, 1 << 30)
for i in range(0, 1 << 30, 4096):
    big[i] = 1
f = open("ck/state.bin", "wb"); f.write(b"x" * 4096); f.flush()
print("ready", os.getpid(), flush=True)
sys.stdin.read()
' >out.txt 2>err.txt < <(sleep 60) &
	local job=$! pid
	pid=$(holder_ready 600) || exit 1
	local t0 t1
	t0=$(date +%s%N)
	kill -KILL "$pid"
	ck -- timeout 90 cat ck/state.bin >/dev/null 2>&1
	t1=$(date +%s%N)
	wait $job 2>/dev/null
	[ $(((t1 - t0) / 1000000)) -lt 10000 ] || fail "a read of a file a killed process held took $(((t1 - t0) / 1000000)) ms"
}

# SIGTERM, as a batch system sends it at the time limit: what was closed is
# written to the real paths, then the program ends by SIGTERM, and nothing
# is left behind. A program with its own SIGTERM handler keeps it. An abort()
# drains too.
sigterm_drains() {
	src_file 1000000
	local i
	SLOW_US=150000 SLOWFS_OPS=rename bg_writer CKPTCACHE_SSD_CACHE=64M -- 6
	kill -TERM $BG
	wait $BGJOB
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 143 ] || fail "SIGTERM: $(status_text $rc), expected killed by SIGTERM"
	for ((i = 0; i < 6; i++)); do
		same src.bin ck/k$i.bin "SIGTERM: checkpoint $i at its real path"
	done
	[ -z "$(ls -A "$T/ckptcache-$(id -u)" 2>/dev/null)" ] || fail "SIGTERM: left behind: $(ls -A "$T/ckptcache-$(id -u)")"
	only_names ck '^k[0-9]\.bin$' "SIGTERM: after the end"

	rm -rf ck && mkdir ck
	SLOW_US=150000 SLOWFS_OPS=rename ck -- "$PY" -c '
import os, signal, sys, time
def handler(sig, frame):
    print("the program'"'"'s handler ran", flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, handler)
data = open("src.bin", "rb").read()
for i in range(6):
    with open(f"ck/k{i}.bin", "wb") as f:
        f.write(data)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)
' >out.txt 2>err.txt
	rc=$?
	cat out.txt err.txt
	[ $rc -eq 3 ] || fail "SIGTERM with the program's own handler: $(status_text $rc), expected exit status 3"
	grep -q "handler ran" out.txt || fail "the program's own SIGTERM handler did not run"
	for ((i = 0; i < 6; i++)); do
		same src.bin ck/k$i.bin "own handler: checkpoint $i at its real path"
	done

	rm -rf ck && mkdir ck
	SLOW_US=150000 SLOWFS_OPS=rename ck -- "$PY" -c '
import os
data = open("src.bin", "rb").read()
for i in range(6):
    with open(f"ck/k{i}.bin", "wb") as f:
        f.write(data)
os.abort()
' >out.txt 2>err.txt
	rc=$?
	[ $rc -eq 134 ] || fail "abort(): $(status_text $rc), expected killed by SIGABRT"
	for ((i = 0; i < 6; i++)); do
		same src.bin ck/k$i.bin "abort(): checkpoint $i at its real path"
	done
}

# The drain on SIGTERM is bounded: publications that take 3 s each, a bound
# of 0.5 s: the program ends within about that, and says what it could not do.
sigterm_bounded() {
	src_file 100000
	SLOW_US=3000000 SLOWFS_OPS=rename bg_writer CKPTCACHE_TERM_WAIT=0.5 -- 4
	local t0 t1
	t0=$(date +%s%N)
	kill -TERM $BG
	wait $BGJOB
	local rc=$?
	t1=$(date +%s%N)
	cat out.txt err.txt
	[ $rc -eq 143 ] || fail "bounded SIGTERM: $(status_text $rc), expected killed by SIGTERM"
	[ $(((t1 - t0) / 1000000)) -lt 2500 ] || fail "bounded SIGTERM: the program took $(((t1 - t0) / 1000000)) ms to end (bound 500 ms)"
	grep -q 'CKPTCACHE_TERM_WAIT' err.txt || fail "bounded SIGTERM: no message about what was not written"
	# each checkpoint not whole at its real path is named, and counted lost
	local missing=0
	for ((i = 0; i < 4; i++)); do
		env -u LD_PRELOAD cmp -s src.bin ck/k$i.bin && continue
		missing=$((missing + 1))
		grep -q "ck/k$i.bin did not reach its real path" err.txt ||
			fail "bounded SIGTERM: ck/k$i.bin is not at its real path and no message names it"
	done
	[ $missing -gt 0 ] || fail "bounded SIGTERM: every publication ended within the bound (the case tests nothing)"
	"$PY" - "$STATS" $missing <<'PYEOF' || fail "bounded SIGTERM: the statistics do not count the lost checkpoints"
import glob, json, sys
files = glob.glob(sys.argv[1] + "/*.json")
assert len(files) == 1, files
lost = json.load(open(files[0]))["objects"]["lost"]
assert lost == int(sys.argv[2]), f"lost: {lost}, {sys.argv[2]} not at their real paths"
PYEOF
}

# ---- settings -------------------------------------------------------------------------

rescue_dir_missing() {
	bad_var CKPTCACHE_RESCUE_DIR="$T/nowhere/rescue"
	absent "$T/nowhere" "a rescue folder made from a bad setting"
}

ssd_dir_typo() {
	bad_var CKPTCACHE_SSD_DIR="$T/scartch/job/ssd" CKPTCACHE_SSD_CACHE=16M
	absent "$T/scartch" "folders made from a mistyped CKPTCACHE_SSD_DIR"
}

tier_minimum() {
	local v
	for v in CKPTCACHE_HOST_CACHE=100 CKPTCACHE_SSD_CACHE=1K; do
		phase "${v%%=*}"
		bad_var "$v"
		grep -q "minimum.*4 KiB" err.txt || fail "$v: the message does not name the minimum: $(grep "${v%%=*}" err.txt | head -1)"
	done
}

# ---- hint files ------------------------------------------------------------------------

hints_fifo() {
	mkfifo order.fifo
	CASE_TIMEOUT=30 ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HINTS="$T/order.fifo" -- "$PROXY" --dir "$T/ck" \
		--count 3 --size 1M --seed 3 --interval-ms 10 >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 124 ] || [ $rc -eq 137 ] && fail "a FIFO as the hint file froze the program"
	[ $rc -eq 0 ] || fail "a FIFO as the hint file: exit status $rc"
	proxy_ok out.txt 3
	grep -q "CKPTCACHE_HINTS.*not a regular file" err.txt || fail "the FIFO is not reported$(first_error CKPTCACHE_HINTS)"
}

hints_flood() {
	local what
	for what in lines binary; do
		phase "$what"
		if [ $what = lines ]; then
			yes 'ck/ckpt_%d_%d.bin 0..2' | head -n 2000000 >hints.txt
		else
			head -c 2000000 /dev/urandom >hints.txt
		fi
		ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HINTS="$T/hints.txt" -- "$PROXY" --dir "$T/ck" \
			--count 3 --size 1M --seed 3 --interval-ms 0 >out.txt 2>err.txt
		local rc=$?
		cat out.txt
		head -20 err.txt
		[ $rc -eq 0 ] || fail "$what: exit status $rc"
		proxy_ok out.txt 3
		local n
		n=$(grep -c 'hints.txt' err.txt)
		[ "$n" -le 12 ] || fail "$what: $n messages about the hint file (expected a few, then a summary)"
		grep -q 'hints.txt.*more' err.txt || fail "$what: no summary of the lines not shown"
	done
}

# A program with an explicit ssd tier size whose children (system(), a shell,
# dd) load the library too: they must not measure the parent's tier against
# the space it left and report configuration errors. In a 64 MiB tmpfs.
child_ssd_share() {
	command -v unshare >/dev/null || note "no unshare here"
	src_file 1000000
	mkdir -p small
	plain unshare -m sh -c 'mount -t tmpfs -o size=64M tmpfs small' 2>/dev/null ||
		note "cannot mount a tmpfs in a mount namespace here"
	plain unshare -m sh -c 'mount -t tmpfs -o size=64M tmpfs small && exec env TMPDIR=small \
		CKPTCACHE_PATHS="$1/ck/**" CKPTCACHE_SSD_DIR="$1/small" CKPTCACHE_SSD_CACHE=40M \
		CKPTCACHE_HOST_CACHE=8M LD_PRELOAD="$2" "$3" -c "
import os, subprocess
data = open(\"src.bin\", \"rb\").read()
with open(\"ck/a.bin\", \"wb\") as f:
    f.write(data)
assert os.system(\"cat ck/a.bin > copy.bin\") == 0
subprocess.run([\"sh\", \"-c\", \"dd if=ck/a.bin of=ck/b.bin bs=64k status=none\"], check=True)
assert open(\"ck/b.bin\", \"rb\").read() == data
"' sh "$T" "$PRELOAD" "$PY" >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "children of a program with an ssd tier: exit status $rc"
	grep -q 'ckptcache: error' err.txt && fail "children reported errors$(first_error 'ckptcache: error')"
	same src.bin copy.bin "what system(cat) read"
	same src.bin ck/a.bin "ck/a.bin at its real path"
	same src.bin ck/b.bin "ck/b.bin (dd in a child shell) at its real path"
}

# A checkpoint written until its file system (a tmpfs) is full: in 1 MiB
# pieces into 8 MiB, and in 128 KiB pieces into 2 MiB of which a file of
# the program's own took 1.5 MB first (a checkpoint larger than the free
# space from its start). The program's own writes meet ENOSPC at the same
# byte as without the library, and the real file holds what they wrote.
enospc_case() {
	command -v unshare >/dev/null || note "no unshare here"
	mkdir -p small
	plain unshare -m sh -c 'mount -t tmpfs -o size=8M tmpfs small' 2>/dev/null ||
		note "cannot mount a tmpfs in a mount namespace here"
	local side fs
	for fs in 8M:1048576:0 2M:131072:1500000; do
		for side in plain lib; do
			plain unshare -m sh -c 'mount -t tmpfs -o size=${5%%:*} tmpfs small || exit 9
				[ "$4" = lib ] && export CKPTCACHE_PATHS="$1/small/*.bin" LD_PRELOAD="$2"
				"$3" -c "
import errno, sys
piece, filler = map(int, sys.argv[1].split(\":\")[1:])
open(\"small/filler\", \"wb\").write(b\"f\" * filler)
b = bytes(range(256)) * (piece // 256)
n = 0
with open(\"small/full.bin\", \"wb\", buffering=0) as f:
    try:
        for i in range(100 * 1048576 // piece):
            n += f.write(b)
    except OSError as e:
        print(\"error\", errno.errorcode[e.errno])
print(\"written\", n)
d = open(\"small/full.bin\", \"rb\").read()
print(\"read back\", len(d), d == (b * (n // len(b) + 1))[:len(d)])
" "$5" || exit 8
				env -u LD_PRELOAD wc -c < small/full.bin' sh "$T" "$PRELOAD" "$PY" $side $fs \
				>out_$side.txt 2>err_$side.txt
			echo "rc $?" >>out_$side.txt
		done
		cat out_plain.txt out_lib.txt err_lib.txt
		grep -q '^error ENOSPC' out_plain.txt || note "no ENOSPC without the library here"
		cmp -s out_plain.txt out_lib.txt ||
			fail "writes until the file system ($fs) is full:$(tr '\n' ' ' <out_plain.txt) without the library,$(tr '\n' ' ' <out_lib.txt) with it"
		grep -q 'ckptcache: error' err_lib.txt && fail "an error message:$(first_error 'ckptcache: error')"
	done
	return 0
}

# A user other than root makes a checkpoint read-only (chmod 0444) while
# the cache holds it, then opens it to write again: EACCES, as the kernel
# answers for the real file, and the bytes stay.
readonly_cached_case() {
	[ "$(id -u)" = 0 ] || note "acting as another user needs root"
	command -v setpriv >/dev/null || note "no setpriv here"
	chmod 755 "$T" ck
	mkdir -p ck/ro plain/ro
	chmod 777 ck/ro plain/ro
	local prog='
import errno, os, sys
p = sys.argv[1] + "/c.bin"
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"v1")
os.close(fd)
os.chmod(p, 0o444)
try:
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"v2")
    os.close(fd)
    print("opened")
except OSError as e:
    print(errno.errorcode[e.errno])
print(open(p).read())
'
	plain setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" -c "$prog" "$T/plain/ro" >expect.txt ||
		fail "the program fails without the library"
	ck CKPTCACHE_STATS= -- setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" -c "$prog" "$T/ck/ro" \
		>got.txt || fail "the program fails under the library$(last_error)"
	cmp -s expect.txt got.txt ||
		fail "a read-only checkpoint opened to write:$(tr '\n' ' ' <expect.txt) without the library,$(tr '\n' ' ' <got.txt) with it"
	same plain/ro/c.bin ck/ro/c.bin "the read-only checkpoint at its real path"
}

# ---- POSIX results -------------------------------------------------------------------------

posix_results() {
	src_file
	ck -- "$PY" -c '
import errno, os, sys
data = open("src.bin", "rb").read()
with open("ck/a.bin", "wb") as f:
    f.write(data)
try:
    fd = os.open("ck/a.bin", os.O_RDONLY | os.O_CREAT | os.O_EXCL)
    sys.exit("open(O_RDONLY|O_CREAT|O_EXCL) of an existing checkpoint succeeded")
except FileExistsError:
    pass
try:
    os.rename("ck/a.bin", "ck/missing/a.bin")
    sys.exit("rename() into a missing folder succeeded")
except FileNotFoundError:
    pass
assert open("ck/a.bin", "rb").read() == data, "read back after the failed rename"
with open("ck/b.bin", "wb") as f:
    f.write(data[::-1])
' >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "$(tail -1 err.txt)"
	same src.bin ck/a.bin "ck/a.bin at its real path"
	absent ck/missing "the missing folder"
	local left
	left=$(rescue_files; find "$T" -maxdepth 1 -name 'ckptcache-rescue.*')
	[ -z "$left" ] || fail "rescue files were left: $left"
	grep -q 'ckptcache: error' err.txt && fail "the library reported an error$(first_error 'ckptcache: error')"
	return 0
}

# ---- the kernel's early touch of program buffers -------------------------------

# Python writes checkpoints of 8 MiB from one buffer and reads them back into
# it; with CKPTCACHE_KERNEL_TOUCH=on the library's thread has the kernel
# touch the buffer (an unnamed file of the library takes one byte a page,
# above the program's descriptor numbers). Then the program closes a
# descriptor it did not open (that file) and puts a file of its own on that
# number: the next
# touch must not write into the program's file. Every byte is compared in
# the process and at the real paths; with =off nothing is touched.
kernel_touch() {
	phase on
	ck CKPTCACHE_KERNEL_TOUCH=on -- "$PY" -c '
import os, sys, time
n = 8 << 20
buf = bytearray(os.urandom(n))
datas = []
def ckpt(name):
    buf[:16] = os.urandom(16)
    datas.append((name, bytes(buf)))
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, buf)
    os.close(fd)
for i in range(3):
    ckpt(f"ck/a{i}.bin")
    time.sleep(0.2)
def target(f):
    try:
        return os.readlink(f"/proc/self/fd/{f}")
    except OSError:  # the descriptor of the listing itself
        return ""
import re
mem = [int(f) for f in os.listdir("/proc/self/fd") if re.fullmatch(r"/(dev/shm|tmp)/#[0-9]+ \(deleted\)", target(f))]
assert len(mem) == 1, f"the library holds one unnamed file (found {mem})"
# (the file of the library is not the file of the program: its close
# fails with EBADF, as a number the program never opened, and a dup2 onto
# it with EBUSY; the library never writes the file of the program)
try:
    os.close(mem[0])
except OSError as e:
    assert e.errno == 9, e
mine = b"the program\x27s own file\n" * 200
vfd = os.open("victim.txt", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(vfd, mine)
num = vfd
if vfd != mem[0]:
    try:
        os.dup2(vfd, mem[0])
        os.close(vfd)
        num = mem[0]
    except OSError as e:
        assert e.errno == 16, e
for i in range(3, 6):
    ckpt(f"ck/a{i}.bin")
    time.sleep(0.2)
os.lseek(num, 0, 0)
got = os.read(num, len(mine) + 1)
assert got == mine, "the program\x27s file on the library file\x27s old number was written to"
for name, data in datas:
    with open(name, "rb") as f:
        n_read = f.readinto(buf)
    assert n_read == n and buf == data, f"{name} read back in the process"
    open(name.replace("ck/", "ref.").replace("/", "_"), "wb").write(data)
' || fail "kernel touch on: the program failed$(last_error)"
	grep -a 'ckptcache: error' "$T/.log" && fail "the library reported an error$(first_error 'ckptcache: error')"
	local i
	for i in 0 1 2 3 4 5; do
		same "ref.a$i.bin" "ck/a$i.bin" "ck/a$i.bin at its real path"
	done
	cmp -s victim.txt <(for i in $(seq 200); do printf "the program's own file\n"; done) ||
		fail "the program's own file (on the library file's old number) changed at its real path"
	stats_ok files==1 kernel_touch.buffers\>=2 kernel_touch.pages\>=4096
	phase off
	ck CKPTCACHE_KERNEL_TOUCH=off -- "$PY" -c '
import os
data = os.urandom(8 << 20)
with open("ck/b.bin", "wb") as f:
    f.write(data)
assert open("ck/b.bin", "rb").read() == data
open("ref.b.bin", "wb").write(data)
' || fail "kernel touch off: the program failed$(last_error)"
	same ref.b.bin ck/b.bin "ck/b.bin at its real path"
	stats_ok files==1 kernel_touch.buffers==0 kernel_touch.pages==0
}

case_add robust/names-255-bytes long_names
case_add robust/enospc-until-full enospc_case

# A checkpoint written in 4 KiB pieces while the program fills the rest of
# its file system (a tmpfs) with a file of its own between them: the
# cache's look at the free space hands the version to its real file, which
# cannot take the bytes so far. The program is told (ENOSPC, at a write or
# at close), and every byte it was told it wrote is at the real path or in
# the rescue file the library names, none of them missing.
enospc_filled_between() {
	command -v unshare >/dev/null || note "no unshare here"
	mkdir -p small rescue
	plain unshare -m sh -c 'mount -t tmpfs -o size=8M tmpfs small' 2>/dev/null ||
		note "cannot mount a tmpfs in a mount namespace here"
	plain unshare -m sh -c 'mount -t tmpfs -o size=8M tmpfs small || exit 9
		export CKPTCACHE_PATHS="$1/small/*.bin" CKPTCACHE_RESCUE_DIR="$1/rescue" LD_PRELOAD="$2"
		"$3" -c "
import errno, os
piece = bytes(range(256)) * 16
n, err = 0, None
f = open(\"small/ck.bin\", \"wb\", buffering=0)
try:
    for i in range(64):
        n += f.write(piece)
    with open(\"small/filler\", \"wb\", buffering=0) as g:
        try:
            while True:
                g.write(b\"f\" * 65536)
        except OSError:
            pass
    for i in range(64, 2048):
        n += f.write(piece)
except OSError as e:
    err = errno.errorcode[e.errno]
try:
    f.close()
except OSError as e:
    err = err or errno.errorcode[e.errno]
print(\"written\", n, \"error\", err)
" || exit 8
		env -u LD_PRELOAD cp small/ck.bin real.bin 2>/dev/null; exit 0' sh "$T" "$PRELOAD" "$PY" >out.txt 2>err.txt
	local rc=$? n err where
	[ $rc = 0 ] || fail "the program (rc $rc):$(tr '\n' ' ' <out.txt)$(first_error 'ckptcache')"
	read -r _ n _ err <out.txt
	[ "$err" != None ] || fail "the program was told of no error; it wrote $n bytes into a full file system"
	where=$(grep -ao 'its bytes are in [^ ]*\|are saved in [^ ]*' err.txt | tail -1 | awk '{print $NF}')
	local got=real.bin
	[ -n "$where" ] && got=$where
	[ "$(stat -c %s "$got")" = "$n" ] ||
		fail "told $n bytes written ($err), $(stat -c %s "$got") in $got$(first_error 'ckptcache')"
	"$PY" -c "
import sys
piece = bytes(range(256)) * 16
d = open(sys.argv[1], 'rb').read()
sys.exit(d != (piece * (len(d) // len(piece) + 1))[:len(d)])" "$got" || fail "the bytes in $got differ"
	return 0
}
case_add robust/enospc-filled-between enospc_filled_between

# Many checkpoints, none synced, written one after another until their
# file system (a tmpfs of 16 MiB) is full, faster than the cache publishes
# them: the closed ones still owed take their room first, so a later one
# goes to its real file in time and its own writes meet ENOSPC at the
# byte they meet it without the library; every file at its real path is
# the one the program left there without the library, and no checkpoint
# goes to a rescue file (HOW: os.write, or a buffered file object).
enospc_many_owed() {
	local how=$1
	command -v unshare >/dev/null || note "no unshare here"
	mkdir -p small
	plain unshare -m sh -c 'mount -t tmpfs -o size=16M tmpfs small' 2>/dev/null ||
		note "cannot mount a tmpfs in a mount namespace here"
	local side
	for side in plain lib; do
		plain unshare -m sh -c 'mount -t tmpfs -o size=16M tmpfs small || exit 9
			[ "$4" = lib ] && export CKPTCACHE_PATHS="$1/small/*.bin" LD_PRELOAD="$2"
			"$3" -c "
import errno, os, sys
how = sys.argv[1]
sizes = [3 << 20, (1 << 20) + 4097, 2500000, 700001]
for k in range(24):
    size = sizes[k % 4]
    data = bytes((k + i) % 251 for i in range(256)) * (size // 256 + 1)
    n, err = 0, None
    if how == \"os\":
        fd = os.open(\"small/c%02d.bin\" % k, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while n < size:
                n += os.write(fd, data[n:min(size, n + 262144)])
        except OSError as e:
            err = errno.errorcode[e.errno]
        os.close(fd)
    else:
        f = open(\"small/c%02d.bin\" % k, \"wb\")
        try:
            for off in range(0, size, 100000):
                f.write(data[off:min(size, off + 100000)])
            f.close()
        except OSError as e:
            err = errno.errorcode[e.errno]
            try:
                f.close()
            except OSError:
                pass
    print(k, n if how == \"os\" else \"-\", err)
" "$5" || exit 8
			cd small && for f in *.bin; do env -u LD_PRELOAD cksum "$f"; done' sh "$T" "$PRELOAD" "$PY" $side "$how" \
			>out_$side.txt 2>err_$side.txt
		echo "rc $?" >>out_$side.txt
	done
	cat out_plain.txt err_lib.txt
	grep -q ENOSPC out_plain.txt || note "no ENOSPC without the library here"
	cmp -s out_plain.txt out_lib.txt || fail "many checkpoints until the file system is full: $(diff out_plain.txt out_lib.txt | head -6 | tr '\n' ' ')"
	grep -q 'ckptcache: error' err_lib.txt && fail "an error message:$(grep -a 'ckptcache: error' err_lib.txt | head -2 | tr '\n' ' ')"
	return 0
}
case_add robust/enospc-many-owed-os enospc_many_owed os
case_add robust/enospc-many-owed-stdio enospc_many_owed stdio

# Four processes of a node start at once with an ssd tier each, sized (25%)
# from the space of the file system their checkpoints also go to (a tmpfs
# of 64 MiB), then each writes a checkpoint of 8 MiB. Their 32 MiB fit
# without the library, so they fit with it: a tier takes space as it holds
# copies (here none: the real path is on its file system), not its size at
# start. Each file is compared at its real path without the library.
ssd_tiers_share_a_disk() {
	command -v unshare >/dev/null || note "no unshare here"
	mkdir -p small rescue
	plain unshare -m sh -c 'mount -t tmpfs -o size=8M tmpfs small' 2>/dev/null ||
		note "cannot mount a tmpfs in a mount namespace here"
	cat >writer.py <<'PYEOF'
import os, random, sys, time
i = int(sys.argv[1])
open("small/hdr%d.bin" % i, "wb").write(b"h" * 4096)
open("small/ready%d" % i, "w").close()
t = time.time()
while sum(os.path.exists("small/ready%d" % j) for j in range(4)) < 4 and time.time() - t < 30:
    time.sleep(0.01)
data = random.Random(i).randbytes(8 << 20)
try:
    with open("small/ck%d.bin" % i, "wb") as f:
        f.write(data)
    print(i, "written", open("small/ck%d.bin" % i, "rb").read() == data)
except OSError as e:
    print(i, "error", e.errno)
PYEOF
	local side
	for side in plain lib; do
		plain unshare -m sh -c 'mount -t tmpfs -o size=64M tmpfs small || exit 9
			mkdir small/ssd
			[ "$4" = lib ] && export CKPTCACHE_PATHS="$1/small/*.bin" LD_PRELOAD="$2" \
				CKPTCACHE_SSD_DIR="$1/small/ssd" CKPTCACHE_SSD_CACHE=25% CKPTCACHE_RESCUE_DIR="$1/rescue"
			for i in 0 1 2 3; do "$3" writer.py $i >written$i.txt & done
			wait
			cat written0.txt written1.txt written2.txt written3.txt
			for i in 0 1 2 3; do
				env -u LD_PRELOAD "$3" -c "
import random, sys
i = int(sys.argv[1])
d = open(\"small/ck%d.bin\" % i, \"rb\").read()
print(i, \"at the real path\", d == random.Random(i).randbytes(8 << 20))" $i
			done' sh "$T" "$PRELOAD" "$PY" $side >out_$side.txt 2>err_$side.txt
		echo "rc $?" >>out_$side.txt
		sort -o out_$side.txt out_$side.txt
	done
	grep -q '^0 at the real path True' out_plain.txt || note "the 4 checkpoints do not fit here without the library:$(tr '\n' ' ' <out_plain.txt)"
	cmp -s out_plain.txt out_lib.txt ||
		fail "4 processes with an ssd tier each:$(tr '\n' ' ' <out_plain.txt) without the library,$(tr '\n' ' ' <out_lib.txt) with it ($(grep -a -m1 ckptcache err_lib.txt))"
	grep -a 'ckptcache: \(error\|warning\)' err_lib.txt && fail "a message: $(grep -a -m1 'ckptcache: ' err_lib.txt)"
	[ -z "$(ls rescue)" ] || fail "rescue files were made: $(ls rescue)"
	return 0
}
case_add robust/ssd-tiers-share-a-disk ssd_tiers_share_a_disk
case_add robust/readonly-cached readonly_cached_case
case_add robust/names-long-path-rescue long_path_rescue
case_add robust/exit-thread-writing exit_race

# A file size limit set while checkpoints are cached (a closed one of 5000
# bytes whose publication takes 0.5 s, one open for writing): the limit
# binds the library's own writes of the process too, so both reach their
# real paths before it, and the open one's next write is cut at the limit
# by the kernel, as without the library.
fsize_after_open() {
	cat >fsz.c <<'C'
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int c, char **v)
{
	char big[5000], s[3000], p[4096];
	memset(big, 'b', sizeof big);
	memset(s, 'z', sizeof s);
	snprintf(p, sizeof p, "%s/closed.bin", v[1]);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (c != 2 || fd < 0 || write(fd, big, sizeof big) != (ssize_t)sizeof big || close(fd))
		return 2;
	snprintf(p, sizeof p, "%s/open.bin", v[1]);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "head\n", 5) != 5)
		return 3;
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = { 1000, 1000 };
	if (setrlimit(RLIMIT_FSIZE, &rl))
		return 4;
	errno = 0;
	ssize_t r = write(fd, s, sizeof s);
	printf("write %zd\n", r);
	r = write(fd, s, 10);
	printf("then %zd %s\n", r, r < 0 ? strerror(errno) : "");
	return close(fd) ? 5 : 0;
}
C
	gcc -O2 -o fsz fsz.c || fail "the program did not compile"
	SLOW_US=500000 SLOWFS_OPS=rename program_outputs_match ./fsz plainrun ck
	same plainrun/closed.bin ck/closed.bin "a closed checkpoint larger than the limit"
	same plainrun/open.bin ck/open.bin "the checkpoint open when the limit came"
}
case_add robust/fsize-after-open fsize_after_open
case_add robust/path-symlink-dotdot symlink_dotdot
case_add robust/symlink-made-meanwhile symlink_made_meanwhile
case_add_waits robust/replaced-while-publishing replaced_while_publishing
case_add_waits robust/links-unpublished links_unpublished
case_add robust/fsync-beside-close fsync_beside_close
case_add robust/utime-then-write utime_then_write
case_add robust/times-order times_order
case_add robust/security-rescue-planted rescue_planted
case_add robust/security-stats-planted stats_planted
case_add robust/security-foreign-folder foreign_folder
case_add robust/cleanup-after-sigkill killed_leftovers
case_add_waits robust/sigterm-drains sigterm_drains
case_add robust/other-signals-drain other_signals_drain
case_add robust/holder-stopped holder_stopped
case_add robust/holder-killed holder_killed
case_add robust/crash-keeps-closed crash_keeps_closed

# killed_run WHAT VAR=VALUE... -- ARG...: in an emptied ck/ and a new w/,
# the Python program ARG... runs with the library (and the variables) and
# must end killed by SIGKILL.
killed_run() {
	local what=$1 rc
	shift
	rm -rf ck/* w && mkdir w
	ck "$@"
	rc=$?
	[ $rc -eq 137 ] || fail "$what: $(status_text $rc), expected killed by SIGKILL$(last_error)"
}

# killed_kept WHAT PREFIX I...: ck/PREFIX<i>.bin holds w/want<i>, for
# each I.
killed_kept() {
	local what=$1 prefix=$2 i
	shift 2
	for i in "$@"; do
		plain cmp "w/want$i" "ck/$prefix$i.bin" || fail "$what: $prefix$i.bin is not at its real path with its bytes"
	done
}

# A program killed (SIGKILL: the OOM killer, a batch system's time limit)
# after it fsync'd its checkpoints and before it closed them: each synced
# checkpoint is at its real path with the bytes synced, new names and
# files replaced alike, small and large, as without the library; one
# written on after its fsync holds at least its synced bytes. Before, a
# checkpoint written through to an unnamed file got its name only at its
# close: after the kill there was no file at all.
fsync_then_killed() {
	cat >killed.py <<'PYEOF'
import os, signal, sys
d = sys.argv[1]
sizes = [65537, 3000, 5 << 20, 1, (24 << 20) + 11]
with open(os.path.join(d, "first.bin"), "wb") as f:
    f.write(b"first")
for i, n in enumerate(sizes):
    if i % 2:
        with open(os.path.join(d, f"k{i}.bin"), "wb") as f:
            f.write(b"old" * 1000)
keep = []
for i, n in enumerate(sizes):
    data = bytes((i * 7 + j) % 251 for j in range(min(n, 4096))) * (n // 4096 + 1)
    fd = os.open(os.path.join(d, f"k{i}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data[:n])
    os.fsync(fd)
    with open(os.path.join(sys.argv[2], f"want{i}"), "wb") as w:
        w.write(data[:n])
    if i == 2:
        os.write(fd, b"written after the fsync")
    keep.append(fd)
# killed at once after the last fsync
os.kill(os.getpid(), signal.SIGKILL)
PYEOF
	local sa
	for sa in off auto; do
		killed_run "step-aside $sa" CKPTCACHE_STEP_ASIDE=$sa -- "$PY" killed.py "$T/ck" "$T/w"
		killed_kept "step-aside $sa" k 0 1 3 4
		plain cmp -n "$(stat -c %s w/want2)" w/want2 ck/k2.bin ||
			fail "step-aside $sa: k2.bin is not at its real path beginning with its synced bytes"
	done
}
case_add robust/fsync-then-killed fsync_then_killed

# A checkpoint larger than the cache, written through, synced after each of
# five pieces: every sync reaches the file (a system call each, as the
# program's own would make), and so does the sync of a second descriptor
# after the close; the bytes are whole at the real path. Before, the
# third sync on made no system call (the version was marked durable by
# the second and never unmarked by the writes after it).
fsync_each_reaches_file() {
	needs_strace
	cat >pieces.py <<'PYEOF'
import os, sys
d = sys.argv[1]
with open(os.path.join(d, "first.bin"), "wb") as f:
    f.write(b"first")
piece = bytes(range(251)) * (6 * 4177)
fd = os.open(os.path.join(d, "big.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(5):
    os.write(fd, piece)
    os.fsync(fd)
os.close(fd)
fd = os.open(os.path.join(d, "big.bin"), os.O_RDONLY)
os.fsync(fd)
os.close(fd)
with open(os.path.join(sys.argv[2], "want.bin"), "wb") as f:
    f.write(piece * 5)
PYEOF
	mkdir -p w
	timeout -k 5 "$CASE_TIMEOUT" strace -f -qq -c -o strace.out -e trace=fsync,fdatasync \
		env LD_PRELOAD="$PRELOAD" CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_HOST_CACHE=4M CKPTCACHE_STEP_ASIDE=off \
		"$PY" pieces.py "$T/ck" "$T/w" || fail "the program under strace: exit status $?"
	local n
	n=$(awk '$NF == "fsync" || $NF == "fdatasync" { n += $4 } END { print n + 0 }' strace.out)
	[ "$n" -ge 6 ] || fail "the program's six syncs made $n sync system calls"
	plain cmp w/want.bin ck/big.bin || fail "big.bin at its real path differs from the bytes written"
	# named at its real path by a sync(2), then synced by the program:
	# its folder is synced too (the name is new)
	cat >named.py <<'PYEOF'
import os, sys
d = sys.argv[1]
with open(os.path.join(d, "first.bin"), "wb") as f:
    f.write(b"first")
fd = os.open(os.path.join(d, "named.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, bytes(range(256)) * 40000)
os.sync()
os.fsync(fd)
os.close(fd)
PYEOF
	rm -rf ck/*
	timeout -k 5 "$CASE_TIMEOUT" strace -f -qq -y -o strace2.out -e trace=fsync \
		env LD_PRELOAD="$PRELOAD" CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_HOST_CACHE=4M CKPTCACHE_STEP_ASIDE=off \
		"$PY" named.py "$T/ck" || fail "named.py under strace: exit status $?"
	grep -q "fsync([0-9]*<$(realpath "$T/ck")>)" strace2.out ||
		fail "the folder of a checkpoint named by sync(2) was not synced at the program's fsync: $(head -c 400 strace2.out)"
}
case_add robust/fsync-each-reaches-file fsync_each_reaches_file

# The same with sync(2) (os.sync) in place of each file's fsync, and
# syncfs of a folder's descriptor: checkpoints closed and one still open
# (in the cache, or larger than the cache and written through) are at
# their real paths after the kill, as the kernel's sync puts every byte
# written on disk without the library.
sync_then_killed() {
	cat >synckilled.py <<'PYEOF'
import os, signal, sys
d, w, how = sys.argv[1], sys.argv[2], sys.argv[3]
with open(os.path.join(d, "first.bin"), "wb") as f:
    f.write(b"first")
sizes = [4097, 3 << 20, 1 << 20, (12 << 20) + 5]
for i, n in enumerate(sizes):
    data = bytes((i * 11 + j) % 253 for j in range(4096)) * (n // 4096 + 1)
    with open(os.path.join(w, f"want{i}"), "wb") as f:
        f.write(data[:n])
    f = open(os.path.join(d, f"s{i}.bin"), "wb")
    f.write(data[:n])
    f.flush()
    if i < len(sizes) - 1:
        f.close()
# an error first: syncfs of a number that names nothing
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
if libc.syncfs(987) != -1 or ctypes.get_errno() != 9:
    sys.exit("syncfs of a closed number: no EBADF")
if how == "sync":
    os.sync()
else:
    fd = os.open(d, os.O_RDONLY)
    os.syncfs(fd) if hasattr(os, "syncfs") else __import__("ctypes").CDLL(None).syncfs(fd)
os.kill(os.getpid(), signal.SIGKILL)
PYEOF
	local how cache
	for cache in 32M 4M; do
		for how in sync syncfs; do
			killed_run "$how, cache $cache" CKPTCACHE_HOST_CACHE=$cache -- "$PY" synckilled.py "$T/ck" "$T/w" $how
			killed_kept "$how, cache $cache" s 0 1 2 3
		done
	done
}
case_add robust/sync-then-killed sync_then_killed

# Checkpoints opened with O_SYNC or O_DSYNC (each write on disk when it
# returns), new ones and one over a checkpoint the cache holds, then a
# kill: every byte written is at the real paths, as without the library.
osync_then_killed() {
	cat >osynckilled.py <<'PYEOF'
import os, signal, sys
d, w = sys.argv[1], sys.argv[2]
with open(os.path.join(d, "first.bin"), "wb") as f:
    f.write(b"first")
# one the cache holds, closed, rewritten below with O_SYNC
with open(os.path.join(d, "o2.bin"), "wb") as f:
    f.write(b"cached" * 100000)
for i, (n, fl) in enumerate([(70001, os.O_SYNC), (3 << 20, os.O_DSYNC), ((1 << 20) + 3, os.O_SYNC)]):
    data = bytes((i * 5 + j) % 249 for j in range(4096)) * (n // 4096 + 1)
    with open(os.path.join(w, f"want{i}"), "wb") as f:
        f.write(data[:n])
    if i == 2:
        # an error first: O_EXCL over the checkpoint the cache holds
        try:
            os.open(os.path.join(d, "o2.bin"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | fl, 0o644)
            sys.exit("O_SYNC|O_EXCL over an existing checkpoint succeeded")
        except FileExistsError:
            pass
    fd = os.open(os.path.join(d, f"o{i}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | fl, 0o644)
    for k in range(0, n, 65536):
        os.write(fd, data[k:min(n, k + 65536)])
os.kill(os.getpid(), signal.SIGKILL)
PYEOF
	local sa
	for sa in off auto; do
		killed_run "step-aside $sa" CKPTCACHE_STEP_ASIDE=$sa -- "$PY" osynckilled.py "$T/ck" "$T/w"
		killed_kept "step-aside $sa" o 0 1 2
	done
}
case_add robust/osync-then-killed osync_then_killed
case_add robust/exit-beside-writers exit_beside_writers
case_add robust/sigterm-bounded sigterm_bounded
case_add robust/config-rescue-dir-missing rescue_dir_missing
case_add robust/config-ssd-dir-typo ssd_dir_typo
case_add robust/config-tier-minimum tier_minimum
case_add robust/hints-fifo hints_fifo
case_add robust/hints-flood hints_flood
case_add robust/config-children-ssd child_ssd_share
case_add robust/posix-excl-and-rename posix_results
case_add robust/kernel-touch-buffers kernel_touch

# A descriptor opened for reading and writing whose checkpoint outgrew the
# cache (a small host tier): its bytes go to a temporary file at the real
# path, which its reads then read.
rdwr_through_home() {
	cat >rw.py <<'PYEOF'
import os, sys
path, bad = sys.argv[1], 0
block = b"q" * 867072
for it in range(60):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, 4127398)
    os.pwrite(fd, block, 2847017)
    os.ftruncate(fd, 463881)
    os.ftruncate(fd, 1689142)
    try:
        back = os.pread(fd, 6 << 20, 0)
        if back != bytes(1689142):
            bad += 1
            print(f"round {it}: read back {len(back)} bytes, not 1689142 zeros")
    except OSError as e:
        bad += 1
        print(f"round {it}: pread: {e}")
    os.close(fd)
sys.exit(1 if bad else 0)
PYEOF
	ck CKPTCACHE_HOST_CACHE=8M -- "$PY" rw.py "$T/ck/rw.bin" >rw.txt ||
		fail "reads through O_RDWR descriptors failed: $(head -3 rw.txt | tr '\n' ';')$(last_error)"
	plain "$PY" -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.exit(d != bytes(1689142))' "$T/ck/rw.bin" ||
		fail "ck/rw.bin at its real path is not 1689142 zeros"
}
case_add robust/rdwr-through-home rdwr_through_home

# The two cases of the library's kept placeholders' descriptor (the descriptors of
# cached files it reads are copies of it): ph.py writes N checkpoints of
# random bytes, reads one back (its fstat agreeing with stat of its path)
# and finds the kept descriptors; placeholder_run runs a program of the
# case and checks every checkpoint at its real path afterwards.
placeholder_helpers() {
	cat >ph.py <<'PYEOF'
import os, random

def make(d, n, size, step):
    data = [random.Random(i).randbytes(size + step * i) for i in range(n)]
    for i, b in enumerate(data):
        with open(f"{d}/c{i}.bin", "wb") as f:
            f.write(b)
    return data

def check(d, data, i):
    with open(f"{d}/c{i}.bin", "rb") as f:
        got = f.read()
        fs = os.fstat(f.fileno())
    st = os.stat(f"{d}/c{i}.bin")
    assert got == data[i], f"c{i}.bin read back: {got[:8]!r}..., {len(got)} bytes"
    assert (fs.st_size, fs.st_dev, fs.st_mode) == (st.st_size, st.st_dev, st.st_mode), \
        f"c{i}.bin: fstat {fs} against stat {st}"

def bases():
    """The library's placeholders' descriptors: of its socket, its name
    removed, opened as a path only (O_PATH in fdinfo), or of / where none
    could be made."""
    out = []
    for n in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{n}")
            flags = int(open(f"/proc/self/fdinfo/{n}").read().split("flags:")[1].split()[0], 8)
        except OSError:
            continue
        ours = link == "/" or ("/ckptcache-ph." in link and link.endswith(" (deleted)"))
        if ours and flags & 0o10000000:
            out.append(int(n))
    return out
PYEOF
}

# placeholder_run PROGRAM N SIZE STEP
placeholder_run() {
	ck -- "$PY" "$1" "$T/ck" || fail "the program failed$(last_error)"
	if grep -aq 'ckptcache: error' "$T/.log"; then
		fail "the library reported an error$(first_error 'ckptcache: error')"
	fi
	plain "$PY" -c '
import random, sys
d, n, size, step = sys.argv[1], *map(int, sys.argv[2:])
for i in range(n):
    assert open(f"{d}/c{i}.bin", "rb").read() == random.Random(i).randbytes(size + step * i), \
        f"c{i}.bin at its real path differs from what was written"
' "$T/ck" "$2" "$3" "$4" || fail "the checkpoints at their real paths$(last_error)"
}

# A program that dup2s a file of its own onto the kept number (it believes
# it free), and later closes it, must still read its checkpoints, not its
# own file, through the next opens.
placeholder_base_taken() {
	placeholder_helpers
	cat >pb.py <<'PYEOF'
import os, sys
from ph import make, check, bases
d = sys.argv[1]
data = make(d, 6, 1000, 17)
check(d, data, 0)
base = bases()
assert base, "no placeholders' descriptor opened as a path"
mine = os.open(f"{d}/../junk.txt", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(mine, b"JUNK" * 400)
for n in base:
    os.dup2(mine, n)
check(d, data, 1)
check(d, data, 2)
for n in base:
    os.close(n)
for i in (3, 4, 5):
    check(d, data, i)
print("placeholders", base)
PYEOF
	placeholder_run pb.py 6 1000 17
	stats_ok files==1 host.put_ops\>=6
}
case_add robust/placeholder-base-taken placeholder_base_taken

# The kept descriptor closed by the program, by each way a program has
# (close_range, closefrom through os.closerange, a raw close syscall), its
# number then reused by the program for a file of its own (fcntl F_DUPFD
# onto it): the checkpoints read back right each time. And programs that
# start children (subprocess closes every descriptor in a vfork child)
# keep one such descriptor, not one more per child.
placeholder_base_closed() {
	placeholder_helpers
	cat >pc.py <<'PYEOF'
import ctypes, fcntl, os, subprocess, sys
from ph import make, check, bases
d = sys.argv[1]
data = make(d, 8, 900, 31)
libc = ctypes.CDLL(None, use_errno=True)
# a listing publishes what the folder is owed: no file of the cache's is
# opened meanwhile, which could take the number closed below
assert sorted(os.listdir(d)) == [f"c{i}.bin" for i in range(8)]
mine = os.open(f"{d}/../junk.txt", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(mine, b"JUNK" * 400)
ways = {
    "close_range": lambda n: os.closerange(n, n + 1),
    "closefrom": lambda n: libc.closefrom(n),
    "raw close": lambda n: libc.syscall(3, n),  # SYS_close on x86-64
}
k = 0
for way, close in ways.items():
    check(d, data, k % 8)
    base = bases()
    assert len(base) == 1, f"{way}: placeholders' descriptors opened as a path: {base}"
    n = base[0]
    close(n)
    took = fcntl.fcntl(mine, fcntl.F_DUPFD, n)
    assert took == n, f"{way}: F_DUPFD onto {n} gave {took}"
    for _ in range(3):
        k += 1
        check(d, data, k % 8)
    os.close(took)
before = len(bases())
for _ in range(10):
    subprocess.run(["true"], close_fds=True, check=True)
    check(d, data, k % 8)
    k += 1
after = len(bases())
assert after <= before, f"placeholders' descriptors before 10 children: {before}, after: {after}"
print("ok", k)
PYEOF
	placeholder_run pc.py 8 900 31
}
case_add robust/placeholder-base-closed placeholder_base_closed

# fulltable.py: fill() opens /dev/null until the table is full (EMFILE) and
# returns the descriptors; limit() lowers the soft limit to 256 first (and
# the hard one, if asked).
fulltable_helper() {
	cat >fulltable.py <<'PYEOF'
import errno, os, resource

def limit(hard_too=False):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 256), min(hard, 256) if hard_too else hard))

def fill():
    fds = []
    try:
        while True:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        assert e.errno == errno.EMFILE, e
    return fds
PYEOF
}

# A program that runs out of descriptors (EMFILE) while it opens cached
# checkpoints, and frees some again, five times over: with the table full,
# an open fails with EMFILE as without the library (a number the library's
# own publications give back meanwhile is taken by the next fill), the
# library keeps no more descriptors than it had, and the checkpoints read
# back right once there is room.
placeholder_emfile() {
	fulltable_helper
	cat >em.py <<'PYEOF'
import errno, os, random, sys
from fulltable import limit, fill
d = sys.argv[1]
data = [random.Random(i).randbytes(5000 + i) for i in range(3)]
for i, b in enumerate(data):
    with open(f"{d}/c{i}.bin", "wb") as f:
        f.write(b)

def paths_of_root():
    n = 0
    for e in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{e}") == "/":
                n += 1
        except OSError:
            pass
    return n

assert open(f"{d}/c0.bin", "rb").read() == data[0]
before = paths_of_root()
limit()
for round in range(5):
    fds = fill()
    for attempt in range(50):
        try:
            fd = os.open(f"{d}/c1.bin", os.O_RDONLY)
        except OSError as e:
            assert e.errno == errno.EMFILE, f"round {round}: {e}"
            break
        # a number the library's publications used a moment ago was given
        # back: the open is right, and its number stays taken
        assert os.read(fd, 1 << 20) == data[1], f"round {round}: c1.bin read back"
        fds.append(fd)
        fds += fill()
    else:
        raise AssertionError(f"round {round}: a tagged open never failed with a full table")
    for fd in fds:
        os.close(fd)
    assert open(f"{d}/c{round % 3}.bin", "rb").read() == data[round % 3], f"round {round}: read back"
after = paths_of_root()
assert after <= before, f"descriptors of / before: {before}, after five full tables: {after}"
for i in range(3):
    assert open(f"{d}/c{i}.bin", "rb").read() == data[i], f"c{i}.bin read back"
PYEOF
	ck -- "$PY" em.py "$T/ck" || fail "the program failed$(last_error)"
	plain "$PY" -c '
import random, sys
for i in range(3):
    assert open(f"{sys.argv[1]}/c{i}.bin", "rb").read() == random.Random(i).randbytes(5000 + i), f"c{i}.bin"
' "$T/ck" || fail "the checkpoints at their real paths$(last_error)"
}
case_add robust/placeholder-emfile placeholder_emfile

# A program that keeps as many checkpoints open under ulimit -n 64 as it
# can without the library: with it, where its own descriptors take the last
# numbers and an open fails with EMFILE, the library says so once (the
# program gets EMFILE, as it would with a lower limit). Before, nothing
# was said.
emfile_said_once() {
	local script='
import os, sys
fds = []
for i in range(1, int(sys.argv[2]) + 1):
    try:
        fds.append(os.open(f"{sys.argv[1]}/m{i}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    except OSError:
        print(f"stopped at {i}")
        sys.exit(0)
print("all open")'
	local without with n k
	mkdir -p plainck
	without=$( (ulimit -n 64 && plain "$PY" -c "$script" "$T/plainck" 100) 2>/dev/null)
	k=${without#stopped at }
	[[ $k =~ ^[0-9]+$ ]] && [ "$k" -gt 20 ] || fail "without the library: '$without'"
	k=$((k - 1))
	with=$(ulimit -n 64 && ck -- "$PY" -c "$script" "$T/ck" $k)
	n=$(grep -c 'failed with EMFILE' "$T/.log")
	case $with in
	"all open") [ "$n" -eq 0 ] || fail "all $k opened, yet the library said $n times that one failed" ;;
	"stopped at"*) [ "$n" -eq 1 ] || fail "$with of $k under the library, said $n times (expected once)$(last_error)" ;;
	*) fail "the program under the library: '$with'$(last_error)" ;;
	esac
}
case_add robust/emfile-said-once emfile_said_once
# The same with stepping aside on, where checkpoints written through hold
# a file of the library's each until the table is crowded and the
# program's own opens take over: every open succeeds, or the one that
# fails gets EMFILE, as the program's own open would, and it is said once.
emfile_said_once_aside() { E2E_STEP_ASIDE=auto emfile_said_once; }
case_add robust/emfile-said-once-aside emfile_said_once_aside

# A program whose descriptor table is full while the cache publishes what
# it wrote (its files opened for publication get EMFILE): the publication
# waits for room and nothing is lost, even when the table is still full
# as the program ends, with its soft limit below the hard one or not.
flush_table_full() {
	fulltable_helper
	cat >tf.py <<'PYEOF'
import os, random, sys, time
from fulltable import limit, fill
d, hold = sys.argv[1], int(sys.argv[2])
hold_at_exit = hold > 0
limit(hard_too=hold == 2)
data = [random.Random(i).randbytes(3000 + 977 * i) for i in range(12)]
for i, b in enumerate(data):
    with open(f"{d}/c{i}.bin", "wb") as f:
        f.write(b)
fds = fill()
time.sleep(0.8)
if hold_at_exit:
    # the table stays full: the library frees nothing of the program's
    sys.exit(0)
for fd in fds:
    os.close(fd)
for i, b in enumerate(data):
    assert open(f"{d}/c{i}.bin", "rb").read() == b, f"c{i}.bin read back"
PYEOF
	local hold k before
	# 0: room again before the end; 1: full at the end, the soft limit
	# below the hard one; 2: full at the end, both limits at 256
	for hold in 0 1 2; do
		# (a run whose fill ended after the publications had their numbers, on
		# a machine loaded past the 300 ms below, found no table full: it is
		# not this case's, and runs again, 4 runs at most; each is checked)
		for k in 1 2 3 4; do
			rm -rf "$T/ck" && mkdir -p "$T/ck"
			before=$(grep -ac 'no descriptor or memory to publish' "$T/.log" 2>/dev/null)
			# each publication's open waits 300 ms: the table is full by then, on a loaded machine too
			SLOW_US=300000 ck SLOWFS_OPS=open -- "$PY" tf.py "$T/ck" $hold ||
				fail "the program failed (table full at exit: $hold)$(last_error)"
			if grep -aq 'ckptcache: error' "$T/.log"; then
				fail "the library reported an error (table full at exit: $hold)$(first_error 'ckptcache: error')"
			fi
			plain "$PY" -c '
import random, sys
for i in range(12):
    assert open(f"{sys.argv[1]}/c{i}.bin", "rb").read() == random.Random(i).randbytes(3000 + 977 * i), f"c{i}.bin"
' "$T/ck" || fail "the checkpoints at their real paths (table full at exit: $hold)$(last_error)"
			[ "$(grep -ac 'no descriptor or memory to publish' "$T/.log")" -gt "${before:-0}" ] && break
			# (each run's bytes were checked above; a machine loaded past
			# the 300 ms in all 4 runs leaves the full table untried)
			[ $k -lt 4 ] || note "no publication found the table full in 4 runs (table full at exit: $hold): a loaded machine"
		done
	done
}
case_add_waits robust/flush-table-full flush_table_full

# A program that ends with its descriptor table full and checkpoints still
# open for writing (small ones and ones of several MiB, some written in
# pieces): each reaches its real path whole, with the soft limit below the
# hard one or not, whichever side step-aside chose; the library says once
# why it closed them there, and reports no error. (A publication retried
# as the program ends takes the one descriptor the library gives up too:
# the hand-over waits for it to come back, where it used to report the
# checkpoints it could not write, 1 run in 8 on a loaded machine.)
open_at_exit_table_full() {
	fulltable_helper
	cat >ox.py <<'PYEOF'
import os, random, sys
from fulltable import limit, fill
d, both = sys.argv[1], sys.argv[2] == "both"
limit(hard_too=both)
for i in range(3):
    with open(f"{d}/warm{i}.bin", "wb") as f:
        f.write(random.Random(100 + i).randbytes(4000))
sizes = [2000, 1 << 20, 3 * (1 << 20) + 17, 5000, 65536 + 3]
keep = []
for i, n in enumerate(sizes):
    b = random.Random(i).randbytes(n)
    fd = os.open(f"{d}/open{i}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for at in range(0, n, 777777 if i % 2 else n):
        os.write(fd, b[at:at + (777777 if i % 2 else n)])
    keep.append(fd)
f = open(f"{d}/stdio.bin", "wb")
f.write(random.Random(9).randbytes(300000))
f.flush()
fds = fill()
os._exit(0) if sys.argv[3] == "_exit" else sys.exit(0)
PYEOF
	local both side how
	for both in soft both; do
		for side in auto off; do
			for how in exit _exit; do
				rm -rf "$T/ck" && mkdir -p "$T/ck"
				: >"$T/.log"
				ck CKPTCACHE_STEP_ASIDE=$side -- "$PY" ox.py "$T/ck" $both $how ||
					fail "the program failed ($both limits, step aside $side, $how)$(last_error)"
				if grep -aq 'ckptcache: error' "$T/.log"; then
					fail "the library reported an error ($both limits, step aside $side, $how)$(first_error 'ckptcache: error')"
				fi
				# (with the soft limit below the hard one, a publication retried
				# as the program ends may raise it first: then there is room
				# for every hand-over, and nothing to say)
				local said
				said=$(grep -ac 'descriptor table is full as the program ends' "$T/.log")
				[ "$said" = 1 ] || { [ "$both" = soft ] && [ "$said" = 0 ]; } ||
					fail "not said once why the open checkpoints were closed at their real paths ($both limits, step aside $side, $how)"
				plain "$PY" -c '
import random, sys
d = sys.argv[1]
for i, n in enumerate([2000, 1 << 20, 3 * (1 << 20) + 17, 5000, 65536 + 3]):
    got = open(f"{d}/open{i}.bin", "rb").read()
    assert got == random.Random(i).randbytes(n), f"open{i}.bin: {len(got)} of {n} bytes, or other bytes"
for i in range(3):
    assert open(f"{d}/warm{i}.bin", "rb").read() == random.Random(100 + i).randbytes(4000), f"warm{i}.bin"
assert open(f"{d}/stdio.bin", "rb").read() == random.Random(9).randbytes(300000), "stdio.bin"
' "$T/ck" || fail "the checkpoints at their real paths ($both limits, step aside $side, $how)$(last_error)"
			done
		done
	done
}
case_add robust/open-at-exit-table-full open_at_exit_table_full

# Close-to-open while the writer's descriptor table is full: a program
# started with both descriptor limits at 256 (none can be raised) writes
# and closes 6 checkpoints and fills its table before the cache has
# published them, and waits; another process of the node reads each one
# whole meanwhile, as it would without the library. Five runs with the
# table full (a run in which a publication took a number before the fill
# ended, on a loaded machine, runs again; at most 12 runs). (A program
# that fills its table again and again, taking each number as it comes
# free, can take the one the library gives up for such a publication: the
# reader may then get ENOENT after 5 s, ckptcache(7) says so.)
c2o_writer_table_full() {
	fulltable_helper
	cat >w.py <<'PYEOF'
import os, random, sys
from fulltable import limit, fill
d = sys.argv[1]
N = 6
for i in range(4):
    with open(f"{d}/warm{i}.bin", "wb") as f:
        f.write(random.Random(50 + i).randbytes(4000))
for i in range(N):
    with open(f"{d}/closed{i}.bin", "wb") as f:
        f.write(random.Random(i).randbytes(3000 + 7000 * i))
fds = fill()
print("ready", flush=True)
sys.stdin.readline()
for fd in fds:
    os.close(fd)
PYEOF
	cat >drive.py <<'PYEOF'
import os, random, resource, subprocess, sys
d = sys.argv[1]
# both limits at 256 from the start, as a job script's ulimit -n sets them
w = subprocess.Popen([sys.executable, "w.py", d], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                     preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
assert w.stdout.readline().strip() == "ready"
# the writer's table is full (the library's numbers included); on a loaded
# machine the fill may end after a publication took a number and gave it
# back: such a run is not this case's, and exits 3
if len(os.listdir(f"/proc/{w.pid}/fd")) != 256:
    w.stdin.write("go\n")
    w.stdin.close()
    w.wait()
    sys.exit(3)
bad = []
for i in range(6):
    r = subprocess.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())",
                        f"{d}/closed{i}.bin"], capture_output=True)
    if r.returncode != 0 or r.stdout != random.Random(i).randbytes(3000 + 7000 * i):
        bad.append(f"closed{i}.bin: rc {r.returncode}, {len(r.stdout)} bytes {r.stderr.decode()[-200:]}")
w.stdin.write("go\n")
w.stdin.close()
assert w.wait() == 0, "the writer failed"
assert not bad, bad
PYEOF
	local k full=0 rc
	for k in $(seq 1 12); do
		[ $full -lt 5 ] || break
		rm -rf "$T/ck" && mkdir -p "$T/ck"
		# each publication's open waits 200 ms: the table is full by then
		SLOW_US=200000 ck SLOWFS_OPS=open -- "$PY" drive.py "$T/ck"
		rc=$?
		[ $rc -eq 0 ] || [ $rc -eq 3 ] || fail "run $k: a reader did not read what the writer closed$(last_error)"
		[ $rc -eq 3 ] || full=$((full + 1))
		plain "$PY" -c '
import random, sys
for i in range(6):
    assert open(f"{sys.argv[1]}/closed{i}.bin", "rb").read() == random.Random(i).randbytes(3000 + 7000 * i), f"closed{i}.bin"
' "$T/ck" || fail "run $k: the checkpoints at their real paths$(last_error)"
	done
	[ $full -gt 0 ] || fail "in none of $k runs was the writer's table full before its publications"
}
case_add_waits robust/close-to-open-writer-table-full c2o_writer_table_full

# A program with checkpoints open for writing fills its descriptor table
# (both limits alike) and forks; the child writes to the descriptors it
# inherited, then the parent, after freeing a few: every write lands, in
# order, as without the library.
fork_table_full() {
	fulltable_helper
	cat >fk.py <<'PYEOF'
import os, random, sys
from fulltable import limit, fill
d = sys.argv[1]
limit(hard_too=True)
head = [random.Random(i).randbytes(2000 + 3000 * i) for i in range(5)]
fds = []
for i, b in enumerate(head):
    fd = os.open(f"{d}/open{i}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b)
    fds.append(fd)
nul = fill()
pid = os.fork()
if pid == 0:
    code = 0
    for i, fd in enumerate(fds):
        try:
            assert os.write(fd, b"child%d" % i) == 6
        except (OSError, AssertionError) as e:
            print(f"child: open{i}.bin: {e!r}", file=sys.stderr)
            code = 1
    os._exit(code)
_, st = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(st) == 0, "the child's writes failed"
for fd in nul[:10]:
    os.close(fd)
for i, fd in enumerate(fds):
    assert os.write(fd, b"parent%d" % i) == 7
    os.close(fd)
PYEOF
	local side
	for side in auto off; do
		rm -rf "$T/ck" && mkdir -p "$T/ck"
		plain "$PY" fk.py "$T/ck" || fail "the program without the library$(last_error)"
		rm -rf "$T/ck" && mkdir -p "$T/ck"
		ck CKPTCACHE_STEP_ASIDE=$side -- "$PY" fk.py "$T/ck" || fail "step aside $side: the program failed$(last_error)"
		plain "$PY" -c '
import random, sys
for i in range(5):
    want = random.Random(i).randbytes(2000 + 3000 * i) + b"child%d" % i + b"parent%d" % i
    got = open(f"{sys.argv[1]}/open{i}.bin", "rb").read()
    assert got == want, f"open{i}.bin: {len(got)} bytes, {len(want)} wanted: {got[-16:]!r}"
' "$T/ck" || fail "step aside $side: the checkpoints at their real paths$(last_error)"
	done
}
case_add robust/fork-table-full fork_table_full

# A folder's descriptor whose path was looked up for a read, the folder
# then renamed, then a checkpoint written and read at that descriptor: the
# write lands in the folder as it is named now, and every byte reads back,
# in the process and at the real path.
dirfd_after_rename() {
	cat >dr.py <<'PYEOF'
import os, random, sys
top = sys.argv[1]
a = random.Random(1).randbytes(7777)
b = random.Random(2).randbytes(12345)
d = os.open(f"{top}/ck/run", os.O_RDONLY | os.O_DIRECTORY)
op = lambda name, flags: os.open(name, flags, 0o644, dir_fd=d)
for _ in range(3):
    with open("a.bin", "rb", opener=op) as f:
        assert f.read() == a, "a.bin read back"
os.rename(f"{top}/ck/run", f"{top}/ck/run2")
with open("b.bin", "wb", opener=op) as f:
    f.write(b)
with open("b.bin", "rb", opener=op) as f:
    assert f.read() == b, "b.bin read back at the descriptor"
assert open(f"{top}/ck/run2/b.bin", "rb").read() == b, "b.bin read back by its new path"
PYEOF
	# a.bin made without the library: the program is a reader first, and
	# the cache starts with its write
	mkdir -p "$T/ck/run"
	plain "$PY" -c '
import random, sys
open(sys.argv[1], "wb").write(random.Random(1).randbytes(7777))
' "$T/ck/run/a.bin" || fail "a.bin could not be made"
	ck -- "$PY" dr.py "$T" || fail "the program failed$(last_error)"
	if grep -aq 'ckptcache: error' "$T/.log"; then
		fail "the library reported an error$(first_error 'ckptcache: error')"
	fi
	plain "$PY" -c '
import random, sys
assert open(f"{sys.argv[1]}/ck/run2/b.bin", "rb").read() == random.Random(2).randbytes(12345)
assert open(f"{sys.argv[1]}/ck/run2/a.bin", "rb").read() == random.Random(1).randbytes(7777)
' "$T" || fail "the checkpoints at their real paths$(last_error)"
}
case_add robust/dirfd-after-rename dirfd_after_rename

# A published checkpoint that only its real file holds is moved away by
# another program (a clean-up of old checkpoints) while the program reads
# the others back in the order the prefetcher follows: the prefetch of it
# finds no file. Nothing is lost and nothing is said; the cache forgets it
# (it looked for the file again and again, and warned each time), and never
# makes it again at its old path.
prefetch_of_a_moved_file() {
	cat >mv.py <<'PYEOF'
import os, subprocess, sys, time
top = sys.argv[1]
d = f"{top}/ck"
blobs = [bytes([i + 1]) * (3 << 20) for i in range(6)]
for i, b in enumerate(blobs):
    with open(f"{d}/c{i}.bin", "wb") as f:
        f.write(b)
for _ in range(500):
    if os.path.exists(f"{d}/c0.bin"):
        break
    time.sleep(0.01)
time.sleep(0.3)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
subprocess.run(["mv", f"{d}/c0.bin", f"{top}/moved.bin"], env=env, check=True)
for i in reversed(range(1, 6)):
    with open(f"{d}/c{i}.bin", "rb") as f:
        assert f.read() == blobs[i], f"c{i}.bin read back"
time.sleep(0.3)
assert not os.path.exists(f"{d}/c0.bin"), "c0.bin is back at its old path"
PYEOF
	ck CKPTCACHE_HOST_CACHE=8M CKPTCACHE_ORDER=reverse -- "$PY" mv.py "$T" || fail "the program failed$(last_error)"
	if grep -aq 'ckptcache: \(warning\|error\)' "$T/.log"; then
		fail "the library said something$(first_error 'ckptcache: (warning|error)')"
	fi
	plain "$PY" -c '
import os, sys
t = sys.argv[1]
assert open(f"{t}/moved.bin", "rb").read() == bytes([1]) * (3 << 20), "moved.bin"
for i in range(1, 6):
    assert open(f"{t}/ck/c{i}.bin", "rb").read() == bytes([i + 1]) * (3 << 20), f"c{i}.bin"
assert not os.path.exists(f"{t}/ck/c0.bin"), "c0.bin at its old path"
' "$T" || fail "the files at their real paths$(last_error)"
}
case_add robust/prefetch-of-a-moved-file prefetch_of_a_moved_file

# Checkpoints written one after another, each looked at (stat) after its
# close, as a program that keeps the newest does: a later one is never
# older than an earlier one, and each real file keeps the time the program
# saw, whether the cache held the checkpoint or wrote it straight to its
# real path (kernel-stamped), large and small.
mtimes_in_order() {
	cat >mt.py <<'PYEOF'
import os, sys
d, size, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
prev = None
for i in range(n):
    p = f"{d}/f{size}_{i:02d}.bin"
    with open(p, "wb") as f:
        f.write(b"a" * size)
    m = os.stat(p).st_mtime_ns
    print(p, m)
    assert prev is None or m >= prev, f"{p}: mtime {m} is older than the one written before it ({prev})"
    prev = m
PYEOF
	local side size
	for side in auto off; do
		phase "$side"
		for size in 2097152 3000; do
			ck CKPTCACHE_STEP_ASIDE=$side -- "$PY" mt.py "$T/ck" $size 20 >"seen.$side.$size" ||
				fail "STEP_ASIDE=$side, files of $size bytes: the program failed$(last_error)"
			plain "$PY" -c '
import os, sys
for line in open(sys.argv[1]):
    p, m = line.split()
    r = os.stat(p).st_mtime_ns
    assert r == int(m), f"{p}: the program saw mtime {m}, its real file has {r}"
' "seen.$side.$size" || fail "STEP_ASIDE=$side, files of $size bytes: the real files' times$(last_error)"
			rm -f "$T"/ck/*.bin
		done
	done
	# checkpoints (opened by Python, which looks at each) and untagged
	# files (written with no look: the kernel's coarse stamp) in turn,
	# beside another process that keeps setting the times of the file in
	# /dev/shm the cache takes the kernel's fine stamps from, as every
	# program under the library does at each checkpoint's close: no file
	# is older than the one before it
	phase "beside another stamper"
	cat >alt.py <<'PYEOF'
import os, sys
d, u, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
prev, prev_p = 0, None
for i in range(n):
    p = f"{d}/c{i}.bin"
    with open(p, "wb") as f:
        f.write(b"c" * 5000)
    q = f"{u}/u{i}"
    fd = os.open(q, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"u" * 100)
    os.close(fd)
    for x in (p, q):
        m = os.stat(x).st_mtime_ns
        assert m >= prev, f"{x}: mtime {m} is older than {prev_p}'s ({prev}), written before it"
        prev, prev_p = m, x
PYEOF
	local stamp=/dev/shm/ckptcache-stamp-$(id -u)
	mkdir -p "$T/u"
	rm -f "$T/stop"
	plain "$PY" -c '
import os, sys, time
end = time.time() + 60
while time.time() < end and not os.path.exists(sys.argv[2]):
    try:
        os.utime(sys.argv[1])
    except FileNotFoundError:
        open(sys.argv[1], "a").close()
' "$stamp" "$T/stop" &
	local hammer=$! rc=0
	ck -- "$PY" alt.py "$T/ck" "$T/u" 200 || rc=$?
	: >"$T/stop"
	wait $hammer
	[ $rc = 0 ] || fail "beside another stamper: $(grep -a AssertionError "$T/.log" | tail -1)$(last_error)"
	# and every file at its real path holds the program's bytes
	plain "$PY" -c '
import sys
d, u = sys.argv[1], sys.argv[2]
for i in range(200):
    assert open(f"{d}/c{i}.bin", "rb").read() == b"c" * 5000, f"c{i}.bin"
    assert open(f"{u}/u{i}", "rb").read() == b"u" * 100, f"u{i}"
' "$T/ck" "$T/u" || fail "beside another stamper: the files at their real paths$(last_error)"
}
case_add robust/mtimes-in-order mtimes_in_order

# Files the kernel stamps and checkpoints the cache stamps, one after the
# other, while another process of the node keeps getting fine stamps (a
# file it writes and looks at, again and again): the kernel then stamps a
# file no one looked at with the newest of those, past the coarse clock's
# last tick. A checkpoint written after such a file (opened, written and
# closed with no look at it, as a C program or os.open does) is never
# older than it, nor is one written straight to its real path older than
# the checkpoint the cache stamped before it; without the library the
# kernel's stamps are in order. Before, the cache's stamp was the coarse
# clock's, up to a tick older than the file before it.
mtimes_after_kernel_stamps() {
	cat >stamper.py <<'PYEOF'
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
end = time.time() + float(sys.argv[2])
while time.time() < end and not os.path.exists(sys.argv[3]):
    os.write(fd, b"x")
    os.fstat(fd)
PYEOF
	cat >ks.py <<'PYEOF'
import os, sys
d, u, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
W = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
def put(p, size):
    fd = os.open(p, W, 0o644)
    os.write(fd, b"k" * size)
    os.close(fd)
    m = os.stat(p).st_mtime_ns
    with open(p, "rb") as f:
        assert f.read() == b"k" * size, f"{p}: read back other bytes"
    return m
prev, prev_p, out = 0, None, []
for i in range(n):
    for p, size in ((f"{u}/plain{i}", 100), (f"{d}/ck{i}.bin", 4096 + i),
                    (f"{d}/big{i}.bin", (1 << 20) + i)):
        m = put(p, size)
        out.append(f"{p} {m}")
        assert m >= prev, f"{p}: mtime {m} is older than {prev_p}'s ({prev}), written before it"
        prev, prev_p = m, p
print("\n".join(out))
PYEOF
	mkdir -p "$T/u"
	local side
	for side in off auto; do
		phase "$side"
		rm -f "$T/stop"
		plain "$PY" stamper.py "$T/u/stamp" 60 "$T/stop" &
		local sp=$!
		ck CKPTCACHE_STEP_ASIDE=$side CKPTCACHE_HOST_CACHE=256M -- "$PY" ks.py "$T/ck" "$T/u" 40 >"seen.$side"
		local rc=$?
		: >"$T/stop"
		wait "$sp"
		[ $rc = 0 ] || fail "STEP_ASIDE=$side: $(grep -a AssertionError "$T/.log" | tail -1)$(last_error)"
		plain "$PY" -c '
import os, sys
for line in open(sys.argv[1]):
    p, m = line.split()
    assert os.stat(p).st_mtime_ns == int(m), f"{p}: the program saw mtime {m}, its real file has {os.stat(p).st_mtime_ns}"
    want = b"k" * os.path.getsize(p)
    assert open(p, "rb").read() == want, f"{p}: other bytes"
' "seen.$side" || fail "STEP_ASIDE=$side: the real files$(last_error)"
		rm -f "$T"/ck/*.bin "$T"/u/plain*
	done
}
case_add robust/mtimes-after-kernel-stamps mtimes_after_kernel_stamps

# The file in /dev/shm the cache sets and reads back for the kernel's fine
# stamp (ckptcache-stamp-UID) cannot be used: /dev/shm is read-only, or
# the name is a symbolic link someone else made. A program that rewrites a
# checkpoint it looked at, and writes an untagged file after each, gets
# its bytes back in the process and at the real path, each checkpoint no
# older than the untagged file written before it, the time it saw on the
# real file, and the link's target untouched. In a mount namespace.
stamp_file_unusable() {
	command -v unshare >/dev/null || note "no unshare here"
	plain unshare -m sh -c 'mount -t tmpfs -o ro tmpfs /dev/shm' 2>/dev/null ||
		note "cannot mount a tmpfs over /dev/shm in a mount namespace here"
	cat >rw.py <<'PYEOF'
import os, sys
d, u, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p, prev, out = f"{d}/a.bin", 0, []
for i in range(n):
    data = bytes([i % 251]) * (4096 + 17 * i)
    with open(p, "wb") as f:
        f.write(data)
    m = os.stat(p).st_mtime_ns
    assert m >= prev, f"{p}, rewrite {i}: mtime {m} is older than {prev}, of the file written before it"
    with open(p, "rb") as f:
        assert f.read() == data, f"{p}, rewrite {i}: read back other bytes"
    q = f"{u}/plain{i}"
    with open(q, "wb") as f:
        f.write(b"u" * 100)
    prev = os.stat(q).st_mtime_ns
out.append(f"{p} {m} {len(data)} {(n - 1) % 251}")
print("\n".join(out))
PYEOF
	mkdir -p "$T/u"
	printf 'target\n' >target
	touch -d '2001-01-01 00:00:00' target
	local want_t how
	want_t=$(stat -c %Y.%y target)
	for how in read-only symlink; do
		rm -f "$T"/ck/* "$T"/u/*
		plain unshare -m sh -c '
if [ "$1" = read-only ]; then
	mount -t tmpfs -o ro tmpfs /dev/shm || exit 9
else
	mount -t tmpfs tmpfs /dev/shm && ln -s "$2/target" "/dev/shm/ckptcache-stamp-$(id -u)" || exit 9
fi
shift 2
exec "$@"' sh "$how" "$T" env CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_HOST_CACHE=32M CKPTCACHE_STEP_ASIDE=off \
			LD_PRELOAD="$PRELOAD" timeout -k 5 "$CASE_TIMEOUT" "$PY" rw.py "$T/ck" "$T/u" 60 >"seen.$how" 2>"err.$how"
		local rc=$?
		[ $rc = 9 ] && note "cannot set /dev/shm up in a mount namespace here"
		[ $rc = 0 ] || fail "/dev/shm $how: the program ended with $rc: $(grep -a -e AssertionError -e ckptcache "err.$how" | tail -1)"
		grep -q 'ckptcache: error' "err.$how" && fail "/dev/shm $how: $(grep 'ckptcache: error' "err.$how" | head -1)"
		plain "$PY" -c '
import os, sys
p, m, size, b = open(sys.argv[1]).read().split()
assert open(p, "rb").read() == bytes([int(b)]) * int(size), f"{p}: other bytes at the real path"
r = os.stat(p).st_mtime_ns
assert r == int(m), f"{p}: the program saw mtime {m}, its real file has {r}"
' "seen.$how" || fail "/dev/shm $how: the real file$(last_error)"
		[ "$(cat target)" = target ] || fail "/dev/shm $how: the link's target was written"
		[ "$(stat -c %Y.%y target)" = "$want_t" ] || fail "/dev/shm $how: the link's target's time changed: $(stat -c %y target)"
	done
}
case_add robust/stamp-file-unusable stamp_file_unusable

# Another process lowers the program's file size limit (prlimit --pid)
# after the cache has started: each new checkpoint's write then stops at
# the limit as the kernel's does (a short write, EFBIG after, the offset
# where the bytes end), with the cache stepping aside or not; before, the
# written-straight one answered EFBIG with half of it in the file and its
# offset at 0, and the next write overwrote the file's first bytes.
fsize_set_from_outside() {
	cat >fw.py <<'PYEOF'
import os, sys
d = sys.argv[1]
b = bytes(range(256)) * (12 << 12)  # 3 MiB
for i in range(4):
    with open(f"{d}/pre_{i}.bin", "wb") as f:
        f.write(b[: (3 << 20) - i])
print("ready", flush=True)
sys.stdin.readline()
for i in range(3):
    fd = os.open(f"{d}/after_{i}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        r = os.write(fd, b[: 2 << 20])
    except OSError as e:
        r = f"error {e.errno}"
    print(f"after_{i}: write of 2 MiB -> {r}, offset {os.lseek(fd, 0, os.SEEK_CUR)}")
    try:
        r = os.write(fd, b"ABCDEFGHIJ")
    except OSError as e:
        r = f"error {e.errno}"
    print(f"after_{i}: then 10 bytes -> {r}, offset {os.lseek(fd, 0, os.SEEK_CUR)}")
    os.close(fd)
PYEOF
	cat >drive.py <<'PYEOF'
import os, resource, subprocess, sys
d, out = sys.argv[1], sys.argv[2]
p = subprocess.Popen([sys.executable, "fw.py", d], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert p.stdout.readline().strip() == "ready"
hard = resource.prlimit(p.pid, resource.RLIMIT_FSIZE)[1]
resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (1 << 20, hard))
p.stdin.write("go\n")
p.stdin.close()
text = p.stdout.read()
assert p.wait() == 0, f"the program ended with {p.returncode}"
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
sizes = subprocess.run(["sh", "-c", f"cd {d} && for f in after_*.bin; do echo $f $(wc -c < $f) $(head -c 16 $f | od -An -tx1 | tr -d ' '); done"],
                       env=env, capture_output=True, text=True, check=True).stdout
open(out, "w").write(text + sizes)
PYEOF
	mkdir -p plainrun
	plain "$PY" drive.py "$T/plainrun" want.txt || fail "the program without the library"
	local side
	for side in auto off; do
		rm -rf "$T/ck"/*
		ck CKPTCACHE_STEP_ASIDE=$side -- "$PY" drive.py "$T/ck" got.txt ||
			fail "STEP_ASIDE=$side: the program failed$(last_error)"
		diff want.txt got.txt >/dev/null || fail "STEP_ASIDE=$side: with the library:
$(cat got.txt)
without:
$(cat want.txt)"
	done
}
case_add robust/fsize-set-from-outside fsize_set_from_outside

# A large checkpoint whose real file another program (without the library)
# replaces right after the close, the writer opening it again at once: the
# other program's file is kept and read, and this program's version is
# saved in one rescue file, said once (the flush and the open that both
# found the real file changed made two copies of 192 MiB, each said).
changed_rescued_once() {
	cat >a.py <<'PYEOF'
import hashlib, os, sys, time
d = sys.argv[1]
ck = d + "/ck"
for i in range(3):
    with open(f"{ck}/w{i}.bin", "wb") as f:
        f.write(b"w" * (2 << 20))
with open(f"{ck}/big.bin", "wb") as f:
    for k in range(192):
        f.write(bytes([k]) * (1 << 20))
open(d + "/go", "w").close()
while not os.path.exists(d + "/done"):
    time.sleep(0.002)
assert open(f"{ck}/big.bin", "rb").read() == b"new contents " * 1000, "the other program's file is not what is read"
PYEOF
	local k rescues said exercised=0
	# (up to 5 runs, until 2 found the file changed: on a loaded machine
	# the other program's rename may come after the publication)
	for k in 1 2 3 4 5; do
		[ $exercised -lt 2 ] || break
		rm -rf "$T/ck" "$T/rescue" "$T/go" "$T/done" && mkdir -p "$T/ck" "$T/rescue"
		# the other program, started first, replaces the file as soon as
		# the checkpoint is closed
		plain "$PY" -c '
import os, sys, time
d = sys.argv[1]
t = d + "/ck/big.bin"
end = time.monotonic() + 60
while not os.path.exists(d + "/go") and time.monotonic() < end:
    time.sleep(0.0005)
open(t + ".tmp", "wb").write(b"new contents " * 1000)
os.rename(t + ".tmp", t)
open(d + "/done", "w").close()' "$T" &
		: >"$T/.log"
		# a rescue file's open waits a second: the first copy is still
		# being made when the second finder comes
		SLOW_US=1000000 SLOW_MATCH="$T/rescue" ck SLOWFS_OPS=open CKPTCACHE_HOST_CACHE=512M \
			CKPTCACHE_RESCUE_DIR="$T/rescue" -- "$PY" a.py "$T" ||
			fail "run $k: the program failed$(last_error)"
		wait
		said=$(grep -ac 'was changed at its real path by another program' "$T/.log")
		rescues=$(find "$T/rescue" -name 'rescue.*-big.bin' | wc -l)
		# (none: the flush had published before the other program's
		# rename, which then simply replaced the file)
		[ "$said" -le 1 ] || fail "run $k: said $said times that the real file was changed"
		[ "$rescues" = "$said" ] || fail "run $k: $rescues rescue files of big.bin, said $said times"
		plain cmp -s "$T/ck/big.bin" <(printf 'new contents %.0s' $(seq 1000)) ||
			fail "run $k: the real file is not the other program's"
		[ "$said" = 1 ] || continue
		exercised=$((exercised + 1))
		plain "$PY" -c '
import sys
want = b"".join(bytes([k]) * (1 << 20) for k in range(192))
assert open(sys.argv[1], "rb").read() == want, "the rescue file is not the version"
assert open(sys.argv[2], "rb").read() == b"new contents " * 1000, "the real file is not the other program'"'"'s"
' "$(find "$T/rescue" -name 'rescue.*-big.bin')" "$T/ck/big.bin" || fail "run $k: the files$(last_error)"
	done
	[ $exercised -gt 0 ] ||
		note "in each run the cache had published the checkpoint before the other program replaced it: nothing to rescue"
}
case_add_waits robust/changed-rescued-once changed_rescued_once

# Writers in place killed with SIGKILL leave their slots in the node's
# table of writes in place (ckptcache-UID.inplace3). The next process that
# writes in place frees them: before, they stayed for good, every later
# open for writing of every job searched the table, and the freed slots
# piled up before them until a search walked nearly all of it.
inplace_slots_of_killed_writers() {
	local table
	for table in /dev/shm/ckptcache-$(id -u).inplace3 /tmp/ckptcache-$(id -u).inplace3; do
		[ -f "$table" ] && break
	done
	cat >slots.py <<'PYEOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
pids = {int(p) & 0xFFFFFF for p in sys.argv[2:]}
vals = struct.unpack_from("<%dQ" % ((len(data) - 64) // 8), data, 64)
print(sum(1 for v in vals if v > 1 and (v & 0xFFFFFF) in pids))
PYEOF
	cat >hold.py <<'PYEOF'
import os, sys, time
d = sys.argv[1]
fds = []
for i in range(8):
    p = f"{d}/shared_{os.getpid()}_{i}.bin"
    with open(p, "wb") as f:
        f.write(b"x" * 4096)
    fds.append(open(p, "r+b"))  # a write in place: announced in the table
print("ready", os.getpid(), flush=True)
time.sleep(60)
PYEOF
	local pids=() i pid
	for i in 1 2 3; do
		ck -- "$PY" hold.py "$T/ck" >"hold$i.out" 2>&1 &
		for _ in $(seq 1 100); do grep -q ready "hold$i.out" 2>/dev/null && break; sleep 0.1; done
		grep -q ready "hold$i.out" || fail "writer $i never got ready$(last_error)"
		pids+=("$(awk '/^ready/ {print $2}' "hold$i.out")")
	done
	for pid in "${pids[@]}"; do
		[ -n "$pid" ] || fail "a writer's process id was not found"
	done
	[ -f "$table" ] || for table in /dev/shm/ckptcache-$(id -u).inplace3 /tmp/ckptcache-$(id -u).inplace3; do
		[ -f "$table" ] && break
	done
	[ -f "$table" ] || fail "no table of writes in place after three writers"
	local before after
	before=$("$PY" slots.py "$table" "${pids[@]}")
	[ "$before" -ge 3 ] || fail "the writers' slots are not in $table ($before of 24)"
	kill -9 "${pids[@]}"
	wait 2>/dev/null
	# a new process writes in place
	ck -- "$PY" -c 'import sys
p = sys.argv[1] + "/later.bin"
open(p, "wb").write(b"y" * 100)
with open(p, "r+b") as f:
    f.write(b"z")
print(open(p, "rb").read(3))' "$T/ck" >later.out || fail "the later writer failed$(last_error)"
	grep -q "b'zyy'" later.out || fail "the later writer read back $(cat later.out)"
	after=$("$PY" slots.py "$table" "${pids[@]}")
	[ "$after" -eq 0 ] || fail "$after slots of the killed writers are still in $table (they held $before)"
	[ "$(plain head -c 3 "$T/ck/later.bin")" = zyy ] || fail "later.bin at its real path: $(plain head -c 3 "$T/ck/later.bin")"
}
case_add robust/inplace-slots-of-killed-writers inplace_slots_of_killed_writers

# A writev whose checkpoint goes to its real file in the middle of the
# vector (the cache's copy grew past half the free space of a 60 MiB
# tmpfs: the library hands it over there) moves the rest of the vector
# there in the same call: every writev answers its whole length and the
# files are the program's, as without the library (the call answered the
# pieces before the hand-over alone, and a program that does not retry a
# short writev lost the rest).
# $1: writev, or dsync (pwritev2 with RWF_DSYNC, under strace: the bytes
# the hand-over moved before the rest are synced too)
writev_handed_mid_vector() {
	local mode=${1:-writev}
	command -v unshare >/dev/null || note "no unshare here"
	[ "$mode" != dsync ] || needs_strace
	mkdir -p small
	plain unshare -m sh -c 'mount -t tmpfs -o size=60M tmpfs small' 2>/dev/null ||
		note "cannot mount a tmpfs in a mount namespace here"
	local side
	for side in plain lib; do
		plain unshare -m sh -c 'mount -t tmpfs -o size=60M tmpfs small || exit 9
			t=$1 py=$3 side=$4 mode=$5
			[ "$side" = lib ] && export CKPTCACHE_PATHS="$t/small/*.bin" CKPTCACHE_STEP_ASIDE=off \
				CKPTCACHE_TRACE="$t/trace.txt" LD_PRELOAD="$2"
			shift 5
			[ "$mode" = dsync ] && set -- strace -f -qq -o "$t/syncs_$side.txt" -e trace=pwritev2,fsync,fdatasync
			"$@" "$py" -c "
import hashlib, os, sys
dsync = sys.argv[1] == \"dsync\"
short = 0
for k, mb in enumerate((6, 6, 40)):
    fd = os.open(f\"small/v{k}.bin\", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    n = 0
    i = 0
    while n < mb * 1000000:
        pieces = [bytes([(k + i + j) % 251]) * (20000 if j % 9 == 8 else 700 + (i * 7 + j * 13) % 1200) for j in range(64)]
        want = sum(len(p) for p in pieces)
        got = os.pwritev(fd, pieces, n, os.RWF_DSYNC) if dsync else os.writev(fd, pieces)
        short += got != want
        n += got
        i += 1
    os.close(fd)
    print(k, n, hashlib.sha256(open(f\"small/v{k}.bin\", \"rb\").read()).hexdigest())
print(\"short\", short)
" "$mode" || exit 8' sh "$T" "$PRELOAD" "$PY" $side "$mode" >out_$side.txt 2>err_$side.txt
		echo "rc $?" >>out_$side.txt
	done
	cat out_plain.txt out_lib.txt err_lib.txt
	grep -q handoff trace.txt || note "no hand-over in the middle of the writes here (the tmpfs had room)"
	cmp -s out_plain.txt out_lib.txt ||
		fail "writev with a hand-over:$(tr '\n' ' ' <out_plain.txt) without the library,$(tr '\n' ' ' <out_lib.txt) with it"
	grep -q 'ckptcache: error' err_lib.txt && fail "an error message:$(first_error 'ckptcache: error')"
	if [ "$mode" = dsync ]; then
		# the checkpoint handed over in the middle of a vector: the
		# bytes before it reached the real file without RWF_DSYNC
		local handed
		handed=$(grep -c handoff trace.txt)
		# (a sync by the thread that wrote: the library's own threads
		# sync the files they flush)
		awk '$2 ~ /^pwritev2\(/ { w[$1] = 1 } $2 ~ /^f(data)?sync\(/ && w[$1] { s = 1 } END { exit !s }' \
			syncs_lib.txt ||
			fail "$handed hand-overs in the middle of pwritev2(RWF_DSYNC) calls and no sync of the bytes moved before them"
	fi
	return 0
}
case_add robust/writev-handed-mid-vector writev_handed_mid_vector
case_add robust/pwritev2-dsync-handed-mid-vector writev_handed_mid_vector dsync

# The kernel gives a new descriptor the lowest free number, and programs
# count on it: close(1) then open of a log makes the log the standard
# output; an open after the close of 3 gets 3. The program writes
# checkpoints (the cache's threads open files of their own meanwhile:
# temporary files, /proc looks) and between them redirects its output so a
# few hundred times and opens /dev/null; every number is the one it has
# without the library, every line reaches the log, every checkpoint holds
# its last version at its real path.
fd_lowest_number() {
	cat >low.c <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
int main(int c, char **v)
{
	static char buf[1 << 20];
	char p[4096], log[4096];
	int other = 0, others = 0, notone = 0, lines = 0;
	snprintf(log, sizeof(log), "%s", v[2]);
	for (int k = 0; k < 120; k++) {
		snprintf(p, sizeof(p), "%s/ckpt_%d.bin", v[1], k % 8);
		memset(buf, k, sizeof(buf));
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf) || close(fd))
			return 3;
		for (int i = 0; i < 150; i++) {
			close(1);
			int n = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
			notone += n != 1;
			if (write(1, "line\n", 5) == 5)
				lines++;
			if (n != 1 && n >= 0)
				close(n);
			int z = open("/dev/null", O_RDONLY);
			other += z != 3;
			if (z >= 0)
				close(z);
			/* calls that make no file but take a number too */
			int k[3] = { epoll_create1(0), inotify_init1(0), timerfd_create(CLOCK_MONOTONIC, 0) };
			for (int j = 0; j < 3; j++) {
				others += k[j] != 3;
				if (k[j] >= 0)
					close(k[j]);
			}
		}
	}
	close(1);
	fprintf(stderr, "open after close(1) not 1: %d; /dev/null not at 3: %d; epoll, inotify, timerfd not at 3: %d; "
		"lines written: %d\n", notone, other, others, lines);
	return 0;
}
C
	gcc -O2 -o low low.c || fail "the program did not compile"
	mkdir -p plainrun
	# (standard input, output and error open, 3 free: as the program expects)
	plain ./low plainrun plainrun.log 2>want.txt </dev/null || fail "the program without the library"
	ck -- ./low ck ck.log 2>got.txt </dev/null || fail "the program with the library$(last_error)"
	grep -v ckptcache: got.txt >got_prog.txt
	outputs_match want.txt got_prog.txt
	grep -q 'ckptcache: error' got.txt && fail "an error message:$(grep -m1 'ckptcache: error' got.txt)"
	[ "$(wc -l <ck.log)" = "$(wc -l <plainrun.log)" ] ||
		fail "the log holds $(wc -l <ck.log) lines with the library, $(wc -l <plainrun.log) without"
	local f
	for f in plainrun/ckpt_*.bin; do
		same "$f" "ck/${f##*/}" "${f##*/}"
	done
	return 0
}
case_add robust/fd-lowest-number fd_lowest_number

# The guard's bound: a file system that holds the library's own opens for
# 1.5 s each (a stalled metadata server: slowfs) while the program opens
# /dev/null in a loop. The program's calls wait for the library's open
# under way at most 100 ms once per such open, then go on: no open of the
# program's takes 600 ms, thousands are made during the stalls, at least
# one met a stalled open (else the case tested nothing), and each
# checkpoint holds its bytes in the program and at its real path.
fd_guard_gives_up() {
	cat >gu.c <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int c, char **v)
{
	(void)c;
	static char buf[3][300000], back[300000];
	char p[4096];
	for (int k = 0; k < 3; k++) {
		memset(buf[k], 'a' + k, sizeof(buf[k]));
		snprintf(p, sizeof(p), "%s/ckpt_%d.bin", v[1], k);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf[k], sizeof(buf[k])) != (ssize_t)sizeof(buf[k]) || close(fd))
			return 3;
	}
	double end = now() + 3.0, worst = 0;
	int opens = 0, waited = 0, not3 = 0;
	while (now() < end) {
		double t = now();
		int z = open("/dev/null", O_RDONLY);
		t = now() - t;
		if (t > worst)
			worst = t;
		waited += t > 0.05;
		not3 += z != 3;
		opens++;
		if (z >= 0)
			close(z);
	}
	for (int k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "%s/ckpt_%d.bin", v[1], k);
		int fd = open(p, O_RDONLY);
		if (fd < 0 || read(fd, back, sizeof(back)) != (ssize_t)sizeof(back) || memcmp(back, buf[k], sizeof(back)))
			return 4;
		close(fd);
	}
	printf("opens %d waited %d worst_ms %.0f not3 %d\n", opens, waited, worst * 1e3, not3);
	return 0;
}
C
	gcc -O2 -o gu gu.c || fail "the program did not compile"
	local out opens waited worst not3 k
	out=$(SLOW_US=1500000 ck SLOWFS_OPS=open -- ./gu "$T/ck" </dev/null) ||
		fail "the program with the library (exit $?: 4 = a checkpoint read back wrong)$(last_error)"
	read -r _ opens _ waited _ worst _ not3 <<<"$out"
	[ "$worst" -lt 600 ] || fail "an open of the program's took $worst ms (the bound is 100 ms a stalled open): $out"
	[ "$waited" -ge 1 ] || fail "no open of the program's met the library's stalled open: $out"
	[ "$opens" -ge 1000 ] || fail "only $opens opens in 3 s: $out"
	# (not3: opens that got another number than 3 while a file of the
	# library's had it after the bound, ckptcache(7); reported, not checked)
	echo "$out" >&2
	for k in 0 1 2; do
		plain "$PY" -c '
import sys
b = open(sys.argv[1], "rb").read()
assert b == bytes([97 + int(sys.argv[2])]) * 300000, (len(b), b[:4])
' "$T/ck/ckpt_$k.bin" $k || fail "ckpt_$k.bin at its real path$(last_error)"
	done
	return 0
}
case_add robust/fd-guard-gives-up fd_guard_gives_up

# A checkpoint open for writing is opened again by another thread: its
# writer is handed over to the real file, where the second open goes too,
# and the writer's descriptor follows at its next call. Before either
# gets there (the second open held 200 ms by a slow file system: slowfs),
# the first thread closes and rewrites the path: that version goes to the
# real file as well, as the other writes to it are under way. No version is
# reported as changed by another program, no rescue file is made, and the
# file holds one whole write, in the program and at its real path.
handed_writer_reopened() {
	cat >ho.c <<'C'
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static char path[4096];
static char half[25000], a2[50000], bb[50000], back[60000];
static volatile int stage;
static void nap(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}
static void *second(void *x)
{
	(void)x;
	while (stage < 1)
		nap(1);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, bb, sizeof(bb)) != (ssize_t)sizeof(bb) || close(fd))
		perror("second");
	return NULL;
}
int main(int c, char **v)
{
	(void)c;
	memset(half, 'h', sizeof(half));
	memset(a2, 'a', sizeof(a2));
	memset(bb, 'b', sizeof(bb));
	snprintf(path, sizeof(path), "%s/ckpt.bin", v[1]);
	pthread_t t;
	pthread_create(&t, NULL, second, NULL);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, half, sizeof(half)) != (ssize_t)sizeof(half))
		return 3;
	stage = 1;
	nap(60); /* the other thread is in its open by now */
	if (close(fd))
		return 4;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, a2, sizeof(a2)) != (ssize_t)sizeof(a2) || close(fd))
		return 5;
	pthread_join(t, NULL);
	fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, back, sizeof(back));
	if (n != 50000 || (memcmp(back, a2, 50000) && memcmp(back, bb, 50000)))
		return 6;
	printf("%c\n", back[0]);
	return 0;
}
C
	gcc -O2 -pthread -o ho ho.c || fail "the program did not compile"
	local k got
	for k in 1 2 3; do
		rm -rf "$T/ck" rescue
		mkdir -p "$T/ck" rescue
		got=$(SLOW_US=200000 ck SLOWFS_OPS=openat CKPTCACHE_RESCUE_DIR="$T/rescue" -- ./ho "$T/ck" 2>err.txt) ||
			fail "run $k: the program (exit $?: 6 = not one whole write read back)$(last_error)"
		grep -q 'ckptcache: error' err.txt &&
			fail "run $k: $(grep -c 'ckptcache: error' err.txt) error(s):$(grep -m1 'ckptcache: error' err.txt | cut -c1-200)"
		[ -z "$(find rescue -type f)" ] || fail "run $k: rescue files made: $(find rescue -type f | head -3 | tr '\n' ' ')"
		plain "$PY" -c '
import sys
b = open(sys.argv[1], "rb").read()
assert len(b) == 50000 and b == b[:1] * 50000 and b[:1].decode() == sys.argv[2], (len(b), b[:1], sys.argv[2])
' "$T/ck/ckpt.bin" "$got" || fail "run $k: ckpt.bin at its real path is not the write read back ($got)$(last_error)"
	done
	return 0
}
case_add robust/handed-writer-reopened handed_writer_reopened

# A buffer the program cannot read or write, passed to a call on a cached
# checkpoint: the call fails with EFAULT (or, for a vector, stops at the
# first bad piece with the bytes before it), as the kernel answers, and the
# program goes on. (The library's copy faulted in the program's stead: the
# program died of SIGSEGV and the cached checkpoints were lost; a NULL
# buffer was taken for a device address and copied from, on a machine with
# no GPU, with the same end.) A buffer
# that is bad only in part fails whole (the kernel may move the part
# before the fault: ckptcache(7)). Under a sanitizer's runtime, whose
# handler of SIGSEGV comes before the library's, the faults are skipped.
bad_buffer_efault() {
	cat >bb.c <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
static void said(const char *what, ssize_t r)
{
	printf("%s = %zd %s\n", what, r, r < 0 ? strerror(errno) : "");
}
int main(int c, char **v)
{
	char p[4096], small[100];
	char *m = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c != 3 || m == MAP_FAILED)
		return 2;
	memset(m, 'w', 8192);
	mprotect(m + 4096, 4096, PROT_NONE);
	int faults = v[2][0] == '1';
	struct iovec iov[20];
	char pieces[20][100];
	for (int k = 0; k < 20; k++) {
		memset(pieces[k], 'a' + k, 100);
		iov[k].iov_base = pieces[k];
		iov[k].iov_len = 100;
	}
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "%s/ck%d.bin", v[1], i);
		int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			return 3;
		said("write", write(fd, m, 4096));
		said("writev", writev(fd, iov, 20));
		/* no buffer at all (a NULL the kernel answers with EFAULT) */
		said("write from NULL", write(fd, NULL, 100));
		said("pwrite from NULL", pwrite(fd, NULL, 100, 20000));
		iov[5].iov_base = NULL;
		said("writev, piece 5 NULL", writev(fd, iov, 20));
		iov[5].iov_base = pieces[5];
		if (faults) {
			said("write from address 16", write(fd, (void *)16, 100));
			said("pwrite past the end from address 16", pwrite(fd, (void *)16, 100, 20000));
			said("pread into a page it cannot write", pread(fd, m + 4096, 100, 0));
			iov[10].iov_base = (void *)16;
			said("writev, piece 10 bad", writev(fd, iov, 20));
			lseek(fd, 0, SEEK_SET);
			iov[10].iov_base = m + 4096;
			said("readv, piece 10 bad", readv(fd, iov, 20));
			iov[10].iov_base = pieces[10];
		}
		said("pread", pread(fd, small, 100, 4000));
		printf("%.4s\n", small + 96);
		if (close(fd))
			return 4;
	}
	return 0;
}
C
	gcc -O2 -o bb bb.c || fail "the program did not compile"
	local faults=1
	[ -z "$EXTRA" ] || faults=0
	mkdir -p plainrun
	plain ./bb plainrun $faults >want.txt || fail "the program without the library"
	ck -- ./bb ck $faults >got.txt 2>err.txt || fail "the program with the library: $(status_text $?)$(last_error)"
	outputs_match want.txt got.txt
	local i
	for i in 0 1 2 3; do
		same plainrun/ck$i.bin ck/ck$i.bin "ck$i.bin at its real path"
	done
	[ $faults -eq 0 ] || grep -q "write from address 16 = -1" got.txt || fail "no EFAULT answered"
	grep -q "write from NULL = -1" got.txt || fail "no EFAULT answered for a NULL buffer"
}
case_add robust/bad-buffer-efault bad_buffer_efault

# A checkpoint renamed while its writer is open, then handed over to its
# real file (an open of its new name in the same process, a fork, a
# command run by system(), a hard link, a lock, a second rename): its
# descriptors go on at the file of its new name, and every byte written
# before and after reaches it. (The hand-over reopened the name the
# descriptor was opened at, which no longer exists: the writes after it
# failed with EIO, and the file lacked them.)
renamed_writer_handed() {
	cat >rw.c <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int c, char **v)
{
	char a[4096], b[4096], l[4096], buf[8192];
	if (c != 3 || chdir(v[1]) != 0)
		return 2;
	const char *how = v[2];
	for (int i = 0; i < (int)sizeof(buf); i++)
		buf[i] = (char)(i * 7 + 3);
	snprintf(a, sizeof a, "c-%s.bin", how);
	snprintf(b, sizeof b, "a-%s.bin", how);
	snprintf(l, sizeof l, "l-%s.bin", how);
	int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, 3000) != 3000 || rename(a, b) != 0)
		return 3;
	if (!strcmp(how, "open")) {
		int r = open(b, O_RDONLY);
		if (r < 0 || read(r, buf + 5000, 3000) != 3000 || memcmp(buf, buf + 5000, 3000))
			return 4;
		close(r);
	} else if (!strcmp(how, "fork")) {
		pid_t p = fork();
		if (p == 0)
			_exit(write(fd, buf + 3000, 100) == 100 ? 0 : 1);
		int st;
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
			return 5;
	} else if (!strcmp(how, "system")) {
		char cmd[8192];
		snprintf(cmd, sizeof cmd, "test -s %s", b);
		if (system(cmd) != 0)
			return 6;
	} else if (!strcmp(how, "link")) {
		if (link(b, l) != 0)
			return 7;
	} else if (!strcmp(how, "lock")) {
		struct flock fl = { .l_type = F_WRLCK };
		if (fcntl(fd, F_SETLK, &fl) != 0)
			return 8;
	} else if (!strcmp(how, "rename")) {
		snprintf(l, sizeof l, "r-%s.bin", how);
		int r;
		if (rename(b, l) != 0 || (r = open(l, O_RDONLY)) < 0)
			return 9;
		close(r);
		strcpy(b, l);
	}
	if (write(fd, "hello", 5) != 5) {
		perror("write after the hand-over");
		return 10;
	}
	if (close(fd) != 0)
		return 11;
	printf("%s done\n", b);
	return 0;
}
C
	gcc -O2 -o rw rw.c || fail "the program did not compile"
	local how f
	mkdir -p plainrun
	for how in open fork system link lock rename; do
		plain ./rw plainrun $how >>want.txt || fail "$how: the program without the library"
		ck -- ./rw ck $how >>got.txt 2>err.txt || fail "$how: the program with the library: $(status_text $?)$(last_error)"
	done
	outputs_match want.txt got.txt
	for f in plainrun/*.bin; do
		same "$f" "ck/${f#plainrun/}" "${f#plainrun/} at its real path"
	done
	[ "$(ls ck)" = "$(ls plainrun)" ] || fail "ck holds $(ls ck | tr '\n' ' '), without the library: $(ls plainrun | tr '\n' ' ')"
}
case_add robust/renamed-writer-handed renamed_writer_handed

# A new version renamed over a file the program still writes through a
# descriptor of its real file (a process's first checkpoint, written
# straight; a checkpoint opened for writing twice): that descriptor keeps
# the file it opened, as the kernel's rename leaves it, and the name holds
# the new version, whole. (The cache's rename left the name to the old
# file until the new version was published; the writes through the old
# descriptor landed there, and the publication took them for another
# program's: the new version went to a rescue file and the name kept the
# old bytes.)
rename_over_real_writer() {
	cat >ro.c <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int c, char **v)
{
	char b[64] = { 0 };
	struct stat st;
	if (c != 3 || chdir(v[1]) != 0)
		return 2;
	int old = open("b.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (old < 0 || write(old, "old-old-old-old", 15) != 15)
		return 3;
	if (v[2][0] == '1') {
		int again = open("b.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (again < 0 || close(again) != 0)
			return 4;
	}
	int nw = open("c.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (nw < 0 || write(nw, "NEWNEWNEWNEWNEWNEWNEW", 21) != 21 || rename("c.bin", "b.bin") != 0)
		return 5;
	if (pwrite(old, "XX", 2, 0) != 2 || fstat(old, &st) != 0)
		return 6;
	printf("old descriptor: links %ld\n", (long)st.st_nlink);
	if (write(nw, "tail", 4) != 4 || close(nw) != 0 || close(old) != 0)
		return 7;
	int r = open("b.bin", O_RDONLY);
	if (r < 0 || read(r, b, sizeof b - 1) < 0)
		return 8;
	printf("b.bin: %s\n", b);
	return 0;
}
C
	gcc -O2 -o ro ro.c || fail "the program did not compile"
	local k aside
	for k in 0 1; do
		aside=auto
		[ $k = 1 ] && aside=off
		rm -rf plainrun ck/*
		mkdir -p plainrun
		plain ./ro plainrun $k >want$k.txt || fail "$k: the program without the library"
		ck CKPTCACHE_STEP_ASIDE=$aside -- ./ro ck $k >got$k.txt 2>err$k.txt ||
			fail "$k: the program with the library: $(status_text $?)$(last_error)"
		outputs_match want$k.txt got$k.txt
		same plainrun/b.bin ck/b.bin "b.bin at its real path ($k)"
		! grep -q 'rescue' err$k.txt || fail "$k: a rescue file: $(cat err$k.txt)"
	done
}
case_add robust/rename-over-real-writer rename_over_real_writer

# flock and fstat through the descriptor of a cached checkpoint renamed
# while open (k=0; another file made at its old name since) or renamed over
# (k=1): the lock is the version's at its new name, and a child's lock of
# that name waits for it while one of the other file does not; fstat gives
# the version's inode, not the other file's; a child's open makes the
# version go to its real file, and the writes after it land there. (The
# lock was taken on the file at the name the descriptor was opened by:
# the other file; when the version went to its real file, that descriptor
# became the program's, and its last write went into the other file.)
renamed_locked_writer() {
	cat >rl.c <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
static char buf[1 << 20];
static void child_lock(const char *name)
{
	int r = open(name, O_RDONLY);
	int rc = r < 0 ? -2 : flock(r, LOCK_EX | LOCK_NB);
	printf("child's flock of %s: %d\n", name, rc);
}
int main(int c, char **v)
{
	if (c != 3 || chdir(v[1]) != 0)
		return 2;
	int over = v[2][0] == '1';
	memset(buf, 'a', sizeof buf);
	for (int i = 0; i < 3; i++) {
		char n[32];
		snprintf(n, sizeof n, "w%d.ck", i);
		int f = open(n, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (f < 0 || write(f, buf, sizeof buf) != sizeof buf || close(f))
			return 3;
	}
	int fd = open("a.ck", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, sizeof buf) != sizeof buf)
		return 4;
	if (!over && rename("a.ck", "b.ck") != 0)
		return 5;
	int o = open(over ? "n.ck" : "a.ck", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (o < 0 || write(o, "other", 5) != 5 || close(o) || (over && rename("n.ck", "a.ck")))
		return 6;
	struct stat s1, s2, s3;
	if (fstat(fd, &s1) || stat("a.ck", &s2) || (!over && stat("b.ck", &s3)))
		return 7;
	printf("fstat: size %lld mode %o links %ld, the other file's inode %d", (long long)s1.st_size,
	       s1.st_mode & 0777, (long)s1.st_nlink, s1.st_ino == s2.st_ino && s1.st_dev == s2.st_dev);
	if (!over)
		printf(", b.ck's %d", s1.st_ino == s3.st_ino && s1.st_dev == s3.st_dev);
	printf("\n");
	if (flock(fd, LOCK_EX) != 0)
		return 8;
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		if (!over)
			child_lock("b.ck");
		child_lock("a.ck");
		fflush(stdout);
		_exit(0);
	}
	if (p < 0 || waitpid(p, NULL, 0) != p)
		return 9;
	if (write(fd, "tail", 4) != 4 || close(fd))
		return 10;
	return 0;
}
C
	gcc -O2 -o rl rl.c || fail "the program did not compile"
	local k aside
	# (stepping aside, the other file is written at its real path)
	for k in 0 1; do
		for aside in off auto; do
			rm -rf plainrun ck/*
			mkdir -p plainrun
			plain ./rl plainrun $k >want$k.txt || fail "$k: the program without the library"
			ck CKPTCACHE_STEP_ASIDE=$aside -- ./rl ck $k >got$k$aside.txt 2>err$k$aside.txt ||
				fail "$k $aside: the program with the library: $(status_text $?)$(last_error)"
			outputs_match want$k.txt got$k$aside.txt
			same plainrun/a.ck ck/a.ck "a.ck at its real path ($k $aside)"
			[ $k = 1 ] || same plainrun/b.ck ck/b.ck "b.ck at its real path ($aside)"
		done
	done
}
case_add robust/renamed-locked-writer renamed_locked_writer

# copy_file_range from the descriptor of a cached checkpoint unlinked into
# the file made at its name since: two files, as without the library, and
# the copy is made. Within one version opened by two names (renamed
# between the opens), overlapping ranges fail with EINVAL as the kernel's.
# (The library took two descriptors of one path for one file, and refused
# the copy with EINVAL.)
copy_range_unlinked() {
	cat >cfr.c <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static char buf[1 << 20];
int main(int c, char **v)
{
	if (c != 2 || chdir(v[1]) != 0)
		return 2;
	memset(buf, 'a', sizeof buf);
	for (int i = 0; i < 3; i++) {
		char n[32];
		snprintf(n, sizeof n, "w%d.ck", i);
		int f = open(n, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (f < 0 || write(f, buf, sizeof buf) != sizeof buf || close(f))
			return 3;
	}
	int fd = open("a.ck", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, sizeof buf) != sizeof buf || unlink("a.ck"))
		return 4;
	int o = open("a.ck", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (o < 0 || write(o, "other", 5) != 5)
		return 5;
	off_t i0 = 0, o0 = 0;
	ssize_t r = copy_file_range(fd, &i0, o, &o0, 8192, 0);
	printf("copy_file_range: %zd %s\n", r, r < 0 ? strerror(errno) : "");
	/* one version by two names */
	int p = open("b.ck", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (p < 0 || write(p, buf, 100000) != 100000 || rename("b.ck", "c.ck"))
		return 6;
	int q = open("c.ck", O_RDWR);
	i0 = 0, o0 = 50;
	r = copy_file_range(p, &i0, q, &o0, 1000, 0);
	printf("copy_file_range overlapping: %zd %s\n", r, r < 0 ? strerror(errno) : "");
	close(fd); close(o); close(p); close(q);
	return 0;
}
C
	gcc -O2 -o cfr cfr.c || fail "the program did not compile"
	local aside
	for aside in off auto; do
		rm -rf plainrun ck/*
		mkdir -p plainrun
		plain ./cfr plainrun >want.txt || fail "the program without the library"
		ck CKPTCACHE_STEP_ASIDE=$aside -- ./cfr ck >got$aside.txt 2>err$aside.txt ||
			fail "$aside: the program with the library: $(status_text $?)$(last_error)"
		outputs_match want.txt got$aside.txt
		same plainrun/a.ck ck/a.ck "a.ck at its real path ($aside)"
		same plainrun/c.ck ck/c.ck "c.ck at its real path ($aside)"
	done
}
case_add robust/copy-range-unlinked copy_range_unlinked

# A program that closes descriptor numbers it does not know, just after
# its checkpoints: every number from 3 to 4095 (k=0), or, with two
# checkpoints still open, every number above them once its table was
# full (k=1). The library's own files (a publication under way) are not
# the program's: the checkpoints reach their real paths whole. (The loop
# closed the file a publication was writing: the checkpoint went to a
# rescue file, or was left empty at its real path with nothing said.)
close_loop_checkpoints() {
	cat >cl.c <<'C'
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
static char b[100000];
static void put(const char *n, int c)
{
	memset(b, c, sizeof b);
	int fd = open(n, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, b, sizeof b) != sizeof b || close(fd) != 0)
		_exit(3);
}
int main(int c, char **v)
{
	if (c != 3 || chdir(v[1]) != 0)
		return 2;
	for (int i = 0; i < 4; i++) {
		char n[16];
		snprintf(n, sizeof n, "c%d.ck", i);
		put(n, 'a' + i);
	}
	if (v[2][0] == '0') {
		for (int i = 3; i < 4096; i++)
			close(i);
		return 0;
	}
	memset(b, 'k', sizeof b);
	int a = open("a.ck", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int k = open("k.ck", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (a < 0 || k < 0 || write(a, b, 100000) != 100000 || write(k, b, 5000) != 5000)
		return 4;
	while (open("/dev/null", O_RDONLY) >= 0)
		;
	printf("full: %s\n", errno == EMFILE ? "EMFILE" : strerror(errno));
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 5;
	for (int i = (a > k ? a : k) + 1; i < (int)rl.rlim_cur; i++)
		close(i);
	return 0; /* a.ck and k.ck left open */
}
C
	gcc -O2 -o cl cl.c || fail "the program did not compile"
	local k f
	for k in 0 1; do
		rm -rf plainrun ck/*
		mkdir -p plainrun
		(ulimit -n 2048 && plain ./cl plainrun $k) >want$k.txt || fail "$k: the program without the library"
		(ulimit -n 2048 && ck -- ./cl ck $k) >got$k.txt 2>err$k.txt ||
			fail "$k: the program with the library: $(status_text $?)$(last_error)"
		outputs_match want$k.txt got$k.txt
		for f in plainrun/*.ck; do
			same "$f" "ck/${f#plainrun/}" "${f#plainrun/} at its real path ($k)"
		done
		! grep -q 'rescue' err$k.txt || fail "$k: a rescue file: $(cat err$k.txt)"
	done
}
case_add robust/close-loop-checkpoints close_loop_checkpoints

# A program that puts a file of its own at fixed numbers it believes free
# (dup2 onto 40 to 63 and 512 to 540) just after its checkpoints: where the
# library holds a file of its own at such a number the dup2 fails with
# EBUSY, said once; elsewhere the number is the program's file. Nothing of
# the cache's lands in the program's file, and the checkpoints reach their
# real paths whole. (The dup2 replaced the file a publication was writing:
# the checkpoint went to a rescue file, and the program's descriptor failed
# or the cache wrote into the program's file.)
dup2_onto_library() {
	cat >dh.c <<'C'
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static char b[100000];
int main(int c, char **v)
{
	if (c != 2 || chdir(v[1]) != 0)
		return 2;
	for (int i = 0; i < 4; i++) {
		char n[16];
		snprintf(n, sizeof n, "c%d.ck", i);
		memset(b, 'a' + i, sizeof b);
		int fd = open(n, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, b, sizeof b) != sizeof b || close(fd) != 0)
			return 3;
	}
	int src = open("../src.dat", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (src < 0 || write(src, "SRC", 3) != 3)
		return 4;
	int bad = 0, made[541] = { 0 };
	for (int n = 40; n <= 540; n++) {
		if (n == 64)
			n = 512;
		int r = dup2(src, n);
		made[n] = r == n;
		if (r < 0 && errno != EBUSY) {
			printf("dup2 onto %d: %s\n", n, strerror(errno));
			bad = 1;
		}
	}
	/* (the cache's publications go on meanwhile) */
	usleep(50000);
	for (int n = 40; n <= 540; n++) {
		char l[4] = { 0 };
		if (made[n] && (pread(n, l, 3, 0) != 3 || memcmp(l, "SRC", 3) != 0)) {
			printf("descriptor %d: not the program's file\n", n);
			bad = 1;
		}
	}
	return bad;
}
C
	gcc -O2 -o dh dh.c || fail "the program did not compile"
	local t i
	for t in 1 2 3 4 5; do
		rm -rf ck/* src.dat
		ck -- ./dh ck >got$t.txt 2>err$t.txt || fail "try $t: $(status_text $?): $(cat got$t.txt)$(last_error)"
		[ "$(cat src.dat)" = SRC ] || fail "try $t: the program's file holds $(stat -c %s src.dat) bytes, not its 3"
		for i in 0 1 2 3; do
			[ "$(stat -c %s ck/c$i.ck 2>/dev/null)" = 100000 ] && [ "$(tr -d "$(printf "\\x$(printf %x $((97 + i)))")" <ck/c$i.ck | wc -c)" = 0 ] ||
				fail "try $t: c$i.ck is not whole at its real path$(last_error)"
		done
		! grep -q 'rescue' err$t.txt || fail "try $t: a rescue file: $(cat err$t.txt)"
		[ "$(grep -c 'failed with EBUSY' err$t.txt)" -le 1 ] || fail "try $t: the EBUSY said more than once"
	done
}
case_add robust/dup2-onto-library dup2_onto_library

# Under an address-space limit (ulimit -v 800000), a program that wrote
# four checkpoints of 64 MiB allocates 200 MiB at once, as without the
# library (714 MiB there): the host tier takes a quarter of what is left
# once the library's threads have reserved theirs, and their stacks are
# 2 MiB. (The tier took a quarter before the threads began, whose stacks of
# 8 MiB and malloc arenas took the rest: 111 MiB could be had.)
as_limit_room() {
	under_sanitizer && note "the sanitizer runtime reserves more address space than the limit; the plain build checks it"
	cat >asl.c <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int c, char **v)
{
	if (c != 2 || chdir(v[1]) != 0)
		return 2;
	size_t n = 64 << 20;
	char *b = malloc(n);
	if (!b)
		return 3;
	memset(b, 7, n);
	for (int i = 0; i < 4; i++) {
		char name[20];
		snprintf(name, sizeof name, "big%d.ck", i);
		int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, b, n) != (ssize_t)n || close(fd) != 0)
			return 4;
	}
	void *p = malloc(200u << 20);
	printf("malloc of 200 MiB: %s\n", p ? "ok" : "failed");
	return 0;
}
C
	gcc -O2 -o asl asl.c || fail "the program did not compile"
	rm -rf plainrun ck/*
	mkdir -p plainrun
	(ulimit -v 800000 && plain ./asl plainrun) >want.txt || fail "the program without the library"
	# (the default size: a percentage of memory)
	(ulimit -v 800000 && ck CKPTCACHE_HOST_CACHE=10% -- ./asl ck) >got.txt 2>err.txt || fail "the program with the library$(last_error)"
	outputs_match want.txt got.txt
	local i
	for i in 0 1 2 3; do
		same plainrun/big$i.ck ck/big$i.ck "big$i.ck at its real path"
	done
}
case_add robust/as-limit-room as_limit_room

# A hinted checkpoint replaced by another program (a new file renamed over
# it) while the cache prefetches it: the program reads the new file, and
# the failed prefetch is not tried again and again. (The short read of the
# replaced file failed with EIO, and the prefetcher warned about it some
# ten times a second for as long as the program ran.)
prefetch_file_replaced() {
	rm -rf ck/* plainrun
	mkdir -p plainrun
	local d
	for d in ck plainrun; do
		head -c 100000 /dev/zero >$d/a.bin
		head -c 100000000 /dev/zero >$d/big.bin
	done
	printf '%s\n' "$T/ck/a.bin" "$T/ck/big.bin" >hints.txt
	local prog='
import os, subprocess, sys, time
d = sys.argv[1]
open(d + "/a.bin", "rb").read()
subprocess.run(["env", "-u", "LD_PRELOAD", "sh", "-c", "echo new > $0/n.tmp && mv $0/n.tmp $0/big.bin", d], check=True)
time.sleep(1.5)
print(len(open(d + "/big.bin", "rb").read()))
'
	plain "$PY" -c "$prog" plainrun >want.txt || fail "the program without the library"
	ck CKPTCACHE_HINTS="$T/hints.txt" CKPTCACHE_HOST_CACHE=256M -- "$PY" -c "$prog" ck >got.txt 2>err.txt ||
		fail "the program with the library$(last_error)"
	outputs_match want.txt got.txt
	same plainrun/big.bin ck/big.bin "big.bin at its real path"
	[ "$(grep -c 'could not prefetch' err.txt)" -le 1 ] ||
		fail "the failed prefetch was said $(grep -c 'could not prefetch' err.txt) times"
}
case_add robust/prefetch-file-replaced prefetch_file_replaced

# A signal handler of the program's that writes a checkpoint, called every
# 500 us while the program writes its first ones: a handler the cache's
# start deferred runs after it. (It ran inside the start, whose one-time
# section its own tagged open waited for: the program hung.)
handler_during_start() {
	cat >hs.c <<'C'
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
static char D[4096];
static volatile int cnt;
static void h(int s)
{
	(void)s;
	char p[4200];
	int e = errno;
	snprintf(p, sizeof p, "%s/sig%d.bin", D, cnt % 3);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, "x", 1) != 1)
			_exit(5);
		close(fd);
	}
	cnt++;
	errno = e;
}
int main(int c, char **v)
{
	if (c != 2)
		return 2;
	snprintf(D, sizeof D, "%s", v[1]);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, 0);
	struct itimerval it = { { 0, 500 }, { 0, 500 } };
	setitimer(ITIMER_REAL, &it, 0);
	size_t n = 1 << 20;
	char p[4200], *b = calloc(1, n);
	for (int k = 0; k < 20; k++) {
		snprintf(p, sizeof p, "%s/m%02d.bin", D, k);
		memset(b, 'a' + k, n);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, b, n) != (ssize_t)n || close(fd) != 0)
			return 3;
	}
	memset(&it, 0, sizeof it);
	setitimer(ITIMER_REAL, &it, 0);
	printf("done\n");
	return 0;
}
C
	gcc -O2 -o hs hs.c || fail "the program did not compile"
	rm -rf plainrun && mkdir -p plainrun
	plain ./hs plainrun >want.txt || fail "the program without the library"
	local i k
	for i in 1 2 3 4 5; do
		rm -rf ck/*
		CASE_TIMEOUT=30 ck -- ./hs "$T/ck" >got.txt 2>err.txt || fail "run $i: $(status_text $?)$(last_error)"
		outputs_match want.txt got.txt
		for k in $(seq -w 0 19); do
			same plainrun/m$k.bin ck/m$k.bin "m$k.bin at its real path (run $i)"
		done
	done
}
case_add robust/handler-during-start handler_during_start

# The descriptor of a cached checkpoint unlinked (another file made at its
# name since) or renamed over grows it by a hole larger than the cache sends
# to the real file (64 MiB: ftruncate, or a pwrite far past the end), and
# names it: the growth stays with the file it has, the file now at the
# name keeps its bytes, readlink of /proc/self/fd/N says "(deleted)" and
# realpath of it fails with ENOENT, as the kernel's. (The growth handed the
# version to "its real file", the descriptors reopened the name, and the
# writes landed in the other file.)
replaced_writer_grows() {
	cat >rg.c <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int c, char **v)
{
	char p[4096], q[4096], self[64], link[PATH_MAX];
	if (c != 3 || chdir(v[1]) != 0)
		return 2;
	const char *how = v[2];
	snprintf(p, sizeof p, "u-%s.bin", how);
	snprintf(q, sizeof q, "u-%s.tmp", how);
	long big = 100L << 20;
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0123456789", 10) != 10)
		return 3;
	if (how[0] == 'u') {
		int z;
		if (unlink(p) != 0 || (z = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644)) < 0 ||
		    write(z, "OTHER-FILE", 10) != 10 || fsync(z) != 0 || close(z) != 0)
			return 4;
	} else {
		int z = open(q, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (z < 0 || write(z, "NEW-VERSION", 11) != 11 || fsync(z) != 0 || close(z) != 0 || rename(q, p) != 0)
			return 5;
	}
	int r = how[1] == 'w' ? (pwrite(fd, "SCRATCH", 7, big - 7) == 7 ? 0 : -1) : ftruncate(fd, big);
	printf("grow %d %s\n", r, r ? strerror(errno) : "");
	printf("pwrite at 0: %zd\n", pwrite(fd, "XYZ", 3, 0));
	struct stat st;
	if (fstat(fd, &st) != 0)
		return 6;
	printf("size %lld links %ld\n", (long long)st.st_size, (long)st.st_nlink);
	char end[8] = { 0 };
	printf("end: %zd '%s'\n", pread(fd, end, 7, big - 7), how[1] == 'w' ? end : "");
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	ssize_t k = readlink(self, link, sizeof link - 1);
	link[k > 0 ? k : 0] = '\0';
	char *tail = strrchr(link, '/');
	printf("readlink: %s\n", tail ? tail + 1 : link);
	char *rp = realpath(self, NULL);
	printf("realpath: %s\n", rp ? "found" : strerror(errno));
	free(rp);
	return close(fd) ? 7 : 0;
}
C
	gcc -O2 -o rg rg.c || fail "the program did not compile"
	local how
	mkdir -p plainrun
	for how in ut uw rt rw; do
		plain ./rg plainrun $how >>want.txt || fail "$how: the program without the library"
		ck -- ./rg ck $how >>got.txt 2>err.txt || fail "$how: the program with the library: $(status_text $?)$(last_error)"
		same plainrun/u-$how.bin ck/u-$how.bin "u-$how.bin at its real path"
	done
	outputs_match want.txt got.txt
}
case_add robust/replaced-writer-grows replaced_writer_grows

# freopen(NULL, mode, stream) of a cached checkpoint unlinked or renamed
# over while its stream is open: the library cannot reopen a file that has
# no name, so the call fails (EBADF, the stream closed) with a warning that
# says so, and the file now at the name is left as it is. (It reopened the
# name, and "w" truncated the new version there.)
freopen_replaced() {
	cat >fr.c <<'C'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int c, char **v)
{
	if (c != 2 || chdir(v[1]) != 0)
		return 2;
	FILE *f = fopen("x.bin", "w");
	if (!f || fputs("OLD-STREAM", f) < 0 || fflush(f) != 0)
		return 3;
	FILE *n = fopen("x.tmp", "w");
	if (!n || fputs("NEW-VERSION", n) < 0 || fclose(n) != 0 || rename("x.tmp", "x.bin") != 0)
		return 4;
	FILE *g = freopen(NULL, "w", f);
	printf("freopen: %s\n", g ? "reopened" : strerror(errno));
	if (g)
		fclose(g);
	return 0;
}
C
	gcc -O2 -o fr fr.c || fail "the program did not compile"
	ck -- ./fr ck >got.txt 2>err.txt || fail "the program with the library: $(status_text $?)$(last_error)"
	[ "$(cat ck/x.bin)" = NEW-VERSION ] || fail "x.bin holds '$(cat ck/x.bin)', not the version renamed over it"
	grep -q 'freopen: Bad file descriptor' got.txt || fail "freopen: $(cat got.txt)"
	grep -q 'cannot reopen' err.txt || fail "no warning says why freopen failed: $(cat err.txt)"
}
case_add robust/freopen-replaced freopen_replaced
