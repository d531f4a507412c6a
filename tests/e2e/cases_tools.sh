# Unmodified tools on tagged files: cp, cat, dd with several block sizes,
# sha256sum, tar into and out of a tagged folder, and bash builtins (one
# process writing and reading a checkpoint). Every copy is compared byte for
# byte with its source.

# hints_naming PATH...: a hint file $T/hints.txt naming the paths, in order.
hints_naming() {
	printf '%s\n' "$@" >"$T/hints.txt"
}

DD_ENV=()

# A tree of odd-sized files, an empty one and a sub-folder.
make_tree() {
	mkdir -p "$1/sub/deeper"
	randfile "$1/f1.bin" 100003
	randfile "$1/sub/f2.bin" 5000017
	randfile "$1/sub/deeper/f3.bin" 4096
	: >"$1/sub/empty.bin"
	echo "a text file" >"$1/notes.txt"
	chmod 0640 "$1/f1.bin"
	touch -d '2020-02-02 02:02:02' "$1/sub/f2.bin"
}

tools_cp() {
	randfile src.bin 3000001
	phase write
	# cp copies with copy_file_range: the kernel copies into the real file
	# in one pass, which the cache could only slow down: the checkpoint is
	# handed over to its real file and nothing goes through the cache
	run_ok "cp src -> tagged" ck -- cp src.bin ck/a.bin
	stats_ok files==1 host.put_bytes==0
	same src.bin ck/a.bin "cp into a tagged path"
	phase copy
	# the cache holds nothing of a.bin and no hint names it: cp reads the
	# real file, as from an untagged one
	run_ok "cp tagged -> tagged" ck -- cp ck/a.bin ck/b.bin
	stats_ok files==1 objects.opened_for_read==1 objects.read_from_real_file==1 host.put_bytes==0
	same src.bin ck/b.bin "cp between tagged paths"
	phase copy-hinted
	# named by a hint, it is read through the cache (prefetching off: from
	# its real file, by the engine), and the copy is cached
	hints_naming "$T/ck/a.bin"
	run_ok "cp tagged -> tagged, hinted" ck CKPTCACHE_HINTS="$T/hints.txt" CKPTCACHE_PREFETCH=off -- \
		cp ck/a.bin ck/b.bin
	stats_ok files==1 objects.written==1 objects.opened_for_read==1 objects.read_from_real_file==0 \
		objects.consumed==1 host.put_bytes==3000001
	same src.bin ck/b.bin "cp between tagged paths, hinted"
	phase out
	run_ok "cp tagged -> untagged" ck -- cp ck/b.bin out.bin
	same src.bin out.bin "cp out of a tagged path"
	# the checkpoint is only in its real file: cp's copy_file_range runs in
	# the kernel on that file (one call), not 1 MiB at a time through memory;
	# a process that only reads it, no hint naming it, never starts the cache
	no_stats
	phase out-hinted
	run_ok "cp tagged -> untagged, hinted" ck CKPTCACHE_HINTS="$T/hints.txt" CKPTCACHE_PREFETCH=off -- \
		cp ck/a.bin out3.bin
	same src.bin out3.bin "cp out of a tagged path, hinted"
	stats_ok files==1 objects.opened_for_read==1 objects.consumed==1 home.read_ops==1 home.read_bytes==3000001
	run_ok "cat tagged -> pipe" ck -- sh -c 'cat ck/b.bin | cat >out2.bin'
	same src.bin out2.bin "cat of a tagged path through a pipe"
	make_tree tree
	phase tree
	run_ok "cp -r into a tagged folder" ck -- cp -r tree ck/tree
	diff -r tree ck/tree >/dev/null || fail "cp -r: $(diff -r tree ck/tree 2>&1 | head -1)"
	phase mv
	run_ok "mv within the tagged folder" ck -- mv ck/b.bin ck/c.bin
	absent ck/b.bin "mv: the old name"
	same src.bin ck/c.bin "mv between tagged names"
}

# cp -p / cp -a: the copy keeps its mode and times (futimens, fchmod on the
# new descriptor).
tools_cp_preserve() {
	make_tree tree
	ck -- cp -p tree/f1.bin ck/p.bin
	local rc=$?
	same tree/f1.bin ck/p.bin "cp -p into a tagged path"
	phase tree
	ck -- cp -a tree ck/tree
	local rca=$?
	diff -r tree ck/tree >/dev/null || fail "cp -a: $(diff -r tree ck/tree 2>&1 | head -1)"
	[ $rc -eq 0 ] || fail "cp -p into a tagged path: exit status $rc$(first_error '^cp: ')"
	[ $rca -eq 0 ] || fail "cp -a into a tagged folder: exit status $rca$(first_error '^cp: ')"
	[ "$(stat -c %a ck/p.bin)" = 640 ] || fail "cp -p: mode $(stat -c %a ck/p.bin), expected 640"
	[ "$(stat -c %Y ck/tree/sub/f2.bin)" = "$(stat -c %Y tree/sub/f2.bin)" ] ||
		fail "cp -a: the modification time was not kept"
}

# Walking an untagged tree (du, find, tar) with patterns set: no lookup of a
# directory's path (readlink of /proc/self/fd, getcwd) per entry, only a few
# where the walk starts (the tree has 40 folders and 280 entries), whether
# the patterns name files or a whole subtree.
walk_syscalls() { # LIB-OR-EMPTY PATTERN CMD...: the readlink/getcwd calls CMD makes
	local lib=$1 pat=$2
	shift 2
	timeout -k 5 "$CASE_TIMEOUT" strace -f -qq -c -o strace.out -e trace=readlink,readlinkat,getcwd \
		env ${lib:+LD_PRELOAD=$PRELOAD} CKPTCACHE_PATHS="$pat" CKPTCACHE_HOST_CACHE=32M "$@" >/dev/null ||
		fail "$* under strace: exit status $?"
	awk '$NF == "readlink" || $NF == "readlinkat" || $NF == "getcwd" { n += $4 } END { print n + 0 }' strace.out
}

tools_walk_untagged() {
	needs_strace
	local d f pat cmd
	for d in $(seq 1 40); do
		mkdir -p "tree/d$d/e"
		for f in 1 2 3; do echo "$d $f" >"tree/d$d/f$f.bin"; echo x >"tree/d$d/e/g$f.txt"; done
	done
	for pat in "$T/ck/**" "$T/ck/ckpt_*.bin"; do
		for cmd in "du -s tree" "find tree" "tar cf /dev/null tree" "du -s $T/tree"; do
			# shellcheck disable=SC2086
			walk_compare 8 "$pat" $cmd
		done
	done
}

# dd of a file into a tagged path (its first checkpoint, written straight
# to the real path, reads the node's record of the program): a process that
# never had a second thread places the library's descriptors above its own
# without reading /proc/self/status; the copy holds the bytes.
tools_dd_no_table_read() {
	needs_strace
	mkdir -p ck
	randfile src.bin 70000
	timeout -k 5 "$CASE_TIMEOUT" strace -f -qq -e trace=openat -o strace.out \
		env LD_PRELOAD="$PRELOAD" CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_HOST_CACHE=32M \
		dd if=src.bin of=ck/a.bin bs=64K status=none ||
		fail "dd into a tagged path under strace: exit status $?"
	cmp -s src.bin ck/a.bin || fail "dd into a tagged path: the copy differs"
	local n
	n=$(grep -c '"/proc/self/status"' strace.out)
	[ "$n" -eq 0 ] || fail "dd into a tagged path read /proc/self/status $n time(s)"
	grep -q 'ckptcache-aside' strace.out || fail "dd did not read the node's record (the case measures nothing)"
}

