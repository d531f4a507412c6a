# Children and other processes: what shell redirections, exec'ed tools,
# vfork (dash, Python's subprocess), system(), forked children and other
# processes of the node see of tagged files and descriptors. Every file is
# compared with what was written, read back with the library and at its
# real path without it.

need_shell() {
	command -v "$1" >/dev/null || fail "$1 is not installed (scripts/setup installs it)"
}

# shell_redirections SH: a batch script's redirections: cat into a
# checkpoint and sha256sum from it, echo into an existing checkpoint, a
# descriptor opened with exec and written by builtins and by a child, a
# here-document into a checkpoint, and a command exec'ed with a checkpoint
# as its standard input.
shell_redirections() {
	local sh=$1
	need_shell "$sh"
	randfile src.bin 3000017
	echo "an older version of this checkpoint, longer than the new one" >ck/existing.txt
	local script='
		set -e
		cat src.bin > ck/a.bin
		sha256sum < ck/a.bin > sum1.txt
		echo hello > ck/existing.txt
		exec 3> ck/fd3.bin
		echo x >&3
		printf "y\n" >&3
		cat src.bin >&3
		exec 3>&-
		cat > ck/heredoc.txt <<END
first line
second line
END
		exec sha256sum < ck/a.bin > sum2.txt
	'
	ck -- "$sh" -c "$script" || fail "$sh: the script failed$(last_error)"
	local want
	want=$(sha256sum <src.bin | awk '{print $1}')
	[ "$(awk '{print $1}' sum1.txt)" = "$want" ] || fail "$sh: sha256sum < checkpoint printed '$(head -c 80 sum1.txt)'"
	[ "$(awk '{print $1}' sum2.txt)" = "$want" ] || fail "$sh: exec sha256sum < checkpoint printed '$(head -c 80 sum2.txt)'"
	same src.bin ck/a.bin "$sh: cat > checkpoint, at its real path"
	[ "$(cat ck/existing.txt)" = hello ] || fail "$sh: echo > existing checkpoint left '$(head -c 80 ck/existing.txt)'"
	{ printf 'x\ny\n'; cat src.bin; } >fd3.ref
	same fd3.ref ck/fd3.bin "$sh: a descriptor opened with exec, written by builtins and cat"
	printf 'first line\nsecond line\n' >heredoc.ref
	same heredoc.ref ck/heredoc.txt "$sh: a here-document into a checkpoint"
	phase read
	ck -- "$sh" -c 'cat ck/a.bin; cat ck/fd3.bin' >back.bin || fail "$sh: reading back failed$(last_error)"
	cat src.bin fd3.ref >back.ref
	same back.ref back.bin "$sh: the checkpoints read back with the library"
}

# bash's here-strings, as the single command of bash -c (bash then execs
# the command itself, with the redirections it made): into a checkpoint,
# and one large enough that bash writes it to a temporary file, in a
# tagged TMPDIR, for the command to read.
bash_here_strings() {
	need_shell bash
	randfile src.bin 200003
	base64 -w 76 src.bin >big.ref
	mkdir -p ck/tmp
	ck -- bash -c 'cat <<< "a here-string" > ck/string.txt' || fail "bash: a here-string into a checkpoint$(last_error)"
	[ "$(cat ck/string.txt)" = "a here-string" ] || fail "the here-string checkpoint holds '$(head -c 80 ck/string.txt)'"
	ck TMPDIR="$T/ck/tmp" -- bash -c 'sha256sum <<< "$(cat big.ref)" > big.sum' ||
		fail "bash: a large here-string in a tagged folder$(last_error)"
	[ "$(awk '{print $1}' big.sum)" = "$(sha256sum <big.ref | awk '{print $1}')" ] ||
		fail "sha256sum of a large here-string in a tagged folder is wrong: '$(head -c 80 big.sum)'"
	ck TMPDIR="$T/ck/tmp" -- bash -c 'read -r first <<< "$(head -1 big.ref)"; echo "$first" > ck/first.txt' ||
		fail "bash: read from a here-string, echo into a checkpoint$(last_error)"
	[ "$(cat ck/first.txt)" = "$(head -1 big.ref)" ] || fail "the echoed line holds '$(head -c 80 ck/first.txt)'"
}

# dash (Debian's /bin/sh) runs a command with its redirection in a vfork child.
dash_vfork() {
	need_shell dash
	ck -- dash -c 'head -c 1M /dev/zero > ck/zero.bin; head -c 1M /dev/zero | tr "\0" z > ck/z.bin; true' ||
		fail "dash: the redirections failed$(last_error)"
	head -c 1M /dev/zero >zero.ref
	head -c 1M /dev/zero | tr '\0' z >z.ref
	same zero.ref ck/zero.bin "dash -c 'head -c 1M /dev/zero > checkpoint'"
	same z.ref ck/z.bin "dash: a pipeline into a checkpoint"
	phase single
	rm -f ck/zero.bin
	ck -- dash -c 'head -c 1M /dev/zero > ck/zero.bin' || fail "dash: a single command failed$(last_error)"
	same zero.ref ck/zero.bin "dash -c with a single command"
}