# tar, cp -r and cat over an untagged tree beside a tagged one (the opens
# of each name at its folder's descriptor, which skip the tagged look): the
# archive and the copy hold the bytes of every file, and a missing name, a
# folder opened as a file and a file opened as a folder fail as without the
# library, with the same messages.
tools_untagged_tree_bytes() {
	local d f i want got
	mkdir -p ck
	for d in $(seq 1 12); do
		mkdir -p "tree/d$d/e"
		for f in 1 2 3; do
			randfile "tree/d$d/f$f.bin" $((d * 1000 + f * 37))
			randfile "tree/d$d/e/g$f.dat" $((f * 4096 + d))
		done
	done
	ck -- tar -C "$T" -cf "$T/with.tar" tree || fail "tar of the untagged tree: exit status $?"
	mkdir -p out && tar -C out -xf "$T/with.tar" || fail "tar -x without the library"
	diff -r tree out/tree >/dev/null || fail "tar of the untagged tree: $(diff -r tree out/tree 2>&1 | head -1)"
	ck -- cp -r tree copy || fail "cp -r of the untagged tree: exit status $?"
	diff -r tree copy >/dev/null || fail "cp -r of the untagged tree: $(diff -r tree copy 2>&1 | head -1)"
	for i in "cat tree/d1/missing.bin" "cat tree/d1/e" "ls tree/d1/f1.bin/" "tar -C $T -cf $T/bad.tar tree/d2/none"; do
		# shellcheck disable=SC2086
		want=$(cd "$T" && $i 2>&1 >/dev/null; echo "status $?")
		# shellcheck disable=SC2086
		got=$(cd "$T" && ck -- $i 2>&1 >/dev/null | grep -v '^ckptcache'; echo "status ${PIPESTATUS[0]}")
		[ "$got" = "$want" ] || fail "$i: with the library '$got', without '$want'"
	done
	# the same by path under a pattern by ending, which none of these names
	# has (their open skips the look at the path, and fails as the kernel
	# says)
	for i in "cat $T/tree/d1/missing.dat" "cat $T/tree/d1/e" "cat $T/tree/d1/e/g1.dat/"; do
		# shellcheck disable=SC2086
		want=$($i 2>&1 >/dev/null; echo "status $?")
		# shellcheck disable=SC2086
		got=$(ck CKPTCACHE_PATHS="$T/tree/*/*.bin" -- $i 2>&1 >/dev/null | grep -v '^ckptcache'; echo "status ${PIPESTATUS[0]}")
		[ "$got" = "$want" ] || fail "$i: with the library '$got', without '$want'"
	done
	got=$(ck CKPTCACHE_PATHS="$T/tree/*/*.bin" -- cat "$T/tree/d1/e/g1.dat" | od -An -tx1 | tr -d ' \n')
	[ "$got" = "$(od -An -tx1 <"tree/d1/e/g1.dat" | tr -d ' \n')" ] || fail "cat of an untagged name by path: other bytes"
}

# walk_compare SLACK PATTERN CMD...: CMD makes at most SLACK path look-ups
# (readlink, getcwd) more with the library than without it.
walk_compare() {
	local slack=$1 pat=$2 plain lib
	shift 2
	plain=$(walk_syscalls "" "$pat" "$@")
	lib=$(walk_syscalls lib "$pat" "$@")
	echo "$*, CKPTCACHE_PATHS=$pat: $plain lookups without the library, $lib with it"
	[ "$lib" -le $((plain + slack)) ] ||
		fail "$* with CKPTCACHE_PATHS=$pat: $lib path lookups (readlink/getcwd), $plain without the library"
}

# find and du over a tree the patterns tag, made by an earlier run: each
# folder they open is opened as without the library (no look at its path),
# and a folder open of a name whose checkpoint this process has just
# written answers ENOTDIR, as without it.
tools_walk_tagged() {
	needs_strace
	local cmd
	step_tree ck/step 40 3
	for cmd in "find ck -type f" "du -s ck" "find $T/ck -type d"; do
		# shellcheck disable=SC2086
		walk_compare 4 "$T/ck/**" $cmd
	done
	cat >dirs.py <<'PYEOF'
import errno, os, sys
d = sys.argv[1]
with open(f"{d}/fresh.bin", "wb") as f:
    f.write(b"x" * 1000)
for name in ("fresh.bin", "missing.bin", "step1"):
    try:
        fd = os.open(f"{d}/{name}", os.O_RDONLY | os.O_DIRECTORY)
        print(name, "opened", sorted(os.listdir(fd)))
        os.close(fd)
    except OSError as e:
        print(name, errno.errorcode[e.errno])
PYEOF
	mkdir -p ref/step1 && cp ck/step1/* ref/step1/
	plain python3 dirs.py "$T/ref" >want.txt || fail "dirs.py without the library: exit status $?"
	run_ok "folder opens of tagged names" ck -- python3 dirs.py "$T/ck" >got.txt
	grep -v '^ckptcache' got.txt >got2.txt
	diff want.txt got2.txt >&2 || fail "folder opens of tagged names answer otherwise than without the library"
	same ck/fresh.bin ref/fresh.bin "the checkpoint written beside them"
}

# slow_holder_start [US]: another process under the library holds
# ck/hold/c.bin (its publication's rename slowed by US, 4 s unless
# given) when it returns; $holder is the job that runs it, $holder_pid
# the process that holds. slow_holder_end WHAT: the holder ends, its
# checkpoint whole at its real path; a note where it published before WHAT
# ended.
slow_holder_start() {
	mkdir -p ck/hold
	randfile held.ref 100003
	rm -f held.txt
	SLOW_US=${1:-4000000} ck SLOWFS_OPS=rename -- "$PY" -c '
import os, sys
data = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    f.write(data)
open(sys.argv[3] + ".new", "w").write(str(os.getpid()))
os.rename(sys.argv[3] + ".new", sys.argv[3])
' held.ref ck/hold/c.bin held.txt >holder.log 2>&1 &
	holder=$!
	local i
	for ((i = 0; i < 100; i++)); do
		[ -s held.txt ] && break
		sleep 0.05
	done
	[ -s held.txt ] || fail "the holder did not write its checkpoint in 5 s"
	holder_pid=$(cat held.txt)
}

slow_holder_end() {
	! cmp -s held.ref ck/hold/c.bin ||
		note "the holder published before $1 ended (a loaded machine): the counts above are taken beside nobody"
	wait "$holder" || fail "the holder: exit status $? ($(tr '\n' ' ' <holder.log))"
	same held.ref ck/hold/c.bin "the checkpoint held during $1, at its real path"
}

# The same walkers over a tagged tree while another process holds a
# checkpoint its real file lacks (its publication slowed by 4 s): a walker
# that holds nothing looks up each folder's path once, not each name's
# (each readlink of /proc/self/fd/N made du and tar 2-2.5x slower then);
# the checkpoint held reaches its real path.
tools_walk_tagged_beside_holder() {
	needs_strace
	local cmd plain lib dirs=20
	step_tree ck/tree/step $dirs 20
	slow_holder_start
	for cmd in "du -s ck/tree" "find $T/ck/tree -type f" "tar cf /dev/null ck/tree"; do
		# shellcheck disable=SC2086
		plain=$(walk_syscalls "" "$T/ck/**" $cmd)
		# shellcheck disable=SC2086
		lib=$(walk_syscalls lib "$T/ck/**" $cmd)
		echo "$cmd beside a holder: $plain path lookups without the library, $lib with it"
		[ "$lib" -le $((plain + 3 * dirs)) ] ||
			fail "$cmd over 400 tagged names beside a holder: $lib path lookups (readlink/getcwd), $plain without the library"
	done
	slow_holder_end "the walks"
}

# Listings of folders beside a process that holds a checkpoint elsewhere
# (its publication slowed by 4 s): du, ls -l and Python's listdir and
# scandir of 20 tagged folders ask no other process, since none holds
# anything in them (each listing asked every holder of the node, which
# answered only when its own work let it: du over a tagged tree beside a
# job that wrote checkpoints waited 1-3 ms per folder, and ran 0.91x).
# A listing of the folder the holder holds its checkpoint in asks it, and
# shows the checkpoint whole.
tools_list_beside_holder() {
	needs_strace
	local d n
	step_tree ck/tree/step 20 5
	slow_holder_start
	n=$(node_asks "$T" du -s ck/tree)
	echo "du over 20 tagged folders beside a holder of another folder: $n requests to other processes"
	[ "$n" -eq 0 ] || fail "du over 20 tagged folders asked other processes $n times (none holds anything in them)"
	n=$(node_asks "$T" ls -l ck/tree/step1 ck/tree/step2 ck/tree/step3)
	[ "$n" -eq 0 ] || fail "ls -l of 3 tagged folders asked other processes $n times (none holds anything in them)"
	n=$(node_asks "$T" "$PY" -c '
import os, sys
n = 0
for d in range(1, 21):
    n += len(os.listdir(f"ck/tree/step{d}")) + sum(1 for _ in os.scandir(f"ck/tree/step{d}"))
print(n)
')
	echo "Python's listdir and scandir of 20 tagged folders beside a holder: $n requests"
	[ "$n" -eq 0 ] || fail "Python's listdir and scandir of 20 tagged folders asked other processes $n times (none holds anything in them)"
	! cmp -s held.ref ck/hold/c.bin ||
		note "the holder published before the listings ended (a loaded machine): the counts above are taken beside nobody"
	node_asks "$T" "$PY" -c 'import os; print(sorted(os.listdir("ck/hold")))' >/dev/null
	n=$(node_asks_of "$holder_pid")
	echo "a listing of the holder's folder: $n requests to it"
	[ "$n" -ge 1 ] ||
		fail "a listing of the folder the holder holds a checkpoint in did not ask it ($n requests)"
	LD_PRELOAD="$PRELOAD" CKPTCACHE_PATHS="$T/ck/**" "$PY" -c '
import os, sys
got = sorted((e.name, e.stat().st_size) for e in os.scandir("ck/hold"))
sys.exit(0 if got == [("c.bin", 100003)] else "listing of the holder'"'"'s folder: %r" % (got,))
' || fail "the folder of the held checkpoint, listed beside its holder"
	wait "$holder" || fail "the holder: exit status $? ($(tr '\n' ' ' <holder.log))"
	same held.ref ck/hold/c.bin "the checkpoint held during the listings, at its real path"
	for d in 1 20; do
		[ "$(cat ck/tree/step$d/r5.bin)" = "$d 5" ] || fail "ck/tree/step$d/r5.bin changed"
	done
}

# A walker keeps the path of a folder descriptor while another process
# holds a checkpoint; the folder is then renamed (mv, under the library)
# and another process writes a new checkpoint into it by its new name: the
# walker's stat and open of that name at its old descriptor find it, as
# without the library (the kept path went with the rename).
tools_walk_folder_renamed() {
	mkdir -p ck/a ck/other
	echo x >ck/a/x.bin
	randfile new.ref 100003
	rm -f h1.txt h2.txt m.txt go.txt
	cat >hold.py <<'PYEOF'
import sys
data = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    f.write(data)
open(sys.argv[3], "w").write("held")
PYEOF
	cat >walker.py <<'PYEOF'
import os, sys, time
d, ready, go, ref = sys.argv[1:5]
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.stat("x.bin", dir_fd=fd)
open(ready, "w").write("ready")
for _ in range(400):
    if os.path.exists(go):
        break
    time.sleep(0.025)
st = os.stat("new.bin", dir_fd=fd)
with os.fdopen(os.open("new.bin", os.O_RDONLY, dir_fd=fd), "rb") as f:
    data = f.read()
print("new.bin", st.st_size, data == open(ref, "rb").read())
PYEOF
	local h1 m h2 i
	SLOW_US=3000000 SLOW_MATCH="$T/ck/other" ck SLOWFS_OPS=rename -- "$PY" hold.py new.ref ck/other/h1.bin h1.txt \
		>h1.log 2>&1 &
	h1=$!
	for ((i = 0; i < 100; i++)); do [ -s h1.txt ] && break; sleep 0.05; done
	ck -- "$PY" walker.py "$T/ck/a" m.txt go.txt new.ref >walker.out 2>&1 &
	m=$!
	for ((i = 0; i < 100; i++)); do [ -s m.txt ] && break; sleep 0.05; done
	[ -s m.txt ] || fail "the walker did not start in 5 s: $(tr '\n' ' ' <walker.out)"
	run_ok "mv of the walker's folder" ck -- mv ck/a ck/b
	SLOW_US=3000000 SLOW_MATCH="$T/ck/b" ck SLOWFS_OPS=rename -- "$PY" hold.py new.ref ck/b/new.bin h2.txt \
		>h2.log 2>&1 &
	h2=$!
	for ((i = 0; i < 100; i++)); do [ -s h2.txt ] && break; sleep 0.05; done
	[ -s h2.txt ] || fail "the second holder did not write in 5 s: $(tr '\n' ' ' <h2.log)"
	: >go.txt
	wait $m || fail "the walker: exit status $? ($(tr '\n' ' ' <walker.out))"
	wait $h1 || fail "the first holder: exit status $?"
	wait $h2 || fail "the second holder: exit status $?"
	[ "$(grep -v '^ckptcache' walker.out)" = "new.bin 100003 True" ] ||
		fail "the walker's stat and read of the new name at its descriptor: '$(tr '\n' ' ' <walker.out)' (want 'new.bin 100003 True')"
	same new.ref ck/b/new.bin "the new checkpoint at its real path"
	same new.ref ck/other/h1.bin "the first holder's checkpoint at its real path"
}

# node_asks DIR CMD...: the requests that CMD, run with the library in
# the folder DIR, sends to the node's other processes under the library
# (each names a path; the one byte that wakes its own serving thread at
# its end is none); node_asks_of PID: those of the last CMD sent to PID.
node_asks() {
	local dir=$1
	shift
	(cd "$dir" && timeout -k 5 "$CASE_TIMEOUT" strace -f -qq -s 512 -e trace=sendto,sendmsg -o "$T/asks.out" \
		env LD_PRELOAD="$PRELOAD" CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_HOST_CACHE=32M "$@" >/dev/null) ||
		fail "$* under strace: exit status $?"
	grep 'ckptcache-nodes-' asks.out | grep -c -v '"\\0", 1,'
}

node_asks_of() {
	grep -E "ckptcache-nodes-[0-9]+-$1\"" asks.out | grep -c -v '"\\0", 1,'
}

# A file's mode or owner set while another process holds a checkpoint
# (chmod of each file, Python's copy2, tar -x, which sets both for every
# file it makes): only a folder's guards what lies under it, so no other
# process is asked to publish first (each was asked in turn, for each
# file, and tar -x into a folder of 5 files waited 4-8 s for a holder busy
# with its own work). Nor is one asked, and waited for, where a program
# lists a folder in which no file can be tagged (Python lists its working
# folder as it starts: one above the checkpoints had every holder publish
# all it held below it first). A folder's mode still asks the holder; the
# modes and bytes are as without the library.
tools_file_modes_beside_holder() {
	needs_strace
	local f n
	mkdir -p ck/tree plain
	for f in $(seq 1 30); do
		randfile "ck/tree/r$f.bin" $((f * 1009))
		cp "ck/tree/r$f.bin" "plain/r$f.bin"
	done
	tar -C ck -cf in.tar tree
	slow_holder_start
	n=$(node_asks / chmod 600 "$T"/ck/tree/r*.bin)
	echo "chmod of 30 files beside a holder: $n requests to other processes"
	[ "$n" -eq 0 ] || fail "chmod of 30 tagged files beside a holder asked other processes $n times (0 without the library)"
	n=$(node_asks "$T" "$PY" -c '
import os, shutil, sys
d = sys.argv[1]
os.makedirs(d + "/copy")
for i in range(1, 31):
    shutil.copy2(f"{d}/tree/r{i}.bin", f"{d}/copy/r{i}.bin")
    os.chmod(f"{d}/copy/r{i}.bin", 0o640)
print(len(os.listdir(".")), len(os.listdir("/")))
' "$T/ck")
	echo "Python copy2 and chmod of 30 files beside a holder, listing its folder and /: $n requests"
	[ "$n" -eq 0 ] || fail "Python's copy2 and chmod of 30 tagged files, and listings of $T and /, beside a holder asked other processes $n times"
	# (the folder's mode asks every holder of the node: the holder's
	# requests are counted)
	node_asks "$T" tar -C ck -xf in.tar --transform s/^tree/untar/ >/dev/null
	n=$(node_asks_of "$holder_pid")
	echo "tar -x of 30 files and their folder beside a holder: $n requests to it"
	[ "$n" -le 1 ] || fail "tar -x of 30 tagged files and their folder beside a holder asked it $n times (once: the folder's mode)"
	node_asks / chmod 750 "$T/ck/tree" >/dev/null
	n=$(node_asks_of "$holder_pid")
	echo "chmod of their folder beside a holder: $n requests to it"
	cmp -s held.ref ck/hold/c.bin || [ "$n" -ge 1 ] ||
		fail "chmod of a folder beside a holder did not ask the holder to publish what it owes there first"
	slow_holder_end "the mode changes"
	for f in $(seq 1 30); do
		same "plain/r$f.bin" "ck/tree/r$f.bin" "r$f.bin after its chmod"
		same "plain/r$f.bin" "ck/copy/r$f.bin" "r$f.bin copied by Python"
		same "plain/r$f.bin" "ck/untar/r$f.bin" "r$f.bin extracted by tar"
	done
	[ "$(stat -c %a ck/tree/r7.bin ck/copy/r7.bin ck/tree | tr '\n' ' ')" = "600 640 750 " ] ||
		fail "modes after chmod: $(stat -c '%n %a' ck/tree/r7.bin ck/copy/r7.bin ck/tree | tr '\n' ' ')"
}

read_lookups() {
	local lib=$1
	timeout -k 5 "$CASE_TIMEOUT" strace -f -qq -c -o strace.out \
		-e trace=stat,lstat,newfstatat,statx,access,faccessat,faccessat2 \
		env ${lib:+LD_PRELOAD=$PRELOAD} CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HOST_CACHE=32M \
		cat ck/r*.bin >out.bin || fail "cat under strace: exit status $?"
	awk '$NF ~ /stat|access/ { n += $4 } END { print n + 0 }' strace.out
}

tools_read_looks_once() {
	needs_strace
	local i plain lib
	for i in $(seq 10 49); do randfile "ck/r$i.bin" $((i * 977)); done
	cat ck/r*.bin >expect.bin
	plain=$(read_lookups "")
	lib=$(read_lookups lib)
	same expect.bin out.bin "cat of 40 tagged files of an earlier run"
	echo "cat of 40 tagged files: $plain look-ups without the library, $lib with it"
	[ "$lib" -le $((plain + 8)) ] ||
		fail "cat of 40 tagged files the cache does not hold: $lib stat/access calls, $plain without the library"
}

# Opens for reading that fail, or that do not read a regular file, answer
# as without the library, hinted or not: a missing name, a folder, a FIFO,
# O_CREAT of a new name, O_CREAT|O_EXCL of an existing one.
tools_read_open_errors() {
	cat >ro.py <<'PYEOF'
import errno, os, sys
d = sys.argv[1]
def tryopen(name, flags):
    try:
        fd = os.open(f"{d}/{name}", flags, 0o644)
    except OSError as e:
        return f"{name}: open {errno.errorcode[e.errno]}"
    try:
        r = f"{name}: read {os.read(fd, 100)!r}"
    except OSError as e:
        r = f"{name}: read {errno.errorcode[e.errno]}"
    os.close(fd)
    return r
print(tryopen("missing.bin", os.O_RDONLY))
print(tryopen("dir.bin", os.O_RDONLY))
print(tryopen("fifo.bin", os.O_RDONLY | os.O_NONBLOCK))
print(tryopen("made.bin", os.O_RDONLY | os.O_CREAT))
print(tryopen("old.bin", os.O_RDONLY | os.O_CREAT | os.O_EXCL))
print(tryopen("old.bin", os.O_RDONLY))
PYEOF
	local dir
	for dir in ref ck; do
		mkdir -p "$dir/dir.bin"
		mkfifo "$dir/fifo.bin"
		printf 'written by an earlier run\n' >"$dir/old.bin"
	done
	plain "$PY" ro.py "$T/ref" >expect.txt || fail "the program failed without the library"
	hints_naming "$T/ck/missing.bin" "$T/ck/dir.bin" "$T/ck/fifo.bin" "$T/ck/made.bin" "$T/ck/old.bin"
	local hints
	for hints in "" "$T/hints.txt"; do
		rm -f ck/made.bin
		ck CKPTCACHE_HINTS="$hints" -- "$PY" ro.py "$T/ck" >got.txt || fail "the program failed$(last_error)"
		cmp -s expect.txt got.txt ||
			fail "hints '$hints': without the library $(tr '\n' ';' <expect.txt) with it $(tr '\n' ';' <got.txt)"
		[ -f ck/made.bin ] || fail "hints '$hints': O_RDONLY|O_CREAT did not make ck/made.bin"
		same ref/old.bin ck/old.bin "ck/old.bin"
	done
}

tools_cat() {
	randfile a.src 1048577
	randfile b.src 77
	phase write
	run_ok "cp" ck -- cp a.src ck/a.bin
	run_ok "cp" ck -- cp b.src ck/b.bin
	phase cat
	ck -- cat ck/a.bin ck/b.bin ck/a.bin >out.bin || fail "cat of tagged files failed$(last_error)"
	cat a.src b.src a.src >expect.bin
	same expect.bin out.bin "cat of three tagged files"
	# a process that only reads checkpoints the cache holds nothing of, no
	# hint naming them, never starts the cache: no statistics
	no_stats
	phase cat-hinted
	hints_naming "$T/ck/b.bin" "$T/ck/a.bin"
	ck CKPTCACHE_HINTS="$T/hints.txt" CKPTCACHE_PREFETCH=off -- cat ck/a.bin ck/b.bin ck/a.bin >out3.bin ||
		fail "cat of hinted tagged files failed$(last_error)"
	same expect.bin out3.bin "cat of three hinted tagged files"
	stats_ok files==1 objects.opened_for_read==3 objects.read_from_real_file==0 objects.consumed==2
	ck -- cat <ck/a.bin >out2.bin || fail "cat <tagged failed"
	same a.src out2.bin "cat < tagged (opened by the shell, without the library)"
}

# dd_ok WHAT ARGS...: dd under the library (and the variables of the array
# DD_ENV, if any) must succeed. Under a sanitizer
# runtime, dd's own aligned_alloc of a size that is not a multiple of the
# alignment is refused by the runtime before the library is involved: that
# is a note, not a failure.
dd_ok() {
	local what=$1 rc
	shift
	ck "${DD_ENV[@]}" -- dd "$@"
	rc=$?
	[ $rc -eq 0 ] && return 0
	grep -q 'invalid-aligned-alloc-alignment' "$T/.log" &&
		note "dd cannot run under the sanitizer runtime with these block sizes (its own aligned_alloc is refused)"
	fail "$what: $(status_text $rc)$(last_error)"
}

# dd BS: write a tagged file, copy it tagged to tagged in one process, read
# it out, with skip/count and an in-place conv=notrunc update. dd reopens
# its output file as its standard output, where the C library's stdio
# could write behind the library's back: that file is used directly (not
# cached); its input, reopened as standard input, is served by the cache.
tools_dd() {
	local bs=$1 size=3000017
	[ "$bs" = 1 ] && size=20011
	randfile src.bin $size
	phase write
	dd_ok "dd into a tagged path" if=src.bin of=ck/x.bin bs="$bs" status=none
	stats_ok files==1 objects.written==0 host.put_bytes==0
	same src.bin ck/x.bin "dd bs=$bs into a tagged path"
	phase copy
	dd_ok "dd tagged -> tagged" if=ck/x.bin of=ck/y.bin bs="$bs" status=none
	stats_ok files==1 objects.written==0 objects.opened_for_read==1 objects.read_from_real_file==1 \
		host.put_bytes==0
	same src.bin ck/y.bin "dd bs=$bs between tagged paths"
	phase copy-hinted
	# named by a hint: every dd-sized read goes through the engine
	hints_naming "$T/ck/x.bin"
	DD_ENV=(CKPTCACHE_HINTS="$T/hints.txt" CKPTCACHE_PREFETCH=off)
	dd_ok "dd tagged -> tagged, hinted" if=ck/x.bin of=ck/z.bin bs="$bs" status=none
	DD_ENV=()
	stats_ok files==1 objects.written==0 objects.opened_for_read==1 objects.read_from_real_file==0 \
		objects.consumed==1 host.put_bytes==0 home.read_bytes==$size
	same src.bin ck/z.bin "dd bs=$bs between tagged paths, hinted"
	phase out
	dd_ok "dd tagged -> untagged" if=ck/y.bin of=out.bin bs="$bs" status=none
	same src.bin out.bin "dd bs=$bs out of a tagged path"
	dd_ok "dd skip/count" if=ck/y.bin of=part.bin bs="$bs" skip=3 count=5 status=none
	dd if=src.bin of=part.ref bs="$bs" skip=3 count=5 status=none
	same part.ref part.bin "dd bs=$bs skip=3 count=5 of a tagged path"
	cp src.bin upd.ref
	dd if=part.ref of=upd.ref bs="$bs" seek=2 conv=notrunc status=none
	dd_ok "dd conv=notrunc" if=part.ref of=ck/y.bin bs="$bs" seek=2 conv=notrunc status=none
	same upd.ref ck/y.bin "dd bs=$bs seek=2 conv=notrunc into a tagged file"
	phase check
	dd_ok "dd after the update" if=ck/y.bin of=out2.bin bs="$bs" status=none
	same upd.ref out2.bin "dd bs=$bs reading the updated tagged file"
}

tools_sha256sum() {
	local i sums
	for i in 1 2 3 4; do
		randfile "s$i.src" $((i * 700001))
	done
	phase write
	for i in 1 2 3 4; do
		run_ok "cp" ck -- cp "s$i.src" "ck/s$i.bin"
	done
	phase sum
	sums=$(ck -- sha256sum ck/s1.bin ck/s2.bin ck/s3.bin ck/s4.bin) || fail "sha256sum of tagged files failed"
	[ "$(awk '{print $1}' <<<"$sums")" = "$(sha256sum s1.src s2.src s3.src s4.src | awk '{print $1}')" ] ||
		fail "sha256sum of tagged files differs from the sources"
	no_stats # only reads: the cache never started
	sha256sum s1.src s2.src s3.src s4.src | sed 's/\(s[0-9]\)\.src$/ck\/\1.bin/' >sums.txt
	run_ok "sha256sum -c" ck -- sha256sum --quiet -c sums.txt
}

tools_tar_into() {
	make_tree tree
	tar -C tree -cf in.tar .
	mkdir -p ck/tree
	ck -- tar -C ck/tree -xf in.tar
	local rc=$?
	diff -r tree ck/tree >/dev/null || fail "tar -x into a tagged folder: $(diff -r tree ck/tree 2>&1 | head -1)"
	[ $rc -eq 0 ] || fail "tar -x into a tagged folder: exit status $rc, bytes right$(first_error '^tar: ')"
	stats_ok objects.written==5
	[ "$(stat -c %a ck/tree/f1.bin)" = 640 ] || fail "tar -x: mode $(stat -c %a ck/tree/f1.bin), expected 640"
	[ "$(stat -c %Y ck/tree/sub/f2.bin)" = "$(stat -c %Y tree/sub/f2.bin)" ] ||
		fail "tar -x: the modification time was not restored"
}

# tar -x, cp -a and rsync -a set each folder's times after writing the
# files in it; the cache publishes those files later, and each publication
# (a link or a rename into the folder) would set the folder's modification
# time to the time of publication. The folders keep the times the program
# gave them, as without the library, and the bytes are the same.
tools_tar_folder_times() {
	local i d
	for d in a a/b a/b/c e; do
		mkdir -p "src/$d"
		for i in 1 2 3 4 5 6; do
			randfile "src/$d/f$i.bin" $((i * 40009))
		done
	done
	touch -d '2001-01-01 01:01:01' src/a/b/c src/a/b src/e
	touch -d '2002-02-02 02:02:02' src/a src
	tar -C src -cf in.tar .
	mkdir -p plain ck/tree
	tar -C plain -xf in.tar || fail "tar -x without the library"
	ck -- tar -C ck/tree -xf in.tar || fail "tar -x into a tagged folder: exit status $?$(first_error '^tar: ')"
	diff -r plain ck/tree >/dev/null || fail "tar -x into a tagged folder: $(diff -r plain ck/tree 2>&1 | head -1)"
	local want got
	want=$(cd plain && find . -type d -printf '%p %TY-%Tm-%Td %TH:%TM\n' | sort)
	got=$(cd ck/tree && find . -type d -printf '%p %TY-%Tm-%Td %TH:%TM\n' | sort)
	[ "$got" = "$want" ] ||
		fail "tar -x into a tagged folder: folder times differ: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -4 | tr '\n' ' ')"
	# (most of the files went through the cache: the first of a process
	# and a few others go straight to their real paths)
	stats_ok 'objects.written>=18'
}

# The same from Python, in one process: times set after the files are
# written are kept (os.utime); a folder the program changes afterwards (a
# file written there, a folder made there, a rewrite after that, a new
# folder at the same path) has the time of that change, as without the
# library, not the time set before it.
tools_py_folder_times() {
	local prog='
import os, sys, time
d = sys.argv[1]
T = (978310861, 978310861)
def put(path, n):
    name = os.path.relpath(path, d).encode()
    with open(path, "wb") as f:
        f.write((name * (n // len(name) + 1))[:n])
for sub, n in (("kept", 5), ("many", 60), ("changed", 5), ("made", 5)):
    os.makedirs(os.path.join(d, sub))
    for i in range(n):
        put(os.path.join(d, sub, "f%d.bin" % i), 5000 + 9000 * (i % 7))
    os.utime(os.path.join(d, sub), T)
put(os.path.join(d, "changed", "late.bin"), 99)
os.mkdir(os.path.join(d, "made", "sub"))
os.makedirs(os.path.join(d, "stale"))
put(os.path.join(d, "stale", "f.bin"), 70000)
os.utime(os.path.join(d, "stale"), T)
time.sleep(0.3)
os.mkdir(os.path.join(d, "stale", "sub"))
time.sleep(0.3)
fd = os.open(os.path.join(d, "stale", "f.bin"), os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"rewritten")
os.close(fd)
os.makedirs(os.path.join(d, "again"))
put(os.path.join(d, "again", "f.bin"), 60000)
os.utime(os.path.join(d, "again"), T)
time.sleep(0.3)
os.rename(os.path.join(d, "again"), os.path.join(d, "again.old"))
os.mkdir(os.path.join(d, "again"))
put(os.path.join(d, "moved.bin"), 80000)
os.rename(os.path.join(d, "moved.bin"), os.path.join(d, "again", "moved.bin"))
# the errors of the calls, as without the library
try:
    os.utime(os.path.join(d, "missing"), T)
    sys.exit("utime of a missing folder succeeded")
except FileNotFoundError:
    pass
fd = os.open(os.path.join(d, "kept"), os.O_RDONLY)
os.close(fd)
try:
    os.utime(fd, T)
    sys.exit("utime of a closed descriptor succeeded")
except OSError as e:
    if e.errno != 9:
        raise
'
	mkdir -p plain ck/tree
	python3 -c "$prog" plain || fail "without the library"
	if [ -n "${NOTMPFILE:-}" ]; then
		# a file system without anonymous files (NFS, many parallel
		# ones): the library's named temporary files are made in the
		# folders whose times the program sets
		SLOW_US=0 SLOW_MATCH=ck/tree ck SLOWFS_NOTMPFILE=1 -- python3 -c "$prog" ck/tree ||
			fail "with the library: exit status $?"
	else
		ck -- python3 -c "$prog" ck/tree || fail "with the library: exit status $?"
	fi
	local y d
	(cd plain && find . -type f -exec sha256sum {} + | sort) >plain.sum
	(cd ck/tree && find . -type f -exec sha256sum {} + | sort) >ck.sum
	cmp -s plain.sum ck.sum || fail "not the same files and bytes: $(diff plain.sum ck.sum | head -2 | tr '\n' ' ')"
	for d in kept many; do
		y=$(stat -c %y ck/tree/$d)
		[ "${y:0:4}" = 2001 ] || fail "$d: a folder whose times were set after its files were written: modified $y, expected 2001 (as without the library: $(stat -c %y plain/$d))"
	done
	for d in changed made stale again; do
		[ "$(stat -c %y plain/$d | cut -c1-4)" != 2001 ] || fail "without the library, $d kept 2001"
		y=$(stat -c %y ck/tree/$d)
		[ "${y:0:4}" != 2001 ] || fail "$d: a folder changed after its times were set kept them (without the library: $(stat -c %y plain/$d))"
	done
	stats_ok 'objects.written>=10'
}

# A folder whose times the program set, then changed by a call of its own
# (a folder, a link or a hard link made in it, a name removed or renamed
# into or out of it) while the publications of the files written in it
# just before are under way, on two lanes: the folder has the time of that
# change, as without the library, not the one set (it was put back over
# the change now and then: a publication that began before it, or two at
# once, did not tell it from theirs).
tools_py_folder_changes() {
	local prog='
import os, sys
d = sys.argv[1]
T = (978310861, 978310861)
for r in range(3):
    for case in ("mkdir", "symlink", "unlink", "rename-in", "rename-out", "rmdir", "link"):
        sub = os.path.join(d, "r%d-%s" % (r, case))
        os.makedirs(sub)
        os.mkdir(os.path.join(sub, "gone"))
        side = os.path.join(d, "side-r%d-%s" % (r, case))
        with open(side, "wb") as f:
            f.write(b"s" * 100)
        for i in range(120):
            with open(os.path.join(sub, "f%d.bin" % i), "wb") as f:
                f.write(bytes([i % 251]) * (40000 + i))
        os.utime(sub, T)
        if case == "mkdir":
            os.mkdir(os.path.join(sub, "new"))
        elif case == "symlink":
            os.symlink("f0.bin", os.path.join(sub, "l"))
        elif case == "unlink":
            os.unlink(os.path.join(sub, "f3.bin"))
        elif case == "rename-in":
            os.rename(side, os.path.join(sub, "side"))
        elif case == "rename-out":
            os.rename(os.path.join(sub, "f5.bin"), side + ".out")
        elif case == "rmdir":
            os.rmdir(os.path.join(sub, "gone"))
        else:
            os.link(side, os.path.join(sub, "hard"))
'
	mkdir -p plain ck/tree
	python3 -c "$prog" plain || fail "without the library"
	ck -- python3 -c "$prog" ck/tree || fail "with the library: exit status $?"
	(cd plain && find . -type f -exec sha256sum {} + | sort) >plain.sum
	(cd ck/tree && find . -type f -exec sha256sum {} + | sort) >ck.sum
	cmp -s plain.sum ck.sum || fail "not the same files and bytes: $(diff plain.sum ck.sum | head -2 | tr '\n' ' ')"
	local d y kept=
	for d in plain/r*; do
		[ "$(stat -c %y "$d" | cut -c1-4)" != 2001 ] || fail "without the library, $d kept 2001"
		y=$(stat -c %y "ck/tree/${d#plain/}")
		[ "${y:0:4}" != 2001 ] || kept="$kept ${d#plain/}"
	done
	[ -z "$kept" ] || fail "folders changed after their times were set kept them:$kept"
	stats_ok 'objects.written>=2000'
}

# GNU tar extracts a symbolic link whose target leaves the folder (../..)
# as an empty placeholder file first, and replaces it with the link at the
# end only if the placeholder's device and inode are still the ones its
# fstat gave: the placeholder is a new checkpoint, published meanwhile. The
# tree extracted into a tagged folder is the one extracted without the
# library: the same links, files and bytes.
tools_tar_delayed_links() {
	local i
	mkdir -p src/a/b src/x
	echo target >src/x/t
	ln -s ../../x/t src/a/b/l1
	for i in $(seq 1 120); do
		randfile "src/a/f$i" $((i * 997))
	done
	ln -s ../../x src/a/b/l2
	ln -s f1 src/a/near
	tar -C src -cf in.tar a x
	mkdir -p plain ck/tree
	tar -C plain -xf in.tar || fail "tar -x without the library"
	ck -- tar -C ck/tree -xf in.tar || fail "tar -x into a tagged folder: exit status $?$(first_error '^tar: ')"
	local want got
	want=$(cd plain && find . -printf '%y %m %p %l\n' | sort)
	got=$(cd ck/tree && find . -printf '%y %m %p %l\n' | sort)
	[ "$got" = "$want" ] || fail "tar -x into a tagged folder: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -4 | tr '\n' ' ')"
	diff -r plain ck/tree >/dev/null || fail "tar -x into a tagged folder: $(diff -r plain ck/tree 2>&1 | head -1)"
}

tools_tar_out_of() {
	make_tree tree
	phase write
	run_ok "cp -r into a tagged folder" ck -- cp -r tree ck/tree
	phase tar
	run_ok "tar -c of a tagged folder" ck -- tar -C ck/tree -cf out.tar .
	no_stats # only reads: the cache never started
	mkdir o
	tar -C o -xf out.tar || fail "the archive of a tagged folder cannot be extracted"
	diff -r tree o >/dev/null || fail "tar -c of a tagged folder: $(diff -r tree o 2>&1 | head -1)"
	# an archive piped straight into sha256sum, in one pipeline
	local a b
	a=$(ck -- tar -C ck/tree -cf - ./sub/f2.bin | tar -xOf - | sha256sum | awk '{print $1}')
	b=$(sha256sum <tree/sub/f2.bin | awk '{print $1}')
	[ "$a" = "$b" ] || fail "tar -c | tar -xO of a tagged file: wrong bytes"
}

# bash reads a checkpoint with builtins (read, mapfile, exec N<): the
# redirections go through open/dup2/fcntl(F_DUPFD)/close and read pushes
# back what it over-read with lseek. Writing with echo or printf is another
# matter: bash's builtins write through glibc's stdout, whose internal
# write() the library never sees (see unsupported/stdout-dup2).
tools_bash_builtins() {
	seq 1 4000 | sed 's/$/ some text to make the line longer/' >expect.txt
	phase write
	run_ok "cp" ck -- cp expect.txt ck/lines.txt
	phase read
	ck -- bash -c '
		set -e
		n=0
		while IFS= read -r l; do n=$((n + 1)); done <ck/lines.txt
		echo "read $n lines" >count.txt
		mapfile -t all <ck/lines.txt
		printf "%s\n" "${all[@]}" >out.txt
		exec 7<ck/lines.txt
		IFS= read -r first <&7
		IFS= read -r second <&7
		read -r -N 10 ten <&7
		exec 7<&-
		echo "$first|$second|$ten" >first.txt
	' || fail "bash builtins reading a tagged file failed$(last_error)"
	same expect.txt out.txt "bash: mapfile of a tagged file"
	[ "$(cat count.txt)" = "read 4000 lines" ] || fail "bash: read loop: $(cat count.txt)"
	[ "$(cat first.txt)" = "1 some text to make the line longer|2 some text to make the line longer|3 some tex" ] ||
		fail "bash: reads through an exec'ed descriptor: $(cat first.txt)"
	no_stats # only reads: the cache never started
}

# The C helper writes and reads back in one process, with odd-sized calls.
tools_write_then_read() {
	local chunk
	for chunk in 1000 7777 1048577; do
		phase "chunk$chunk"
		run_ok "write then read, chunk $chunk" ck -- "$HELPER" wr "ck/w$chunk.bin" 3000017 $chunk $chunk
		stats_ok files==1 objects.written==1 host.put_bytes==3000017 host.read_bytes==3000017 host.hits\>0 home.read_ops==0
		run_ok "check without the library" plain "$HELPER" rawcheck "ck/w$chunk.bin" 3000017 $chunk
	done
}

# The stat family, fcntl, lseek and ioctl, which the library makes as
# system calls of its own where the C library's functions come next: a
# library preloaded after it (a profiler, a tracer; tests/e2e/countstat.c)
# still sees every call of each, and the answers are those without the
# library, for untagged files and for a checkpoint the program has just
# written, and so are their failures (EBADF, ENOTDIR, ESPIPE, EINVAL,
# ENOTTY).
tools_stat_next_interposer() {
	[ -n "$COUNTSTAT" ] || fail "the counting shim (tests/e2e/countstat.c) did not compile"
	local d f cmd plain lib
	for d in $(seq 1 20); do
		mkdir -p "tree/d$d"
		for f in 1 2 3; do head -c $((d * 100 + f)) /dev/zero >"tree/d$d/f$f.bin"; done
		ln -s "f1.bin" "tree/d$d/link"
	done
	cat >st.py <<'PYEOF'
import fcntl, os, sys
tree, ck = sys.argv[1], (sys.argv[2:] or [None])[0]
def show(tag, st):
    print(tag, st.st_size, oct(st.st_mode), st.st_ino, st.st_nlink)
for d in sorted(os.listdir(tree)):
    p = os.path.join(tree, d)
    show("stat", os.stat(os.path.join(p, "link")))
    show("lstat", os.lstat(os.path.join(p, "link")))
    dfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
    show("at", os.stat("f2.bin", dir_fd=dfd))
    show("at-nofollow", os.stat("link", dir_fd=dfd, follow_symlinks=False))
    dup = fcntl.fcntl(dfd, fcntl.F_DUPFD_CLOEXEC, 3)
    print("flags", fcntl.fcntl(dup, fcntl.F_GETFL) & ~0o100000, fcntl.fcntl(dup, fcntl.F_GETFD))
    show("fstat", os.fstat(dup))
    os.close(dup)
    os.close(dfd)
# the calls' failures, as the kernel gives them
import errno, termios
r, w = os.pipe()
for what, call in (("stat", lambda: os.stat(os.path.join(tree, "missing"))),
                   ("stat-notdir", lambda: os.stat(os.path.join(tree, "d1", "f1.bin", "x"))),
                   ("lstat-loop", lambda: os.lstat(os.path.join(tree, "d1", "link", "x"))),
                   ("fstatat-badfd", lambda: os.stat("x", dir_fd=9999)),
                   ("fstat-badfd", lambda: os.fstat(9999)),
                   ("lseek-pipe", lambda: os.lseek(r, 0, os.SEEK_SET)),
                   ("lseek-einval", lambda: os.lseek(os.open(os.path.join(tree, "d1", "f1.bin"), os.O_RDONLY), -5, os.SEEK_SET)),
                   ("fcntl-badfd", lambda: fcntl.fcntl(9999, fcntl.F_GETFL)),
                   ("ioctl-notty", lambda: fcntl.ioctl(w, termios.TCGETS, bytes(64)))):
    try:
        call()
        print(what, "no error")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
if ck is None:
    sys.exit(0)
data = bytes(range(256)) * 4096
with open(os.path.join(ck, "x.bin"), "wb") as f:
    f.write(data)
    st = os.fstat(f.fileno())
    print("checkpoint open", st.st_size, oct(st.st_mode))
st = os.stat(os.path.join(ck, "x.bin"))
print("checkpoint", st.st_size, oct(st.st_mode))
with open(os.path.join(ck, "x.bin"), "rb") as f:
    print("read back", f.read() == data)
PYEOF
	"$PY" -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4096)' >want.bin
	# (the checkpoint's own calls are the cache's to answer: counted apart)
	for cmd in "du -s tree" "find tree -printf %p:%s:%m:%i:%n:%y\n" "$PY st.py $T/tree" "$PY st.py $T/tree $T/ck"; do
		rm -f plain.n lib.n "$T/ck/x.bin"
		# shellcheck disable=SC2086
		plain env COUNTSTAT_OUT=plain.n LD_PRELOAD="$COUNTSTAT" $cmd >want.txt ||
			fail "$cmd with the shim alone: exit status $?"
		rm -f "$T/ck/x.bin"
		# shellcheck disable=SC2086
		run_ok "$cmd with the library and the shim" ck COUNTSTAT_OUT=lib.n -- env LD_PRELOAD="$PRELOAD $COUNTSTAT" $cmd >got.txt
		outputs_match want.txt got.txt
		# the library alone, which makes these calls itself
		rm -f "$T/ck/x.bin"
		# shellcheck disable=SC2086
		run_ok "$cmd with the library alone" ck -- $cmd >got.txt
		outputs_match want.txt got.txt
		[ "$cmd" = "$PY st.py $T/tree $T/ck" ] && continue
		# each function's calls, summed over the processes: without the
		# library, then with it
		plain=$(awk '{ n[$1] += $2 } END { for (f in n) print f, n[f] }' plain.n | sort)
		lib=$(awk '{ n[$1] += $2 } END { for (f in n) print f, n[f] }' lib.n | sort)
		echo "$cmd: calls that reached the shim without the library: $(echo $plain); with it: $(echo $lib)"
		[ -n "$plain" ] && [ "$(echo "$plain" | awk '{ n += $2 } END { print n + 0 }')" -gt 0 ] ||
			fail "$cmd: the shim counted no call without the library"
		join <(echo "$plain") <(echo "$lib") | awk -v cmd="$cmd" '$3 < $2 {
			printf "%s: %d %s calls reached the shim preloaded after the library, %d without it\n", cmd, $3, $1, $2
			bad = 1 } END { exit bad }' >short.txt || fail "$(head -1 short.txt)"
	done
	grep -q '^lseek [1-9]' lib.n && grep -q '^ioctl [1-9]' lib.n ||
		fail "the Python program's lseek and ioctl calls did not reach the shim: $(tr '\n' ' ' <lib.n)"
	same "$T/ck/x.bin" want.bin "the checkpoint at its real path"
}

# A shell script's builtin redirections into a tagged folder (bash and
# dash: "echo ... >file", each file then the shell's standard output): the
# first few are versions in the cache that the redirection hands over to
# their real files; after three in a row the shell's next files go to their
# real paths from the start, bar one in sixteen that the cache tries (a
# program that closes such a version itself goes back to the cache). Every
# file holds its line, read by the shell and at its real path. A program
# that redirects three new logs so, then writes a file with "wb" and its
# checkpoints with O_RDWR|O_TRUNC (HDF5's create): each checkpoint is a
# version in the cache; with CKPTCACHE_STEP_ASIDE=off its "wb" ones too.
tools_shell_redirects() {
	local sh n aside
	for sh in bash dash; do
		command -v $sh >/dev/null || continue
		rm -rf "$T/ck" && mkdir -p "$T/ck"
		ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_TRACE="$T/trace.txt" -- $sh -c '
cd "$1" || exit 2
i=1
while [ $i -le 64 ]; do echo "value $i" > f_$i; i=$((i + 1)); done
read -r got < f_64
[ "$got" = "value 64" ] || exit 3
' sh "$T/ck" || fail "$sh: the script (exit $?: 3 = f_64 read back wrong)$(last_error)"
		grep -q 'ckptcache: error' "$T/.log" && fail "$sh: an error message:$(first_error 'ckptcache: error')"
		n=$(grep -c ' open-write ' "$T/trace.txt")
		[ "$n" -le 10 ] || fail "$sh: $n of 64 redirected files were made in the cache (at most 3 + 64/16 expected)"
		plain "$PY" -c '
import sys
for i in range(1, 65):
    b = open(f"{sys.argv[1]}/f_{i}", "rb").read()
    assert b == f"value {i}\n".encode(), (i, b)
' "$T/ck" || fail "$sh: the files at their real paths$(last_error)"
	done
	for aside in auto off; do
		rm -rf "$T/ck" && mkdir -p "$T/ck"
		ck CKPTCACHE_STEP_ASIDE=$aside CKPTCACHE_TRACE="$T/trace.txt" -- "$PY" -c '
import os, sys
d, aside = sys.argv[1], sys.argv[2]
for k in range(3):
    fd = os.open(f"{d}/log_{k}.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.close(fd)
    os.write(1, b"log line\n")
with open(f"{d}/note.txt", "wb") as f:
    f.write(b"note\n")
for k in range(4):
    fd = os.open(f"{d}/rw_{k}.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, bytes([k]) * (1 << 20))
    os.close(fd)
if aside == "off":
    for k in range(4):
        with open(f"{d}/wb_{k}.bin", "wb") as f:
            f.write(bytes([k]) * (1 << 20))
for k in range(4):
    assert open(f"{d}/rw_{k}.bin", "rb").read() == bytes([k]) * (1 << 20), k
' "$T/ck" $aside || fail "the log rotating program (CKPTCACHE_STEP_ASIDE=$aside)$(last_error)"
		n=$(grep -c ' open-write .*/rw_' "$T/trace.txt")
		[ "$n" = 4 ] || fail "CKPTCACHE_STEP_ASIDE=$aside: $n of 4 O_RDWR checkpoints after three redirections were versions in the cache"
		if [ $aside = off ]; then
			n=$(grep -c ' open-write .*/wb_' "$T/trace.txt")
			[ "$n" = 4 ] || fail "CKPTCACHE_STEP_ASIDE=off: $n of 4 \"wb\" checkpoints after three redirections were versions in the cache"
		fi
		plain "$PY" -c '
import sys
for k in range(4):
    assert open(f"{sys.argv[1]}/rw_{k}.bin", "rb").read() == bytes([k]) * (1 << 20), k
' "$T/ck" || fail "CKPTCACHE_STEP_ASIDE=$aside: the checkpoints at their real paths$(last_error)"
	done
	return 0
}
case_add tools/shell-redirects tools_shell_redirects
case_add tools/cp tools_cp
case_add tools/cp-preserve tools_cp_preserve
case_add_alone tools/walk-untagged tools_walk_untagged
case_add tools/untagged-tree-bytes tools_untagged_tree_bytes
case_add tools/dd-no-table-read tools_dd_no_table_read
case_add_alone tools/walk-tagged tools_walk_tagged
case_add_alone tools/walk-tagged-beside-holder tools_walk_tagged_beside_holder
case_add_waits tools/walk-folder-renamed tools_walk_folder_renamed
case_add_waits tools/file-modes-beside-holder tools_file_modes_beside_holder
case_add_alone tools/list-beside-holder tools_list_beside_holder
case_add tools/cat tools_cat
case_add_alone tools/read-looks-once tools_read_looks_once
case_add tools/read-open-errors tools_read_open_errors
for bs in 1 4096 1M 7777; do
	case_add "tools/dd-bs$bs" tools_dd $bs
done
case_add tools/sha256sum tools_sha256sum
case_add tools/tar-into tools_tar_into
case_add tools/tar-folder-times tools_tar_folder_times
case_add_waits tools/py-folder-times tools_py_folder_times
tools_py_folder_times_named() { NOTMPFILE=1 tools_py_folder_times; }
case_add_waits tools/py-folder-times-named-temps tools_py_folder_times_named
case_add tools/py-folder-changes tools_py_folder_changes
case_add tools/tar-out-of tools_tar_out_of
case_add_waits tools/tar-delayed-links tools_tar_delayed_links
case_add tools/bash-builtins tools_bash_builtins
case_add tools/write-then-read tools_write_then_read
case_add tools/stat-next-interposer tools_stat_next_interposer