# Python's subprocess (vfork): stdout and stdin on checkpoints, and a
# descriptor passed to the child and written by both; posix_spawn moving a
# checkpoint descriptor onto a child's stdout; popen reading a checkpoint.
python_subprocess() {
	randfile src.bin 2000003
	ck -- "$PY" -c '
import hashlib, subprocess
src = open("src.bin", "rb").read()
subprocess.run(["cat", "src.bin"], stdout=open("ck/out.bin", "wb"), check=True)
r = subprocess.run(["sha256sum"], stdin=open("ck/out.bin", "rb"), capture_output=True, check=True)
assert r.stdout.split()[0].decode() == hashlib.sha256(src).hexdigest(), "sha256sum read wrong bytes"
assert open("ck/out.bin", "rb").read() == src, "the checkpoint read back differs"
with open("ck/shared.txt", "wb") as f:
    f.write(b"parent\n")
    f.flush()
    subprocess.run(["sh", "-c", "echo child >&%d" % f.fileno()], pass_fds=(f.fileno(),), check=True)
    f.write(b"parent again\n")
got = open("ck/shared.txt", "rb").read()
assert got == b"parent\nchild\nparent again\n", got
# posix_spawn with a file action that moves a close-on-exec checkpoint
# descriptor onto the standard output of the child
import os
fd = os.open("ck/spawned.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
pid = os.posix_spawn("/bin/echo", ["echo", "spawned"], os.environ,
                     file_actions=[(os.POSIX_SPAWN_DUP2, fd, 1)])
assert os.waitpid(pid, 0)[1] == 0
os.write(fd, b"and the parent\n")
os.close(fd)
assert open("ck/spawned.txt", "rb").read() == b"spawned\nand the parent\n"
# popen(3) of the C library reading a checkpoint closed just before
import ctypes
with open("ck/popen.txt", "wb") as f:
    f.write(b"read by popen\n" * 1000)
libc = ctypes.CDLL(None)
libc.popen.restype = ctypes.c_void_p
libc.popen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fread.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.pclose.argtypes = [ctypes.c_void_p]
p = libc.popen(b"cat ck/popen.txt", b"r")
buf = ctypes.create_string_buffer(20000)
n = libc.fread(buf, 1, 20000, p)
assert libc.pclose(p) == 0
assert buf.raw[:n] == b"read by popen\n" * 1000, n
' || fail "Python subprocess with checkpoints$(last_error)"
	same src.bin ck/out.bin "subprocess stdout into a checkpoint, at its real path"
	printf 'parent\nchild\nparent again\n' >shared.ref
	same shared.ref ck/shared.txt "a descriptor written by the parent and its child"
	printf 'spawned\nand the parent\n' >spawned.ref
	same spawned.ref ck/spawned.txt "posix_spawn's child and its parent"
}

# A forked child rewrites the checkpoint its parent has just written: the
# parent reads the child's version, and that version is the file after exit.
forked_child_rewrites() {
	# MIB: the size of the parent's version, in a host tier twice that (a
	# large one is still being flushed when the child asks for it); US:
	# microseconds the library's rename(2) of a real file waits (named
	# temporary files), or nothing;
	# ROUNDS: times the whole run is made (the race it looks for is not
	# met every time)
	local mib=$1 us=${2:-} round rounds=${3:-1}
	for round in $(seq "$rounds"); do
		rm -f ck/a.bin
		SLOW_US=$us ck CKPTCACHE_HOST_CACHE=$((2 * mib))M SLOWFS_OPS=rename SLOWFS_NOTMPFILE=1 -- "$PY" -c '
import os, sys
old = bytes(range(256)) * 4096 * int(sys.argv[1])
new = b"the child wrote this\n" * 1000
with open("ck/a.bin", "wb") as f:
    f.write(old)
pid = os.fork()
if pid == 0:
    with open("ck/a.bin", "wb") as f:
        f.write(new)
    os._exit(0)
os.waitpid(pid, 0)
got = open("ck/a.bin", "rb").read()
assert got == new, "the parent reads %d bytes, not the child version" % len(got)
' "$mib" || fail "the parent did not read its child's version (round $round)$(last_error)"
		"$PY" -c 'import sys; sys.stdout.buffer.write(b"the child wrote this\n" * 1000)' >a.ref
		same a.ref ck/a.bin "after exit, the checkpoint (round $round)"
	done
}

# The parent writes a checkpoint (4 names in turn, each version of another
# size) and forks right after its close; the child (its cache off) stats the
# name, then reads it: both see the version just closed, as without the
# library. The child's stat asks the parent to publish it, as its open
# does. 40 generations, 3 runs (one under a sanitizer; a stat that did not
# ask found the previous size, or ENOENT, in 6 to 12 of 40, in 2 of 3 runs).
forked_child_stats() {
	cat >fs.py <<'PYEOF'
import os, sys
d = sys.argv[1]
bad = []
for g in range(40):
    n = 3000000 + g * 1000
    p = f"{d}/c{g % 4}.bin"
    data = bytes([97 + g % 26]) * n
    with open(p, "wb") as f:
        f.write(data)
    pid = os.fork()
    if pid == 0:
        try:
            st = os.stat(p)
            ok = st.st_size == n and open(p, "rb").read() == data
        except OSError:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    if status:
        bad.append(g)
if bad:
    sys.exit(f"the child's stat or read of the version just closed failed in generations {bad}")
for g in range(36, 40):
    assert open(f"{d}/c{g % 4}.bin", "rb").read() == bytes([97 + g % 26]) * (3000000 + g * 1000)
PYEOF
	local round g
	for round in $(seq "$(rounds 3 3 1)"); do
		rm -f ck/c*.bin
		ck CKPTCACHE_HOST_CACHE=64M -- "$PY" fs.py "$T/ck" || fail "round $round$(last_error)"
		for g in 36 37 38 39; do
			plain "$PY" -c 'import sys; g = int(sys.argv[1]); sys.stdout.buffer.write(bytes([97 + g % 26]) * (3000000 + g * 1000))' $g >c.ref
			same c.ref "ck/c$((g % 4)).bin" "generation $g at its real path after exit (round $round)"
		done
	done
}

# A thread reads a checkpoint the cache holds through its descriptor (the
# descriptor's lock held for each read) while the main thread forks, 40
# times; each child uses the inherited descriptor at once. The cache does
# not run in a forked child (its read fails with EBADF, or reads the real
# file once the descriptor was handed over to it); it must never hang on
# the lock that the parent's reader held at the fork. The checkpoint reads
# back whole in the parent and at its real path.
fork_while_a_thread_reads() {
	randfile src.bin $((48 << 20))
	ck CKPTCACHE_HOST_CACHE=256M -- "$PY" -c '
import os, sys, threading, time
src = open("src.bin", "rb").read()
with open("ck/a.bin", "wb") as f:
    f.write(src)
fd = os.open("ck/a.bin", os.O_RDONLY)
stop = False
def reader():
    # the children read through the same open file: how much each of
    # these reads gets is theirs to share, as without the library
    while not stop:
        os.lseek(fd, 0, 0)
        while os.read(fd, 16 << 20):
            pass
t = threading.Thread(target=reader, daemon=True)
t.start()
for i in range(40):
    pid = os.fork()
    if pid == 0:
        try:
            os.read(fd, 4096)
            os._exit(0)
        except OSError as e:
            os._exit(0 if e.errno == 9 else 4)
    _, st = os.waitpid(pid, 0)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "child %d: status %r" % (i, st)
    time.sleep(0.002)
stop = True
t.join()
assert os.pread(fd, len(src) + 1, 0) == src, "the checkpoint read back differs"
' 2>err.txt || fail "forks while a thread reads: $(status_text $?)$(tail -3 err.txt)"
	same src.bin ck/a.bin "the checkpoint"
}

# A thread saves a checkpoint over and over (open with O_TRUNC, 16 MiB
# writes, close: the descriptor's lock held for each write) while the main
# thread forks 40 times; each child reads, at once, the descriptor number
# the writer uses (EBADF: it is open for writing, or closed). A descriptor
# opened after the fork wrapper handed the open ones over is still the
# cache's in the child; no child may hang on its lock, held by the
# parent's writer at the fork (each child is killed by an alarm after 5
# seconds). The last version saved reads back whole in the parent and at
# its real path.
fork_while_a_thread_writes() {
	randfile src.bin $((48 << 20))
	ck CKPTCACHE_HOST_CACHE=256M -- "$PY" -c '
import os, signal, threading
src = open("src.bin", "rb").read()
def save():
    fd = os.open("ck/a.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for off in range(0, len(src), 16 << 20):
        os.write(fd, src[off:off + (16 << 20)])
    return fd
n = save()
os.close(n)
stop = False
def writer():
    while not stop:
        os.close(save())
t = threading.Thread(target=writer, daemon=True)
t.start()
for i in range(40):
    pid = os.fork()
    if pid == 0:
        signal.alarm(5)
        try:
            os.read(n, 4096)
            os._exit(3)
        except OSError as e:
            os._exit(0 if e.errno == 9 else 4)
    _, st = os.waitpid(pid, 0)
    hung = os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGALRM
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, \
        "child %d: %s" % (i, "hung in its first read" if hung else "status %r" % st)
stop = True
t.join()
assert open("ck/a.bin", "rb").read() == src, "the checkpoint read back differs"
' 2>err.txt || fail "forks while a thread writes: $(status_text $?): $(grep -v EBADF err.txt | tail -1)"
	same src.bin ck/a.bin "the checkpoint"
}

# A child forked while the cache opens one of its own files (a
# publication's anonymous file in the checkpoint's folder, moved above the
# program's numbers by a dup that slowfs slows to 100 ms): a number the
# program closed refers in the child to nothing, as without the library,
# never to the cache's file (which the child could read, or write into
# before it is published).
fork_while_the_cache_opens() {
	SLOW_US=100000 SLOWFS_OPS=dupfd ck -- "$PY" -c '
import os, time
data = os.urandom(200000)
open("src.bin", "wb").write(data)
for i in range(12):
    fd = os.open(f"ck/c{i}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.close(fd)
    time.sleep(0.03)
    pid = os.fork()
    if pid == 0:
        try:
            os.read(fd, 10)
            os._exit(3)
        except OSError as e:
            os._exit(0 if e.errno == 9 else 4)
    _, st = os.waitpid(pid, 0)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, \
        "child %d: number %d %s" % (i, fd, "read a file" if os.WEXITSTATUS(st) == 3 else "status %r" % st)
for i in range(12):
    assert open(f"ck/c{i}.bin", "rb").read() == data, f"c{i}.bin read back differs"
print("ok")
' >out.txt 2>err.txt || fail "forks while the cache opens its files: $(tail -1 err.txt)"
	[ "$(cat out.txt)" = ok ] || fail "the program printed $(head -c 200 out.txt)"
	local i
	for i in 0 5 11; do
		same src.bin ck/c$i.bin "c$i.bin at its real path"
	done
}

# The checkpoint's folder through a symbolic link (an untagged spelling):
# a write there is newer than the version the cache holds, before and
# after that version was published, and is never overwritten.
untagged_spelling() {
	ln -s ck alias
	ck CKPTCACHE_HOST_CACHE=256M -- "$PY" -c '
import time
def put(p, b):
    with open(p, "wb") as f:
        f.write(b)
put("ck/filler.bin", b"f" * (96 << 20))    # keeps the flusher busy: a.bin waits
put("ck/a.bin", b"cached version\n" * 70000)
put("alias/a.bin", b"written through the link\n")
assert open("ck/a.bin", "rb").read() == b"written through the link\n", "a.bin: the cached version is read"
put("ck/b.bin", b"cached version\n" * 70000)
time.sleep(1)   # published by now
put("alias/b.bin", b"written through the link\n")
assert open("ck/b.bin", "rb").read() == b"written through the link\n", "b.bin: the cached version is read"
' || fail "the program read its cached versions$(last_error)"
	printf 'written through the link\n' >link.ref
	same link.ref ck/a.bin "a.bin after exit"
	same link.ref ck/b.bin "b.bin after exit"
	local f found=
	"$PY" -c 'import sys; sys.stdout.buffer.write(b"cached version\n" * 70000)' >cached.ref
	for f in $(find "$T" -path "$T/ck" -prune -o -type f -name '*rescue*' -print); do
		cmp -s "$f" cached.ref && found=$f
	done
	# the filler keeps the flusher busy, so a.bin's flush usually finds the
	# real file changed; when the flush ran first (a fast machine moment),
	# the write through the link simply replaced a published file: then
	# neither a rescue nor a report, and the checks above hold either way
	if grep -q "ckptcache: error: checkpoint $T/ck/a.bin was changed" "$T/.log"; then
		[ -n "$found" ] || fail "the cached version of a.bin was reported kept but not saved in a rescue file"
	else
		[ -z "$found" ] || fail "a rescue file $found was made without a report"
		if grep -q "ckptcache: error" "$T/.log"; then
			fail "an error other than the kept newer file: $(grep 'ckptcache: error' "$T/.log" | head -1)"
		fi
	fi
}

# system() runs a command (the library inherited) right after a checkpoint
# of 200 MiB was rewritten and closed: the command reads that version.
system_reads_new_version() {
	ck CKPTCACHE_HOST_CACHE=512M -- "$PY" -c '
import hashlib, os
for seed in (b"first", b"second"):
    data = hashlib.sha256(seed).digest() * (200 << 15)
    with open("ck/big.bin", "wb") as f:
        f.write(data)
    os.system("sha256sum ck/big.bin > sum.txt")
    got = open("sum.txt").read().split()[0]
    assert got == hashlib.sha256(data).hexdigest(), "the command read another version (%s)" % seed
' || fail "a command run by system() read an older version$(last_error)"
	"$PY" -c '
import hashlib, sys
sys.stdout.buffer.write(hashlib.sha256(b"second").digest() * (200 << 15))' >big.ref
	same big.ref ck/big.bin "after exit"
}

# link(2) of a cached checkpoint names its current bytes, under an
# untagged name and a tagged one.
link_current_version() {
	ck -- "$PY" -c '
import os
with open("ck/a.bin", "wb") as f:
    f.write(b"old version\n")
with open("ck/a.bin", "wb") as f:
    f.write(b"current version\n" * 1000)
os.link("ck/a.bin", "hard.bin")
os.link("ck/a.bin", "ck/hard.bin")
assert open("hard.bin", "rb").read() == b"current version\n" * 1000, "hard.bin"
assert open("ck/hard.bin", "rb").read() == b"current version\n" * 1000, "ck/hard.bin"
try:
    os.link("hard.bin", "ck/a.bin")
    raise SystemExit("a link over a cached checkpoint succeeded")
except FileExistsError:
    pass
' || fail "link(2) of a cached checkpoint$(last_error)"
	"$PY" -c 'import sys; sys.stdout.buffer.write(b"current version\n" * 1000)' >a.ref
	same a.ref ck/a.bin "after exit, a.bin"
	same a.ref hard.bin "after exit, the untagged link"
	same a.ref ck/hard.bin "after exit, the tagged link"
	[ "$(stat -c %h ck/a.bin)" = 3 ] || fail "a.bin has $(stat -c %h ck/a.bin) links, expected 3"
}

# Two unrelated processes: one writes and closes a checkpoint whose flush is
# slow; the other, started after the close, reads that version.
# held_by_another FILE TEXT COUNT SECONDS: another process writes TEXT
# COUNT times into FILE, a checkpoint, closes it and lives SECONDS more;
# its publication (a rename) takes 1.5 s. HOLDER is its pid, once the file
# is closed.
held_by_another() {
	rm -f closed
	SLOW_US=1500000 SLOWFS_OPS=rename ck -- "$PY" -c '
import sys, time
with open(sys.argv[1], "wb") as f:
    f.write(sys.argv[2].encode() * int(sys.argv[3]))
open("closed", "w").close()
time.sleep(float(sys.argv[4]))
' "$@" &
	HOLDER=$!
	local n=0
	while [ ! -e closed ] && [ $n -lt 500 ]; do sleep 0.01; n=$((n + 1)); done
	[ -e closed ] || fail "the holder did not close its checkpoint"
}

other_process_reads() {
	need_helper
	held_by_another ck/a.bin $'the new version\n' 100000 4
	local writer=$HOLDER
	ck -- "$PY" -c '
got = open("ck/a.bin", "rb").read()
assert got == b"the new version\n" * 100000, "read %d bytes of another version" % len(got)
' || fail "another process read an older version$(last_error)"
	wait $writer || fail "the writer failed$(last_error)"
	"$PY" -c 'import sys; sys.stdout.buffer.write(b"the new version\n" * 100000)' >a.ref
	same a.ref ck/a.bin "after exit"
}

# A program that asks stat of names and lists no folder (coreutils stat,
# ls -l of a file): its first stat maps the node's table, and a checkpoint
# another process holds, whose real file is still the older version, has
# the held version's size; a missing one gives the kernel's error.
stat_only_sees_held() {
	need_helper
	printf 'old\n' >ck/a.bin
	printf 'old\n' >ck/b.bin
	held_by_another ck/a.bin $'the new version\n' 100000 4
	local writer_a=$HOLDER
	held_by_another ck/b.bin $'another version\n' 50000 4
	local writer_b=$HOLDER got
	got=$(ck -- stat -c %s ck/a.bin) || fail "stat of a.bin failed$(last_error)"
	[ "$got" = 1600000 ] || fail "stat gave a.bin $got bytes, expected 1600000 (the held version)"
	# a name nobody holds and no file has: the same error as without the library
	local want
	want=$(stat -c %s ck/none.bin 2>&1; echo "exit $?")
	got=$(ck -- stat -c %s ck/none.bin 2>&1; echo "exit $?")
	[ "$got" = "$want" ] || fail "stat of a missing checkpoint gave '$got', without the library '$want'"
	got=$(ck -- ls -ln ck/b.bin) || fail "ls -l of b.bin failed$(last_error)"
	[ "$(echo "$got" | awk '{print $5}')" = 800000 ] ||
		fail "ls -l gave b.bin '$got', expected 800000 bytes (the held version)"
	wait $writer_a || fail "the writer of a.bin failed$(last_error)"
	wait $writer_b || fail "the writer of b.bin failed$(last_error)"
	"$PY" -c 'import sys; sys.stdout.buffer.write(b"the new version\n" * 100000)' >a.ref
	"$PY" -c 'import sys; sys.stdout.buffer.write(b"another version\n" * 50000)' >b.ref
	same a.ref ck/a.bin "after exit"
	same b.ref ck/b.bin "after exit"
}

# Many closed checkpoints held at once, none yet published (the first
# publication takes seconds): the node's table of holders costs the holder
# no more than its first 32 KiB of resident memory for 1,000 of them; with
# 5,000, more than the table's front takes, another process still gets
# each version it opens (the holder publishes it first), first and last.
MANY_HELD_WRITER='
import os, sys, time
n = int(sys.argv[1])
for i in range(n):
    with open("ck/s_%05d.dat" % i, "wb") as f:
        f.write(b"%05d " % i * (1 + i % 300))
rss = None
for line in open("/proc/self/smaps"):
    if "-" in line.split()[0] and not line.split()[0].endswith(":"):
        here = "ckptcache-" in line and ".nodes" in line
    elif here and line.startswith("Rss:"):
        rss = int(line.split()[1])
        here = False
print(rss)
open("closed", "w").close()
time.sleep(float(sys.argv[2]))
'

many_held_memory() {
	need_helper
	local writer=$MANY_HELD_WRITER rss
	rss=$(SLOW_MATCH="$T/ck/s_00000" SLOW_US=3000000 ck CKPTCACHE_HOST_CACHE=64M -- "$PY" -c "$writer" 1000 0) ||
		fail "the writer of 1,000 files$(last_error)"
	echo "the table of holders: $rss KiB resident in the holder"
	[ -n "$rss" ] && [ "$rss" != None ] || fail "the writer did not map the table of holders: '$rss'"
	[ "$rss" -le 128 ] || fail "the table of holders takes $rss KiB of the holder's resident memory for 1,000 files"
}

many_held() {
	need_helper
	local writer=$MANY_HELD_WRITER
	SLOW_MATCH="$T/ck/s_00000" SLOW_US=4000000 ck CKPTCACHE_HOST_CACHE=64M -- "$PY" -c "$writer" 5000 8 >/dev/null &
	local pid=$! n=0
	while [ ! -e closed ] && [ $n -lt 3000 ]; do sleep 0.01; n=$((n + 1)); done
	[ -e closed ] || fail "the writer did not close its checkpoints"
	ck -- "$PY" -c '
for i in list(range(1, 40)) + list(range(4960, 5000)):
    got = open("ck/s_%05d.dat" % i, "rb").read()
    assert got == b"%05d " % i * (1 + i % 300), "s_%05d.dat: %d bytes of another version" % (i, len(got))
' || fail "another process read an older version$(last_error)"
	wait $pid || fail "the writer of 5,000 files failed$(last_error)"
	"$PY" -c '
import sys
for i in range(5000):
    got = open(sys.argv[1] + "/s_%05d.dat" % i, "rb").read()
    assert got == b"%05d " % i * (1 + i % 300), "s_%05d.dat at its real path: %d bytes" % (i, len(got))
' "$T/ck" || fail "after exit"
}

# posix_spawn's file actions open paths in the child by the C library's own
# calls: a child whose standard input is a checkpoint just written reads
# its last version, and one whose standard output truncates a checkpoint
# the parent holds keeps what it wrote (Python's os.posix_spawn).
spawn_file_actions() {
	local prog='
import os, sys
for v in range(1, 10):
    with open("ck/in.bin", "wb") as f:
        f.write(b"input version %d\n" % v * 1000)
with open("ck/out.bin", "wb") as f:
    f.write(b"an older output, longer than the new one\n" * 5000)
pid = os.posix_spawnp("cat", ["cat"], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 0, "ck/in.bin", os.O_RDONLY, 0),
    (os.POSIX_SPAWN_OPEN, 1, "ck/out.bin", os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)])
_, status = os.waitpid(pid, 0)
assert status == 0, "cat: status %d" % status
got = open("ck/out.bin", "rb").read()
assert got == b"input version 9\n" * 1000, "out.bin: %d bytes, %r" % (len(got), got[:32])
'
	local mode
	for mode in off auto; do
		rm -f ck/*
		ck CKPTCACHE_STEP_ASIDE=$mode -- "$PY" -c "$prog" || fail "step aside $mode: the program$(last_error)"
		"$PY" -c 'import sys; sys.stdout.buffer.write(b"input version 9\n" * 1000)' >want.bin
		same want.bin ck/in.bin "step aside $mode: in.bin after exit"
		same want.bin ck/out.bin "step aside $mode: out.bin after exit"
	done
	rm -f ck/*
	# a file action that cannot be carried out fails the spawn as without
	# the library: a missing checkpoint, a folder that is not there, a
	# checkpoint the parent still writes opened exclusively
	same_output "file actions that fail" '
import os, sys
d = sys.argv[1]
w = open(os.path.join(d, "open.bin"), "wb")
w.write(b"held open\n")
for name, flags in (("missing.bin", os.O_RDONLY), ("nodir/x.bin", os.O_WRONLY | os.O_CREAT),
                    ("open.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL)):
    try:
        pid = os.posix_spawnp("cat", ["cat"], os.environ,
                              file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.path.join(d, name), flags, 0o644)])
        print(name, "spawned, status", os.waitpid(pid, 0)[1])
    except OSError as e:
        print(name, "errno", e.errno)
w.close()
print(open(os.path.join(d, "open.bin"), "rb").read())
print(sorted(os.listdir(d)))
'
}

# A process killed while it holds a checkpoint not yet published: the next
# process that opens that path finds nobody to ask and goes on at once.
holder_killed() {
	echo "the version at the real path" >ck/a.bin
	ck -- "$PY" -c '
import os, signal
with open("ck/a.bin", "wb") as f:
    f.write(b"never published\n" * 100000)
os.kill(os.getpid(), signal.SIGKILL)
'
	local t0=$SECONDS
	ck -- cat ck/a.bin >a.out || fail "cat after the holder was killed$(last_error)"
	[ $((SECONDS - t0)) -lt 10 ] || fail "cat waited $((SECONDS - t0)) s for a killed holder"
	cmp -s ck/a.bin a.out || fail "cat read other bytes than the real file holds"
	grep -q 'did not publish' "$T/.log" && fail "a killed holder was waited for$(first_error 'did not publish')"
	return 0
}

# A shell that wrote a checkpoint, then execs a program that writes one:
# the new program in the same process (same pid, same start time) takes
# over the record the shell's image left, with no message, and nothing of
# the process is left behind after it ends.
exec_after_write() {
	local sh
	for sh in bash dash; do
		command -v $sh >/dev/null || continue
		rm -rf state && mkdir state
		ck CKPTCACHE_SSD_DIR="$T/state" -- $sh -c 'echo q > ck/d.bin; exec "$1" -c "
import os
open(\"ck/out.bin\", \"w\").write(\"hello\")
print(os.getpid())
"' sh "$PY" >out.txt 2>err.txt || fail "$sh then exec: exit status $?$(last_error)"
		cat err.txt
		grep -q 'ckptcache:' err.txt && fail "$sh then exec: a message:$(first_error 'ckptcache:')"
		[ "$(cat ck/d.bin)" = q ] || fail "$sh then exec: ck/d.bin holds '$(cat ck/d.bin)'"
		[ "$(cat ck/out.bin)" = hello ] || fail "$sh then exec: ck/out.bin holds '$(cat ck/out.bin)'"
		local left
		left=$(ls state/ckptcache-* 2>/dev/null | grep "\.$(cat out.txt)\." )
		[ -z "$left" ] || fail "$sh then exec: left behind: $left"
	done
}

# A fork after the cache started costs the child no more page faults than
# without the library (its atfork handlers touch only what they change),
# and the child does not inherit the cache's host tier (the parent's next
# writes into it would meet copy-on-write faults, and each fork copied its
# page tables). The checkpoint is checked at its real path.
fork_cost() {
	need_helper
	local with without
	without=$(plain "$HELPER" forkcost "$T/plain.bin" 8M 17) || fail "the program without the library"
	with=$(ck CKPTCACHE_HOST_CACHE=256M -- "$HELPER" forkcost "$T/ck/f.bin" 8M 17) ||
		fail "the program under the library$(last_error)"
	echo "without: $without"
	echo "with:    $with"
	local wf cf cv pv
	wf=$(sed -n 's/.*child_minflt=\([0-9]*\).*/\1/p' <<<"$without")
	cf=$(sed -n 's/.*child_minflt=\([0-9]*\).*/\1/p' <<<"$with")
	cv=$(sed -n 's/.*child_vm_kib=\([0-9]*\).*/\1/p' <<<"$with")
	pv=$(sed -n 's/.*parent_vm_kib=\([0-9]*\).*/\1/p' <<<"$with")
	[ -n "$wf" ] && [ -n "$cf" ] && [ -n "$cv" ] && [ -n "$pv" ] || fail "unreadable output"
	# (a sanitizer's build of the library touches its shadow memory in the
	# fork handlers too: 78 to 81 faults under ASan+UBSan, 53 to 56 without)
	local slack=64
	[ "$PRELOAD" = "$LIB" ] || slack=96
	[ "$cf" -le $((wf + slack)) ] ||
		fail "the child took $cf page faults in its fork, $wf without the library"
	# (the tier may be given less than 256 MiB on a loaded machine)
	[ $((pv - cv)) -ge $((64 * 1024)) ] ||
		fail "the child's address space is $cv KiB, the parent's $pv KiB: the host tier was inherited"
	run_ok "the checkpoint at its real path" plain "$HELPER" check "$T/ck/f.bin" 8M 17
}

# A shell preloaded as a job script is (ckptcache run): each child it
# forks steps through the library's fork and exec wrappers before its new
# program. Nothing they call is looked up in the child (a lookup walks the
# loader's symbol tables, whose pages each child faults in again): the
# parent looks them up once, at its first fork. The loop runs programs
# that run the library, cat from a checkpoint the shell's first child
# wrote, with redirections, and a program that does not exist (its exec
# fails: 127, as without it), first as it comes, then while another
# process holds a checkpoint (a child then looks in the node's table for
# what it opens); then with the library loaded and no pattern. The bytes
# are compared. (A program that will not run the library is not in the
# loop: while any process of the node holds checkpoints, as other cases'
# do, its start asks them to publish, and that child looks up the calls
# that talk to them.)
children_lookups() { # LOG SHELLPID: the library's lookups by other pids
	awk -v me="$2" -v lib="$(basename "$LIB")" '$1 != me":" && index($0, "binding file") && index($0, lib) &&
		!/__asan|__ubsan|__sanitizer|__tsan/' "$1"
}

children_look_up_nothing() {
	need_shell bash
	need_helper
	randfile src.bin 70001
	local out shell round script
	for round in first held; do
		script="
			set -e
			cat src.bin > ck/a.bin
			for i in 1 2 3; do
				/bin/true
				cat ck/a.bin > out_\$i.bin
				rc=0; /nonexistent/program 2>/dev/null || rc=\$?
				[ \$rc = 127 ]
			done
			echo \"shell=\$\$\""
		local writer=
		if [ $round = held ]; then
			held_by_another ck/held.bin $'held by another process\n' 1000 3
			writer=$HOLDER
		fi
		out=$(ck LD_DEBUG=bindings LD_DEBUG_OUTPUT="$T/ld-$round" -- bash -c "$script") ||
			fail "$round: the script failed$(last_error)"
		shell=${out#shell=}
		[ -s "$T/ld-$round.$shell" ] || fail "$round: no loader output for the shell (pid $shell)"
		children_lookups "$T/ld-$round.$shell" "$shell" >child-lookups.txt
		[ ! -s child-lookups.txt ] || fail "$round: forked children looked up $(wc -l <child-lookups.txt) symbols" \
			"before their new program: $(head -3 child-lookups.txt | sed 's/.*normal symbol//' | tr '\n' ' ')"
		for i in 1 2 3; do
			same src.bin out_$i.bin "$round: cat from the checkpoint, child $i"
		done
		same src.bin ck/a.bin "$round: the checkpoint at its real path"
		[ -z "$writer" ] || wait "$writer" || fail "the holder failed$(last_error)"
	done
	# the same with the library loaded and no pattern (it does nothing then)
	out=$(ck LD_DEBUG=bindings LD_DEBUG_OUTPUT="$T/ld0" -- env -u CKPTCACHE_PATHS bash -c \
		'for i in 1 2 3; do /bin/true; done; echo "shell=$$"') || fail "the loop without a pattern failed"
	shell=${out#shell=}
	[ -s "$T/ld0.$shell" ] || fail "no loader output for the shell (pid $shell) in $T/ld0.$shell"
	children_lookups "$T/ld0.$shell" "$shell" >child-lookups.txt
	[ ! -s child-lookups.txt ] ||
		fail "without a pattern, forked children looked up $(wc -l <child-lookups.txt) symbols: $(head -3 child-lookups.txt)"
}

case_add children/exec-after-write exec_after_write
case_add children/fork-cost fork_cost
case_add_waits children/children-look-up-nothing children_look_up_nothing
case_add children/bash-redirections shell_redirections bash
case_add children/dash-redirections shell_redirections dash
case_add children/bash-here-strings bash_here_strings
case_add children/dash-vfork dash_vfork
case_add children/python-subprocess python_subprocess
case_add children/fork-while-a-thread-reads fork_while_a_thread_reads
case_add children/fork-while-a-thread-writes fork_while_a_thread_writes
case_add children/fork-while-the-cache-opens fork_while_the_cache_opens
case_add children/forked-child-rewrites forked_child_rewrites 1
case_add children/forked-child-stats forked_child_stats
# the child's ask is answered by a publication while the flusher is still
# filling its own copy of the same version; a slow rename(2) (named
# temporary files) holds that copy's commit open while the child writes
case_add children/forked-child-rewrites-during-flush forked_child_rewrites 128 300000 3
case_add children/untagged-spelling untagged_spelling
case_add children/system-reads-new-version system_reads_new_version
case_add children/link-current-version link_current_version
case_add_waits children/other-process-reads other_process_reads
case_add_waits children/stat-only-sees-held stat_only_sees_held
case_add children/holder-killed holder_killed
# the table is the node's: entries another case's processes hold past its
# front make every process search the back, so this one runs alone
case_add_alone children/many-held-memory many_held_memory
case_add_waits children/many-held many_held
case_add children/spawn-file-actions spawn_file_actions

# A checkpoint the parent closed but has not published yet (each rename
# that publishes takes 1.5 s), read by a new program that will not run the
# library: its environment drops it (env -u, a subprocess given another
# environment), another configuration (other patterns), a static program,
# through subprocess (vfork), system(), posix_spawn. The parent publishes
# it first, whichever way the child starts. A child that runs the library
# asks for what it reads instead, so a spawn of a program that reads
# nothing does not wait for the publication.
unasking_children() {
	local stat=none
	if printf '%s\n' '#include <stdio.h>' \
		'int main(int c, char **v) { FILE *f = fopen(v[1], "rb"); char b[65536]; size_t n;' \
		'  if (!f) return 3; while ((n = fread(b, 1, sizeof b, f)) > 0) fwrite(b, 1, n, stdout);' \
		'  return 0; }' >stcat.c && gcc -static -O2 -o stcat stcat.c 2>/dev/null; then
		stat=$PWD/stcat
	fi
	SLOW_US=1500000 SLOWFS_OPS=rename ck -- "$PY" -c '
import hashlib, os, subprocess, sys, time
stat = sys.argv[1]
plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
other = dict(os.environ, CKPTCACHE_PATHS="/nowhere/*.bin")
def data(name):
    return hashlib.sha256(name.encode()).digest() * (1 << 16)
def write(name):
    with open("ck/" + name, "wb") as f:
        f.write(data(name))
def check(name, got, how):
    assert got == data(name), "%s read %d bytes of another version" % (how, len(got))
def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, check=True, **kw).stdout
names = ["t.bin", "lib.bin", "envu.bin", "plain.bin", "other.bin", "static.bin", "sys.bin",
         "sysenv.bin", "spawn.bin", "spawnstatic.bin"]
for n in names:
    write(n)
t = time.monotonic()
subprocess.run(["true"], check=True)
took = time.monotonic() - t
assert took < 1.0, "a spawn of true waited %.2f s for the publication" % took
check("lib.bin", run(["cat", "ck/lib.bin"]), "cat run with the library")
check("envu.bin", run(["env", "-u", "LD_PRELOAD", "cat", "ck/envu.bin"]), "env -u LD_PRELOAD cat")
check("plain.bin", run(["cat", "ck/plain.bin"], env=plain), "cat given no LD_PRELOAD")
check("other.bin", run(["cat", "ck/other.bin"], env=other), "cat given other patterns")
if stat != "none":
    check("static.bin", run([stat, "ck/static.bin"]), "a static program")
os.system("cat ck/sys.bin > sys.out")
check("sys.bin", open("sys.out", "rb").read(), "system(cat)")
os.system("env -u LD_PRELOAD cat ck/sysenv.bin > sysenv.out")
check("sysenv.bin", open("sysenv.out", "rb").read(), "system(env -u LD_PRELOAD cat)")
fd = os.open("spawn.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
pid = os.posix_spawn("/bin/cat", ["cat", "ck/spawn.bin"], plain, file_actions=[(os.POSIX_SPAWN_DUP2, fd, 1)])
assert os.waitpid(pid, 0)[1] == 0
os.close(fd)
check("spawn.bin", open("spawn.out", "rb").read(), "posix_spawn of cat given no LD_PRELOAD")
if stat != "none":
    fd = os.open("spawnstatic.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pid = os.posix_spawn(stat, ["stcat", "ck/spawnstatic.bin"], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, fd, 1)])
    assert os.waitpid(pid, 0)[1] == 0
    os.close(fd)
    check("spawnstatic.bin", open("spawnstatic.out", "rb").read(), "posix_spawn of a static program")
' "$stat" || fail "a new program read an unpublished checkpoint$(last_error)"
	local n
	for n in t lib envu plain other static sys sysenv spawn spawnstatic; do
		"$PY" -c 'import hashlib, sys; sys.stdout.buffer.write(hashlib.sha256(sys.argv[1].encode()).digest() * (1 << 16))' \
			"$n.bin" >"$n.ref"
		same "$n.ref" "ck/$n.bin" "after exit, $n.bin"
	done
	# a forked child that execs such a program, a grandchild xargs runs,
	# a program a reader runs after it took another user, and a pattern
	# relative to the folder a subprocess does not start in
	[ "$(id -u)" = 0 ] && chmod 755 "$T" "$T/ck"
	SLOW_US=1500000 SLOWFS_OPS=rename ck CKPTCACHE_PATHS="ck/**" -- "$PY" -c '
import hashlib, os, subprocess, sys
stat = sys.argv[1]
def data(name):
    return hashlib.sha256(name.encode()).digest() * (1 << 16)
names = ["fork.bin", "xargs.bin", "cwd.bin", "user.bin"]
for n in names:
    with open("ck/" + n, "wb") as f:
        f.write(data(n))
def check(name, got, how):
    assert got == data(name), "%s read %d bytes of another version" % (how, len(got))
if stat != "none":
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.execv(stat, [stat, "ck/fork.bin"])
    os.close(w)
    got = b""
    while True:
        b = os.read(r, 1 << 20)
        if not b:
            break
        got += b
    os.waitpid(pid, 0)
    check("fork.bin", got, "fork then exec of a static program")
    os.system("echo ck/xargs.bin | xargs %s > xargs.out" % stat)
    check("xargs.bin", open("xargs.out", "rb").read(), "a static program xargs ran")
    check("cwd.bin", subprocess.run(["cat", os.path.abspath("ck/cwd.bin")], cwd="/", stdout=subprocess.PIPE,
                                    check=True).stdout, "cat started in another folder (relative patterns)")
# the error paths: a program that is not there, a file that is not a
# program (the checks before the exec leave its errno as it is)
for cmd, err in ((["no-such-program-here"], FileNotFoundError), (["ck/cwd.bin"], PermissionError)):
    try:
        subprocess.run(cmd, check=True)
        raise SystemExit("%s started" % cmd)
    except err:
        pass
try:
    os.posix_spawn("/no/such/program", ["x"], {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    raise SystemExit("posix_spawn of a missing program succeeded")
except FileNotFoundError:
    pass
if os.getuid() == 0 and subprocess.run(["sh", "-c", "command -v setpriv"], stdout=subprocess.DEVNULL).returncode == 0:
    os.system("setpriv --reuid=65534 --regid=65534 --clear-groups cat ck/user.bin > user.out")
    check("user.bin", open("user.out", "rb").read(), "cat run as another user by setpriv")
' "$stat" || fail "a new program read an unpublished checkpoint (second part)$(last_error)"
	[ "$stat" != none ] || echo "no static C library here: the static programs were not tried"
	return 0
}
case_add_waits children/unasking-children unasking_children

# Children started while checkpoints are open for writing (a thread's
# checkpoint in progress while the main loop runs a tool; Python's
# subprocess uses vfork): the open checkpoints stay in the cache, since a
# new program cannot see a close-on-exec descriptor, and each opening of
# their real files takes 1.5 s here. A child given one after all (a
# subprocess's stdout, pass_fds, dup2 or a cleared close-on-exec flag in a
# vfork child written in C) writes into the same open file as its parent,
# at the offset they share, and the number stays close-on-exec; dprintf
# writes there, in the parent and in a vfork child; a program without the
# library reads what the parent's open checkpoint holds so far.
spawn_keeps_writers() {
	cat >vf.c <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>
/* one vfork child given the open checkpoint fd in one way */
static void child(int fd, int how)
{
	char cmd[160];
	int st;
	pid_t p = vfork();
	if (p == 0) {
		switch (how) {
		case 0: /* onto its standard output */
			dup2(fd, 1);
			execlp("echo", "echo", "dup2", (char *)0);
			break;
		case 1: /* its close-on-exec flag cleared */
		case 2:
			if (how == 1)
				fcntl(fd, F_SETFD, 0);
			else
				ioctl(fd, FIONCLEX);
			snprintf(cmd, sizeof cmd, "echo %s >&%d", how == 1 ? "setfd" : "fionclex", fd);
			execlp("sh", "sh", "-c", cmd, (char *)0);
			break;
		case 3: /* looked at, then onto its standard output: the number
			 * itself stays close-on-exec */
			if (fcntl(fd, F_GETFD) != FD_CLOEXEC)
				_exit(3);
			dup2(fd, 1);
			snprintf(cmd, sizeof cmd, "if [ -e /proc/$$/fd/%d ]; then echo inherited; else echo closed; fi", fd);
			execlp("sh", "sh", "-c", cmd, (char *)0);
			break;
		case 4: /* written with dprintf, then _exit */
			_exit(dprintf(fd, "dprintf %s\n", "child") == 14 ? 0 : 4);
		}
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "child %d: status %d\n", how, st);
		exit(1);
	}
}
int main(int c, char **v)
{
	char path[4096];
	/* each way on a checkpoint of its own, open and cached, written with
	 * dprintf before and after its child */
	for (int how = 0; c == 2 && how < 5; how++) {
		snprintf(path, sizeof path, "%s%d.txt", v[1], how);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || dprintf(fd, "c%d\n", how) != 3) {
			perror(path);
			return 2;
		}
		child(fd, how);
		if (dprintf(fd, "p%d\n", how) != 3 || close(fd) != 0) {
			perror(path);
			return 3;
		}
	}
	return c == 2 ? 0 : 2;
}
C
	gcc -O2 -o vf vf.c || fail "the vfork program did not compile"
	SLOW_US=1500000 SLOWFS_OPS=open ck -- "$PY" -c '
import os, subprocess, time
f = open("ck/w.bin", "wb")
f.write(b"a" * (1 << 20))
f.flush()
t = time.monotonic()
for i in range(3):
    subprocess.run(["true"], check=True)
took = time.monotonic() - t
assert took < 1.0, "three spawns while a checkpoint was open for writing took %.2f s" % took
f.write(b"b" * (1 << 20))
f.close()
assert open("ck/w.bin", "rb").read() == b"a" * (1 << 20) + b"b" * (1 << 20), "w.bin read back differs"
with open("ck/out.txt", "wb") as g:
    g.write(b"parent\n")
    g.flush()
    subprocess.run(["sh", "-c", "echo child"], stdout=g, check=True)
    g.write(b"parent again\n")
    g.flush()
    subprocess.run(["sh", "-c", "echo passed >&%d" % g.fileno()], pass_fds=(g.fileno(),), check=True)
    g.write(b"last\n")
got = open("ck/out.txt", "rb").read()
assert got == b"parent\nchild\nparent again\npassed\nlast\n", got
# a program without the library reads what the open checkpoint holds so far
with open("ck/open.txt", "wb") as h:
    h.write(b"hello\n")
    h.flush()
    r = subprocess.run(["cat", "ck/open.txt"], env={"PATH": os.environ["PATH"]}, capture_output=True, check=True)
    assert r.stdout == b"hello\n", "cat without the library read %r" % r.stdout
' || fail "Python: spawns while checkpoints were open$(last_error)"
	ck -- ./vf ck/vf || fail "vfork children given an open checkpoint$(last_error)"
	printf 'parent\nchild\nparent again\npassed\nlast\n' >out.ref
	"$PY" -c 'import sys; sys.stdout.buffer.write(b"a" * (1 << 20) + b"b" * (1 << 20))' >w.ref
	same w.ref ck/w.bin "the checkpoint written across the spawns"
	same out.ref ck/out.txt "a checkpoint written by Python and its children"
	local how said=(dup2 setfd fionclex closed "dprintf child")
	for how in 0 1 2 3 4; do
		printf 'c%d\n%s\np%d\n' "$how" "${said[$how]}" "$how" >"vf$how.ref"
		same "vf$how.ref" "ck/vf$how.txt" "a checkpoint written by a C program and its vfork child ($how)"
	done
}
case_add_waits children/spawn-keeps-writers spawn_keeps_writers

# While a vfork child that was given a cached checkpoint has not used it
# yet, another thread of the parent closes that descriptor and opens
# another checkpoint, which gets the same number: the child's use of its
# number never reaches the other checkpoint (it writes into the one it was
# given, or fails); and dprintf of a conversion that fails writes what
# came before it, as without the library.
vfork_number_reused() {
	cat >race.c <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static int to_b[2], to_child[2], fd;
static void *other(void *arg)
{
	char c;
	if (read(to_b[0], &c, 1) != 1)
		return NULL;
	close(fd);
	int b = open(arg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	/* (a publication of the library's may hold the lowest number an
	 * instant, ckptcache(7): then the child's number names nothing) */
	if (b != fd)
		fprintf(stderr, "b at %d, not %d\n", b, fd);
	if (b < 0 || write(b, "B-parent\n", 9) != 9)
		fprintf(stderr, "b not written\n");
	if (write(to_child[1], "x", 1) != 1)
		return NULL;
	return (void *)(long)b;
}
int main(int c, char **v)
{
	pthread_t t;
	void *b;
	int st;
	if (c != 3 || pipe(to_b) || pipe(to_child))
		return 2;
	fd = open(v[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, "A-parent\n", 9) != 9 || pthread_create(&t, NULL, other, v[2]))
		return 2;
	pid_t p = vfork();
	if (p == 0) {
		char x;
		if (write(to_b[1], "x", 1) != 1 || read(to_child[0], &x, 1) != 1)
			_exit(3);
		dup2(fd, 1);
		execlp("echo", "echo", "A-child", (char *)0);
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) != p || pthread_join(t, &b))
		return 2;
	fprintf(stderr, "the child: status %d\n", st);
	return close((int)(long)b) ? 4 : 0;
}
C
	gcc -O2 -pthread -o race race.c || fail "the program did not compile"
	ck -- ./race ck/a ck/b || fail "the vfork program failed$(last_error)"
	printf 'B-parent\n' >b.ref
	same b.ref ck/b "the checkpoint opened at the number the vfork child was given"
	head -c 9 ck/a | cmp -s - <(printf 'A-parent\n') || fail "the child's checkpoint lost its first bytes"
	cat >dp.c <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <wchar.h>
int main(int c, char **v)
{
	int fd = open(v[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	/* no multibyte conversion in the C locale: EILSEQ after "before " */
	int n = dprintf(fd, "before %ls after\n", L"\x4e2d\x6587");
	if (fd < 0 || n != -1 || dprintf(fd, "next\n") != 5)
		return 1;
	return close(fd) ? 2 : 0;
}
C
	gcc -O2 -o dp dp.c || fail "the dprintf program did not compile"
	mkdir -p plainrun
	plain ./dp plainrun/d.txt || fail "dprintf without the library"
	LC_ALL=C ck -- ./dp ck/d.txt || fail "dprintf with the library$(last_error)"
	same plainrun/d.txt ck/d.txt "dprintf of a failing conversion"
}
case_add children/vfork-number-reused vfork_number_reused


# as_unprivileged: under root (which passes every permission check), sets
# AS_USER to the command prefix that runs a program as uid 65534 and makes
# the case's folders and the shims reachable for it; empty for another user.
AS_USER=()
as_unprivileged() {
	AS_USER=()
	[ "$(id -u)" = 0 ] || return 0
	command -v setpriv >/dev/null || note "no setpriv to run the program as another user"
	AS_USER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	chmod 755 "$T"
	chmod 777 "$T/ck"
	[ -z "$SLOWFS" ] || chmod 755 "$(dirname "$SLOWFS")" "$SLOWFS"
}

# A program writes its results into a folder and then makes the folder
# read-only (an archiving step: chmod a-w, or fchmod of the folder) while
# checkpoints in it are closed but not published (each publication's rename
# takes 0.5 s): they reach their real paths, and an unlink in the folder
# then fails with EACCES as without the library. Run as an unprivileged
# user (root passes every permission check).
folder_made_read_only() {
	as_unprivileged
	local as=("${AS_USER[@]}")
	mkdir -m 777 ssd
	cat >ro.py <<'PY'
import errno, os, sys
def body(d, i):
    return bytes([65 + i]) * (1 << 20)
for d, how in (("ck/res", "chmod"), ("ck/fres", "fchmod"), ("ck/pres", "proc")):
    os.mkdir(d)
    for i in range(4):
        with open("%s/ck%d.bin" % (d, i), "wb") as f:
            f.write(body(d, i))
    if how == "chmod":
        os.chmod(d, 0o555)
    elif how == "proc":
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        os.chmod("/proc/self/fd/%d" % fd, 0o555)
        os.close(fd)
    else:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        os.fchmod(fd, 0o555)
        os.close(fd)
    try:
        os.unlink(d + "/ck3.bin")
        print("%s: unlink succeeded" % d)
    except OSError as e:
        print("%s: unlink %s" % (d, errno.errorcode[e.errno]))
    print(d, sorted(os.listdir(d)))
# a folder whose search permission is taken away: its checkpoint is not
# looked at, opened or found accessible, as the kernel says
d = "ck/sres"
os.mkdir(d)
with open(d + "/c.bin", "wb") as f:
    f.write(b"z" * 300000)
os.chmod(d, 0o666)
for what, fn in (("stat", lambda: os.stat(d + "/c.bin").st_size), ("open", lambda: len(open(d + "/c.bin", "rb").read())),
                 ("access", lambda: os.access(d + "/c.bin", os.R_OK))):
    try:
        print(what, fn())
    except OSError as e:
        print(what, errno.errorcode[e.errno])
os.chmod(d, 0o755)
PY
	mkdir plainrun && chmod 777 plainrun && cp ro.py plainrun/ &&
		(cd plainrun && mkdir -m 777 ck && plain "${as[@]}" "$PY" ro.py >../want.txt) ||
		fail "the program without the library"
	mkdir -p "$T/st.ro" && chmod 777 "$T/st.ro"
	SLOW_US=500000 SLOWFS_OPS=rename ck CKPTCACHE_STATS="$T/st.ro/%p.json" CKPTCACHE_SSD_DIR="$T/ssd" -- \
		"${as[@]}" "$PY" ro.py >got.txt ||
		fail "the program with the library$(last_error)"
	ls "$T"/st.ro/*.json >/dev/null 2>&1 || fail "the library did not run in the program (no statistics)"
	outputs_match want.txt got.txt
	grep -q 'ckptcache: error' "$T/.log" && fail "an error:$(first_error 'ckptcache: error')"
	local d i
	for d in res fres pres; do
		for i in 0 1 2 3; do
			"$PY" -c 'import sys; sys.stdout.buffer.write(bytes([65 + int(sys.argv[1])]) * (1 << 20))' $i >ref.$i
			same ref.$i ck/$d/ck$i.bin "after exit, $d/ck$i.bin"
		done
	done
	chmod -R u+w ck plainrun 2>/dev/null
	return 0
}
case_add_waits names/folder-made-read-only folder_made_read_only

# The mode of a checkpoint the cache holds is judged as the kernel judges
# the real file's, for a user other than root: a file made with mode 0 is
# not opened for reading, access(2) and faccessat(2) answer from the mode
# and owner, a file made read-only is not opened for writing.
cached_permissions() {
	as_unprivileged
	local as=("${AS_USER[@]}")
	mkdir -m 777 ssd plainrun plainrun/ck
	cat >perm.py <<'PY'
import errno, os
def E(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
for i in range(3):
    with open("ck/pre%d.bin" % i, "wb") as f:
        f.write(b"x" * (2 << 20))
fd = os.open("ck/m0.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0)
os.write(fd, b"secret" * 1000)
os.close(fd)
print("read mode 0:", E(lambda: open("ck/m0.bin", "rb").read()))
print("access mode 0:", os.access("ck/m0.bin", os.R_OK), os.access("ck/m0.bin", os.W_OK),
      os.access("ck/m0.bin", os.F_OK), os.access("ck/m0.bin", os.R_OK, effective_ids=True))
with open("ck/ro.bin", "wb") as f:
    f.write(b"data" * 100000)
os.chmod("ck/ro.bin", 0o400)
print("r+ of 0400:", E(lambda: open("ck/ro.bin", "r+b")))
print("read of 0400:", E(lambda: open("ck/ro.bin", "rb").read(3)))
print("access 0400:", os.access("ck/ro.bin", os.R_OK), os.access("ck/ro.bin", os.W_OK),
      os.access("ck/ro.bin", os.X_OK))
os.chmod("ck/ro.bin", 0o040)
print("read of 0040 (group only):", E(lambda: open("ck/ro.bin", "rb").read(3)))
os.chmod("ck/m0.bin", 0o600)
print("read after chmod 600:", E(lambda: open("ck/m0.bin", "rb").read()))
# a write by an unprivileged user clears the set-user-ID and set-group-ID bits
fd = os.open("ck/suid.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
os.fchmod(fd, 0o6755)
os.write(fd, b"x" * 5000)
os.close(fd)
print("set-id bits after a write:", oct(os.stat("ck/suid.bin").st_mode))
PY
	(cd plainrun && plain "${as[@]}" "$PY" ../perm.py >../want.txt) || fail "the program without the library"
	mkdir -p "$T/st.perm" && chmod 777 "$T/st.perm"
	ck CKPTCACHE_STATS="$T/st.perm/%p.json" CKPTCACHE_SSD_DIR="$T/ssd" -- "${as[@]}" "$PY" perm.py >got.txt ||
		fail "the program with the library$(last_error)"
	ls "$T"/st.perm/*.json >/dev/null 2>&1 || fail "the library did not run in the program (no statistics)"
	outputs_match want.txt got.txt
	chmod 644 ck/ro.bin plainrun/ck/ro.bin
	same plainrun/ck/m0.bin ck/m0.bin "after exit, m0.bin"
	[ "$(stat -c %a ck/suid.bin)" = "$(stat -c %a plainrun/ck/suid.bin)" ] ||
		fail "after exit, suid.bin has mode $(stat -c %a ck/suid.bin), without the library $(stat -c %a plainrun/ck/suid.bin)"
	same plainrun/ck/ro.bin ck/ro.bin "after exit, ro.bin"
	return 0
}
case_add names/cached-permissions cached_permissions

# A checkpoint's mode or owner set after an fsync (which published the
# version) and before its close, then the file rewritten with O_TRUNC: the
# kernel's truncation keeps the file's mode and owner, and so must the
# rewrite (the publication that was to bring them was cancelled by the
# rewrite, or the version handed to its real file in place, without them:
# a file made private with 0600 became 0644 again, 19 runs in 20).
names_mode_after_fsync_rewrite() {
	local aside
	cat >mf.py <<'PY'
import os, sys
root = os.geteuid() == 0
for i in range(3):
    with open(f"ck/warm{i}.bin", "wb") as f:
        f.write(b"w" * (2 << 20))
for k in range(8):
    for how in ("mode", "owner") if root else ("mode",):
        p = f"ck/{how}{k}.bin"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"abc" * (k + 1))
        if k % 4 != 3:
            os.fsync(fd)
        if how == "mode":
            os.fchmod(fd, 0o600 if k % 2 else 0o640)
        else:
            os.fchown(fd, 1234 + k, 4321 + k)
        os.close(fd)
        st = os.stat(p)
        before = (oct(st.st_mode), st.st_uid, st.st_gid)
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        st = os.fstat(fd)
        opened = (oct(st.st_mode), st.st_uid, st.st_gid, st.st_size)
        os.write(fd, b"new" * (k + 2))
        os.close(fd)
        st = os.stat(p)
        print(p, before, opened, (oct(st.st_mode), st.st_uid, st.st_gid, st.st_size))
PY
	mkdir -p plainrun/ck
	(cd plainrun && plain "$PY" ../mf.py >../want.txt) || fail "the program without the library"
	for aside in off auto; do
		rm -rf ck && mkdir ck
		ck CKPTCACHE_STEP_ASIDE=$aside -- "$PY" mf.py >got.txt || fail "the program with the library (step aside $aside)$(last_error)"
		outputs_match want.txt got.txt
		(cd plainrun/ck && stat -c '%n %a %u %g %s' ./*.bin) >want.stat
		(cd ck && stat -c '%n %a %u %g %s' ./*.bin) >got.stat
		cmp -s want.stat got.stat ||
			fail "after exit (step aside $aside), the real files' modes, owners or sizes differ from the program's without the library: $(diff want.stat got.stat | grep '^>' | head -4 | tr '\n' ' ')"
		for f in plainrun/ck/*.bin; do
			same "$f" "ck/$(basename "$f")" "after exit (step aside $aside), $(basename "$f")"
		done
	done
}
case_add names/mode-after-fsync-rewrite names_mode_after_fsync_rewrite

# A root process that writes a checkpoint of mode 0600 and then takes
# another effective user (seteuid, and a raw setresuid system call through
# syscall(), which changes the calling thread alone) is refused its read,
# as by the kernel: the library asks the kernel for its ids again after
# either change.
ids_changed_in_process() {
	[ "$(id -u)" = 0 ] || { note "not root: no other user to take"; return 0; }
	local nr
	case $(uname -m) in
	x86_64) nr=117 ;;
	aarch64) nr=147 ;;
	*) note "no setresuid number known for $(uname -m)"; return 0 ;;
	esac
	mkdir -p plainrun/ck
	cat >ids.py <<PY
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def E(f):
    try:
        return "ok %d" % len(f())
    except OSError as e:
        return errno.errorcode[e.errno]
def rd():
    with open("ck/a.bin", "rb") as f:
        return f.read()
fd = os.open("ck/a.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, b"s" * 3000)
os.close(fd)
print("as root:", E(rd))
libc.syscall(ctypes.c_long($nr), ctypes.c_long(-1), ctypes.c_long(65534), ctypes.c_long(-1))
print("after a raw setresuid:", os.geteuid(), E(rd))
libc.syscall(ctypes.c_long($nr), ctypes.c_long(-1), ctypes.c_long(0), ctypes.c_long(-1))
print("back to root:", os.geteuid(), E(rd))
os.seteuid(65534)
print("after seteuid:", E(rd))
os.seteuid(0)
print("back again:", E(rd))
PY
	(cd plainrun && plain "$PY" ../ids.py >../want.txt) || fail "the program without the library"
	ck -- "$PY" ids.py >got.txt || fail "the program with the library$(last_error)"
	grep -q "after a raw setresuid: 65534 EACCES" want.txt || fail "without the library: $(tr '\n' ' ' <want.txt)"
	outputs_match want.txt got.txt
	same plainrun/ck/a.bin ck/a.bin "after exit, a.bin"
}
case_add names/ids-changed-in-process ids_changed_in_process

# Python lines that write three checkpoints of 2 MiB into the folder d
# first, for the cases below whose program is given that folder.
PY_PRE='for i in range(3):
    with open(os.path.join(d, "pre%d.bin" % i), "wb") as f:
        f.write(b"p" * (2 << 20))'

# stat(2) of checkpoints the cache holds counts the blocks a file system of
# 4 KiB blocks gives them, as the real files say (du, a sparse-file check):
# sizes around a block, compared with the program run without the library.
cached_blocks() {
	same_output "st_blocks of cached checkpoints" '
import os, sys
d = sys.argv[1]
'"$PY_PRE"'
for n in (0, 1, 4095, 4096, 4097, (1 << 20) + 1, 3 << 20):
    p = os.path.join(d, "b%d.bin" % n)
    with open(p, "wb") as f:
        f.write(b"z" * n)
    print(n, os.stat(p).st_size, os.stat(p).st_blocks)
'
}
case_add names/cached-blocks cached_blocks

# A name longer than NAME_MAX in a tagged folder, once the cache runs:
# ENAMETOOLONG as without the library, by path and at the folder's
# descriptor, and nothing left in a rescue file (the longest name is taken).
names_too_long() {
	same_output "names of 255, 256 and 300 bytes" '
import os, sys
d = sys.argv[1]
'"$PY_PRE"'
for n in ("y" * 255, "y" * 256, "z" * 300):
    p = os.path.join(d, n)
    try:
        with open(p, "wb") as f:
            f.write(b"data")
        print(len(n), "written", os.stat(p).st_size, open(p, "rb").read())
    except OSError as e:
        print(len(n), "errno", e.errno)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.close(os.open(n[:-1] + "x", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        print(len(n), "created at the folder")
    except OSError as e:
        print(len(n), "at the folder: errno", e.errno)
    os.close(fd)
'
	[ "$(ls "$T/ck" | wc -l)" = "$(ls "$T/plainrun" | wc -l)" ] ||
		fail "$(ls "$T/ck" | wc -l) files with the library, $(ls "$T/plainrun" | wc -l) without"
	grep -q 'rescue' "$T/.log" 2>/dev/null && fail "a rescue file:$(first_error rescue)"
	return 0
}
case_add names/too-long names_too_long

# freopen of a tagged stream, as the C library does it for a file stream:
# a change of mode alone (NULL path: "w" then "r" reads what it wrote, "a"
# appends, "w" truncates, "r+" reads and writes) and a reopen onto another
# checkpoint with another mode; the output and the files compared with the
# program run without the library.
freopen_modes() {
	cat >fr.c <<'C'
#include <stdio.h>
#include <string.h>
static void show(const char *what, FILE *f)
{
	char buf[256] = { 0 };
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	printf("%s: %s, read %zu [%s]\n", what, f ? "open" : "NULL", n, buf);
}
int main(int argc, char **argv)
{
	char p[4096], q[4096];
	static char big[3 << 20];
	memset(big, 'p', sizeof(big));
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/pre%d.bin", argv[1], i);
		FILE *f = fopen(p, "w");
		fwrite(big, 1, sizeof(big), f);
		fclose(f);
	}
	snprintf(p, sizeof(p), "%s/a.bin", argv[1]);
	FILE *f = fopen(p, "w");
	fputs("payload", f);
	f = freopen(NULL, "r", f);
	show("w then r", f);
	f = freopen(NULL, "a", f);
	fputs(" and more", f);
	f = freopen(NULL, "r+", f);
	show("a then r+", f);
	fseek(f, 0, SEEK_SET);
	fputs("PAY", f);
	f = freopen(NULL, "r", f);
	show("r+ write then r", f);
	snprintf(q, sizeof(q), "%s/b.bin", argv[1]);
	FILE *g = fopen(q, "w");
	fputs("other", g);
	g = freopen(p, "r", g);
	show("b as w, then a.bin as r", g);
	fclose(g);
	f = freopen(NULL, "w", f);
	fputs("rewritten", f);
	fclose(f);
	return argc > 2;
}
C
	gcc -O2 -o fr fr.c || fail "the freopen program did not compile"
	program_outputs_match ./fr "$T/plainrun" "$T/ck"
	same plainrun/a.bin ck/a.bin "after exit, a.bin"
	same plainrun/b.bin ck/b.bin "after exit, b.bin"
}
case_add stdio/freopen-modes freopen_modes

# poll, select and epoll on checkpoint descriptors answer as for regular
# files (always ready for reading and writing, never exceptional; epoll
# refuses them with EPERM), beside a pipe that is and is not ready: the
# output compared with the program run without the library.
poll_select_epoll() {
	same_output "poll, select and epoll of checkpoint descriptors" '
import os, select, sys
d = sys.argv[1]
'"$PY_PRE"'
f = open(os.path.join(d, "a.bin"), "wb"); f.write(b"x" * 100); f.flush()
g = open(os.path.join(d, "pre1.bin"), "rb")
r, w = os.pipe()
p = select.poll()
p.register(f.fileno(), select.POLLIN | select.POLLOUT)
p.register(g.fileno(), select.POLLIN)
p.register(r, select.POLLIN)
print("poll:", sorted(p.poll(0)) == sorted([(f.fileno(), select.POLLIN | select.POLLOUT), (g.fileno(), select.POLLIN)]))
os.write(w, b"z")
print("poll with pipe:", len(p.poll(1000)))
print("select:", [len(x) for x in select.select([g, r], [f], [], 0)])
os.read(r, 1)
print("select pipe empty:", [len(x) for x in select.select([g, r], [f], [g], 0.01)])
e = select.epoll()
try:
    e.register(f.fileno(), select.EPOLLIN)
    print("epoll: ok")
except OSError as x:
    print("epoll:", x.errno)
e.register(r, select.EPOLLIN)
print("epoll pipe:", e.poll(0))
f.close(); g.close()
'
}
case_add fdops/poll-select-epoll poll_select_epoll

# A process started as root writes a checkpoint only its owner may read,
# then takes another effective user: the checkpoint is judged as the real
# file is (the cache published it under the old identity first).
identity_change() {
	[ "$(id -u)" = 0 ] || note "not root: no other identity to take"
	chmod 755 "$T"
	same_output "a change of effective user after a checkpoint" '
import errno, os, sys
d = sys.argv[1]
'"$PY_PRE"'
p = os.path.join(d, "secret.bin")
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, b"s" * 6000)
os.close(fd)
os.seteuid(65534)
for what, fn in (("read", lambda: len(open(p, "rb").read())), ("access", lambda: os.access(p, os.R_OK, effective_ids=True))):
    try:
        print(what, fn())
    except OSError as e:
        print(what, errno.errorcode[e.errno])
os.seteuid(0)
print("back", len(open(p, "rb").read()))
'
}
case_add names/identity-change identity_change

# A program asks the kernel what a descriptor names (readlink of
# /proc/self/fd/N, as Python's and many tools' "which file is this" do) and
# changes directory by number: the checkpoint's path, and ENOTDIR for
# fchdir, as without the library (not the placeholder's root folder).
fd_names_its_file() {
	cat >fdname.c <<'C'
#define _FORTIFY_SOURCE 2
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int c, char **v)
{
	char link[64], got[PATH_MAX], want[PATH_MAX];
	int fd = open(v[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (c != 2 || fd < 0 || write(fd, "x\n", 2) != 2 || !getcwd(want, sizeof want - 64))
		return 2;
	strcat(want, "/");
	strncat(want, v[1], 60);
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, got, sizeof got - 1);
	got[n < 0 ? 0 : n] = '\0';
	printf("readlink %s\n", n > 0 && !strcmp(got, want) ? "names the file" : got);
	snprintf(link, sizeof link, "/dev/fd/%d", fd);
	n = readlinkat(AT_FDCWD, link, got, sizeof got - 1);
	got[n < 0 ? 0 : n] = '\0';
	printf("readlinkat %s\n", n > 0 && !strcmp(got, want) ? "names the file" : got);
	int r = fchdir(fd);
	printf("fchdir %d %s\n", r, r ? strerror(errno) : "");
	char *cwd = getcwd(got, sizeof got);
	printf("cwd stays %s\n", cwd && strcmp(cwd, "/") ? "yes" : "no");
	return close(fd) ? 3 : 0;
}
C
	gcc -O2 -o fdname fdname.c || fail "the program did not compile"
	program_outputs_match ./fdname plainrun/n.txt ck/n.txt
	same plainrun/n.txt ck/n.txt "the checkpoint"
	ck -- "$PY" -c '
import os
with open("ck/p.bin", "wb") as f:
    f.write(b"y")
    got = os.readlink("/proc/self/fd/%d" % f.fileno())
    assert got == os.path.realpath("ck/p.bin"), got
    os.rename("ck/p.bin", "ck/q.bin")
    got = os.readlink("/proc/self/fd/%d" % f.fileno())
    assert got == os.path.realpath("ck/q.bin"), "after a rename: " + got
' || fail "Python: readlink of a checkpoint's descriptor$(last_error)"
}
case_add fdops/fd-names-its-file fd_names_its_file

# A version renamed over a file (write f.tmp, rename it over f) that
# another process changes (each publication's open waits 200 ms). One under
# the library keeps a descriptor of the file open for appending: the
# rename is the kernel's, as the file is written in place, and the name
# holds the new version while that descriptor appends to the file it
# replaced, as without the library. One without the library appends by
# name (>>) before the version is published: the library cannot tell that
# change from a newer file, the real file keeps what it wrote, and the
# version's bytes are in the rescue file that the error names, nothing lost
# silently.
rename_over_changed() {
	cat >orch.py <<'PY'
import os, subprocess, sys
d = sys.argv[1]
prog = r"""
import os, subprocess, sys
p = sys.argv[1]
fd = None
for line in sys.stdin:
    c = line.split()
    if c[0] == "open":
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | int(c[1]), 0o644)
    elif c[0] == "write":
        os.write(fd, c[1].encode())
    elif c[0] == "close":
        os.close(fd)
    elif c[0] == "replace":
        with open(p + ".tmp", "wb") as f:
            f.write(c[1].encode())
        os.replace(p + ".tmp", p)
    print("ok", flush=True)
"""
for k, steps in (("a", ((0, f"open {os.O_TRUNC}"), (0, "write aaa"), (0, "close"), (0, f"open {os.O_APPEND}"),
                       (1, "replace NEWA"), (0, "write bbb"), (0, "close"))),
                 ("b", ((0, f"open {os.O_TRUNC}"), (0, "write old"), (0, "close"), (0, f"open {os.O_APPEND}"),
                       (0, "close"), (1, "replace NEWB"), (0, "append QQ")))):
    p = f"{d}/f{k}"
    # this program runs without the library, its two children with it
    env = dict(os.environ, LD_PRELOAD=os.environ["CKC_PRELOAD"])
    procs = [subprocess.Popen([sys.executable, "-c", prog, p], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    for who, step in steps:
        if step.startswith("append "):
            # a program no process of the library started appends by name
            with open(p, "ab") as f:
                f.write(step.split()[1].encode())
            continue
        procs[who].stdin.write(step + "\n")
        procs[who].stdin.flush()
        procs[who].stdout.readline()
    for q in procs:
        q.stdin.close()
        q.wait()
PY
	mkdir -p rescue
	SLOW_US=200000 ck SLOWFS_OPS=open CKPTCACHE_RESCUE_DIR="$T/rescue" -- \
		sh -c 'CKC_PRELOAD=$LD_PRELOAD exec env -u LD_PRELOAD "$@"' sh "$PY" orch.py "$T/ck" ||
		fail "the program with the library$(last_error)"
	[ "$(cat ck/fa)" = NEWA ] || fail "fa holds '$(cat ck/fa)', not the version renamed over it"
	! grep -l -x -q NEWA rescue/*/rescue.* 2>/dev/null || fail "the version renamed over fa went to a rescue file"
	[ "$(cat ck/fb)" = oldQQ ] || fail "fb holds '$(cat ck/fb)', not what the other program appended"
	local v r
	for v in NEWB; do
		r=$(grep -l -x "$v" rescue/*/rescue.* 2>/dev/null | head -1)
		[ -n "$r" ] || fail "no rescue file holds the renamed version $v$(first_error 'ckptcache: error')"
		grep -aq "saved in .*${r##*/}" "$T/.log" || fail "no error names the rescue file of $v ($r)"
	done
}
case_add_waits children/rename-over-changed rename_over_changed

# access, faccessat(AT_EACCESS) and euidaccess of /proc/self/fd/N of a
# cached checkpoint open for writing (mode 0600, its owner an unprivileged
# user): judged by the checkpoint, as the kernel judges the file behind the
# number (readable and writable, not executable), not by the library's
# placeholder there.
fd_number_access() {
	as_unprivileged
	local as=("${AS_USER[@]}")
	cat >fa.py <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1]
fd = os.open(d + "/a.bin", os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
os.write(fd, b"x" * 5000)
p = "/proc/self/fd/%d" % fd
for name, m in (("R", os.R_OK), ("W", os.W_OK), ("X", os.X_OK)):
    print(name, os.access(p, m), os.access(p, m, effective_ids=True), libc.euidaccess(p.encode(), m),
          libc.eaccess(("/dev/fd/%d" % fd).encode(), m))
os.close(fd)
PY
	mkdir -p plainrun && chmod 777 plainrun
	plain "${as[@]}" "$PY" fa.py "$T/plainrun" >want.txt || fail "the program without the library"
	ck -- "${as[@]}" "$PY" fa.py "$T/ck" >got.txt || fail "the program with the library$(last_error)"
	outputs_match want.txt got.txt
	same plainrun/a.bin ck/a.bin "a.bin at its real path"
}
case_add children/fd-number-access fd_number_access

# A program that keeps a checkpoint open for writing after another process
# read it (its descriptors now at the real file, announced in the in-place
# table) starts children with subprocess (vfork, then close_range of every
# number up to the limit in the child): the child's close_range looks at the
# in-place table's numbers only, not at each number up to the limit with a
# system call each (20,000 getpid calls, 20 ms a child here). Counted with
# strace: the system calls of the children, and every byte at its path.
children_vfork_close_range_after_hand_over() {
	needs_strace
	local prog='
import os, subprocess, sys
d = sys.argv[1]
for n in ("a", "b", "c"):
    with open(f"{d}/{n}.bin", "wb") as f:
        f.write(n.encode() * 100000)
f = open(f"{d}/live.bin", "wb")
f.write(b"h" * 100000)
f.flush()
subprocess.run(["cat", f"{d}/live.bin"], stdout=subprocess.DEVNULL, check=True)
for i in range(5):
    subprocess.run(["true"], check=True)
f.write(b"t" * 1000)
f.close()
print(len(open(f"{d}/live.bin", "rb").read()))
'
	mkdir -p plainrun
	plain "$PY" -c "$prog" plainrun >want.txt || fail "the program without the library"
	ck CKPTCACHE_STEP_ASIDE=off -- strace -f -qq -c -o calls.txt -e trace=getpid "$PY" -c "$prog" ck >got.txt ||
		fail "the program with the library$(last_error)"
	outputs_match want.txt got.txt
	local n
	n=$(awk '$NF == "getpid" { print $4 }' calls.txt)
	cat calls.txt
	[ "${n:-0}" -lt 2000 ] || fail "$n getpid calls for 6 children"
	local f
	for f in a b c live; do
		same "plainrun/$f.bin" "ck/$f.bin" "$f.bin"
	done
	return 0
}
case_add children/vfork-close-range-after-hand-over children_vfork_close_range_after_hand_over

# A vfork child uses a checkpoint its parent holds open after the parent's
# node thread sent that checkpoint to its real file (open and unwritten for
# half a second: a status file): the child's number still holds the
# parent's placeholder, and the parent gives the real file's descriptor for
# it, as for one still cached. The child writes its line, then the parent,
# and no error is reported.
vfork_child_after_idle_hand_over() {
	cat >vi.c <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int c, char **v)
{
	int st, fd = c == 2 ? open(v[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
	if (fd < 0 || dprintf(fd, "first\n") != 6)
		return 2;
	pid_t p = vfork();
	if (p == 0) {
		/* the parent's node thread looks every 0.2 s for writers left
		 * unwritten for 0.5 s */
		usleep(1500000);
		_exit(dprintf(fd, "child\n") == 6 ? 0 : 4);
	}
	if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "the child: status %d\n", st);
		return 3;
	}
	return dprintf(fd, "parent\n") == 7 && close(fd) == 0 ? 0 : 5;
}
C
	gcc -O2 -o vi vi.c || fail "the vfork program did not compile"
	mkdir -p plainrun
	plain ./vi plainrun/s.txt || fail "the program without the library"
	ck -- ./vi ck/s.txt 2>err.txt || fail "the program with the library$(cat err.txt | head -3 | tr '\n' ' ')"
	cat err.txt
	grep -q 'ckptcache: error' err.txt && fail "$(grep -m1 'ckptcache: error' err.txt | cut -c1-200)"
	same plainrun/s.txt ck/s.txt "the checkpoint written by the parent and its vfork child"
	return 0
}
case_add children/vfork-child-after-idle-hand-over vfork_child_after_idle_hand_over
