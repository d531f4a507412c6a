# python3 on tagged files: plain file I/O with seeks, and numpy save/load in
# an irregular order given by a hint file, each in one Python process.

python_io() {
	mkdir -p expect
	ck -- "$PY" "$E2E/pycase.py" io "$T/ck" "$T/expect" || fail "python file I/O failed$(last_error)"
	stats_ok files==1 host.hits\>0 objects.written\>=4
	local f
	for f in p1.bin p2.txt p3.bin final.bin; do
		same "expect/$f" "ck/$f" "python: $f at its real path after exit"
	done
	absent ck/gone.bin "python: a removed checkpoint"
	absent ck/final.bin.tmp "python: the temporary name of a renamed checkpoint"
}

python_numpy() {
	local n=16 i
	"$PY" -c 'import numpy' 2>/dev/null ||
		fail "numpy cannot be imported by $PY (install python3-numpy): $("$PY" -c 'import numpy' 2>&1 | tail -1)"
	{
		echo "# restore order of the arrays: irregular"
		for i in $("$PY" "$E2E/pycase.py" order $n); do
			printf '%s/ck/arr_%03d.npy\n' "$T" "$i"
		done
		echo "ck/bundle.npz    # relative to this file's folder"
	} >order.txt
	ck CKPTCACHE_PATHS="$T/ck/*.np[yz]" CKPTCACHE_HOST_CACHE=8M CKPTCACHE_HINTS="$T/order.txt" -- \
		"$PY" "$E2E/pycase.py" numpy "$T/ck" "$T/order.txt" $n
	local rc=$?
	[ $rc -eq 3 ] && fail "numpy cannot be imported under the library$(last_error)"
	[ $rc -eq 0 ] || fail "numpy save/load: exit status $rc$(last_error)"
	# (with stepping aside on, the first array goes to its real path
	# before the cache starts)
	stats_ok files==1 objects.written\>=$n objects.written\<=$((n + 1)) objects.opened_for_read\>=$((n + 1)) \
		host.hits\>0 host.prefetch_ops+host.prefetch_cached\>0 dist.unhinted==0
	# and the arrays at their real paths load without the library
	plain "$PY" -B -c '
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
import pycase
for i in range(int(sys.argv[3])):
    a = np.load(f"{sys.argv[2]}/arr_{i:03d}.npy")
    assert np.array_equal(a, pycase.make_array(np, i)), i
' "$E2E" "$T/ck" $n || fail "the arrays at their real paths differ from what was saved"
}

# What the library starts in a process with a thread of its own: nothing
# for a reader, and no growth of the descriptor table (which makes the
# kernel wait for an RCU grace period in such a process) for a writer.
python_start() {
	head -c 3000000 /dev/urandom >ck/r.bin
	ck -- "$PY" "$E2E/pycase.py" start "$T/ck" || fail "the library's start in a threaded process$(last_error)"
	same ck/r.bin ck/w.bin "w.bin at its real path"
}

# Memory: a numpy job that keeps 24 arrays of 16 MiB, saves them, and loads
# them back peaks, under the library, within 10% of its peak without the
# library plus what the library held in memory at most (the host tier's
# peak_used_bytes). Peaks are the job's ru_maxrss, each side run alone,
# with the same malloc thresholds; every array is compared after its load
# and at its real path.
python_memory_peak() {
	under_sanitizer && note "the sanitizer runtime's own memory would be counted; the plain build checks it"
	"$PY" -c 'import numpy' 2>/dev/null || fail "numpy cannot be imported by $PY (install python3-numpy)"
	cat >job.py <<'PYEOF'
import os, sys, numpy as np
d, n = sys.argv[1], int(sys.argv[2])
arrs = [np.full(2 << 20, i * 1000003 + 7, dtype=np.int64) for i in range(n)]
for i, a in enumerate(arrs):
    np.save(f"{d}/arr_{i:02d}.npy", a)
back = [np.load(f"{d}/arr_{i:02d}.npy") for i in range(n)]
for i, (a, b) in enumerate(zip(arrs, back)):
    assert np.array_equal(a, b), f"array {i} read back in the process"
PYEOF
	cat >peak.py <<'PYEOF'
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
print(ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
PYEOF
	local mall=(MALLOC_MMAP_THRESHOLD_=67108864 MALLOC_TRIM_THRESHOLD_=268435456) without with
	mkdir -p plainck
	without=$(plain env "${mall[@]}" "$PY" peak.py "$PY" job.py "$T/plainck" 24) ||
		fail "the job without the library failed"
	phase mem
	with=$(ck CKPTCACHE_HOST_CACHE=1G "${mall[@]}" -- "$PY" peak.py "$PY" job.py "$T/ck" 24) ||
		fail "the job under the library failed$(last_error)"
	stats_ok files==1 objects.written==24 host.peak_used_bytes\>0
	local cached
	cached=$("$PY" -c 'import json, sys; print(sum(t["peak_used_bytes"] for t in json.load(open(sys.argv[1]))["tiers"] if t["name"] == "host") // 1024)' "$STATS"/*.json)
	echo "peak RSS without ${without} KiB, with ${with} KiB, cached ${cached} KiB"
	[ "$with" -le $(( (without + cached) * 11 / 10 )) ] ||
		fail "peak RSS with the library ${with} KiB > 1.1 x (${without} KiB without it + ${cached} KiB cached)"
	local i
	for i in $(seq -w 0 23); do
		same "plainck/arr_$i.npy" "ck/arr_$i.npy" "arr_$i.npy at its real path"
	done
}

# A checkpoint the cache holds, not yet at its real path, used as a folder
# (ck/w1/f): every call on such a path fails with ENOTDIR, as the kernel
# says of the file, in the same run as without the library (before, all
# but open, stat, lstat and mkdir said ENOENT).
python_file_as_folder() {
	local prog='
import errno, os, sys
d = sys.argv[1]
for i in range(3):
    with open(f"{d}/w{i}", "wb") as f:
        f.write(b"w" * 100)
        if os.environ.get("FSYNC_FIRST"):
            f.flush()
            os.fsync(f.fileno())
def t(name, fn):
    try:
        fn()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
t("open-w", lambda: open(f"{d}/w1/f", "wb"))
t("open-r", lambda: open(f"{d}/w1/f", "rb"))
t("stat", lambda: os.stat(f"{d}/w1/f"))
t("lstat", lambda: os.lstat(f"{d}/w1/sub/f"))
t("mkdir", lambda: os.mkdir(f"{d}/w1/d"))
t("missing", lambda: os.stat(f"{d}/nothing/f"))
p = f"{d}/w1/f"
t("unlink", lambda: os.unlink(p))
t("rmdir", lambda: os.rmdir(p))
t("rename-from", lambda: os.rename(p, f"{d}/x"))
t("rename-to", lambda: os.rename(f"{d}/w0", p))
t("link", lambda: os.link(f"{d}/w2", p))
t("symlink", lambda: os.symlink("w2", p))
t("mkfifo", lambda: os.mkfifo(p))
t("chmod", lambda: os.chmod(p, 0o600))
t("chown", lambda: os.chown(p, os.getuid(), -1))
t("lchown", lambda: os.lchown(p, os.getuid(), -1))
t("utime", lambda: os.utime(p))
t("truncate", lambda: os.truncate(p, 0))
t("access", lambda: print(os.access(p, os.R_OK)) or os.stat(p))
t("listdir", lambda: os.listdir(p))
t("chdir", lambda: os.chdir(p))
t("getxattr", lambda: os.getxattr(p, "user.k"))
t("setxattr", lambda: os.setxattr(p, "user.k", b"v"))
t("listxattr", lambda: os.listxattr(p))
t("removexattr", lambda: os.removexattr(p, "user.k"))
for n in "012":
    with open(f"{d}/w{n}", "rb") as f:
        print(n, f.read() == b"w" * 100)
'
	# publications held back (each rename 0.3 s): the calls meet the
	# checkpoints while they are the cache's only
	SLOW_US=300000 SLOWFS_OPS=rename same_output "a checkpoint used as a folder" "$prog"
	# each checkpoint at its real file first (fsync before close): the
	# calls meet real files that the cache also holds
	rm -rf "$T/ck" "$T/plainrun" && mkdir -p "$T/ck"
	FSYNC_FIRST=1 same_output "a published checkpoint used as a folder" "$prog"
	# the checkpoints at their real paths: the program's bytes, and no
	# file below any of them
	local i
	for i in 0 1 2; do
		same "$T/plainrun/w$i" "$T/ck/w$i" "w$i at its real path"
	done
	[ "$(ls -A "$T/ck")" = "$(ls -A "$T/plainrun")" ] ||
		fail "the folder holds $(ls -A "$T/ck" | tr '\n' ' '), without the library $(ls -A "$T/plainrun" | tr '\n' ' ')"
}

# A checkpoint of an earlier run that carries an extended attribute (a
# user.* name, as an ACL is one) rewritten by the program: the kernel
# truncates the same file, which keeps it; the cache must not replace the
# file with a new one without it. Checked in the process and after exit,
# against the same program without the library.
python_xattr_rewrite() {
	local prog='
import errno, os, sys
d = sys.argv[1]
for n in "abc":
    with open(f"{d}/{n}.bin", "wb") as f:
        f.write(b"x" * 1000)
'
	local prog2='
import os, sys
d = sys.argv[1]
for n in "abc":
    with open(f"{d}/{n}.bin", "wb") as f:
        f.write(b"z" * 2000)
print(os.listxattr(f"{d}/c.bin"), os.getxattr(f"{d}/c.bin", "user.k"), os.path.getsize(f"{d}/c.bin"))
'
	mkdir -p plainrun
	plain "$PY" -c "$prog" "$T/plainrun" && plain "$PY" -c "$prog" "$T/ck" || fail "making the files"
	if ! plain "$PY" -c 'import os, sys; [os.setxattr(f"{d}/c.bin", "user.k", b"val") for d in sys.argv[1:]]' \
		"$T/plainrun" "$T/ck" 2>/dev/null; then
		note "this file system takes no user.* attributes: nothing to check"
		return 0
	fi
	same_output "the rewrite of files with an attribute" "$prog2"
	[ "$(plain "$PY" -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.k"))' "$T/ck/c.bin")" = "b'val'" ] ||
		fail "c.bin lost its attribute at its real path"
	same plainrun/c.bin ck/c.bin "c.bin at its real path"
	# in one process: a checkpoint written, made durable at its real path
	# (fsync), given an attribute there, listed, then rewritten
	local prog3='
import os, sys
d = sys.argv[1]
with open(f"{d}/e.bin", "wb") as f:
    f.write(b"e" * 3000)
    f.flush()
    os.fsync(f.fileno())
os.setxattr(f"{d}/e.bin", "user.k", b"mine")
a = os.listxattr(f"{d}/e.bin")
with open(f"{d}/e.bin", "wb") as f:
    f.write(b"E" * 100)
print(a, os.listxattr(f"{d}/e.bin"), os.getxattr(f"{d}/e.bin", "user.k"), os.path.getsize(f"{d}/e.bin"))
'
	same_output "a published checkpoint given an attribute" "$prog3"
	same plainrun/e.bin ck/e.bin "e.bin at its real path"
}

# One thread rewrites a checkpoint and fsyncs it in a loop while the main
# thread forks children that only _exit (a fork makes every tagged
# descriptor a real one first): every fsync succeeds, as without the
# library, and the file holds its last version.
python_fsync_beside_fork() {
	local prog='
import errno, os, sys, threading
d = sys.argv[1]
for i in range(3):
    with open(f"{d}/p{i}", "wb") as f:
        f.write(b"P" * 5000)
stop = False
errs = []
def bg():
    while not stop:
        try:
            with open(f"{d}/t", "wb") as f:
                f.write(b"T" * 7000)
                os.fsync(f.fileno())
        except OSError as e:
            errs.append(errno.errorcode[e.errno])
            return
th = threading.Thread(target=bg)
th.start()
for k in range(200):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
stop = True
th.join()
print("writer errors:", errs, os.path.getsize(f"{d}/t"))
'
	local got
	got=$(ck -- "$PY" -c "$prog" "$T/ck") || fail "the program$(last_error)"
	[ "$got" = "writer errors: [] 7000" ] || fail "fsync beside forks: $got"
	[ "$(cat ck/t)" = "$(printf 'T%.0s' $(seq 7000))" ] || fail "ck/t at its real path is not the last version"
}

# A checkpoint's modification time is its last write's, not its close's:
# A written, B written and closed, A closed last; a restart that picks the
# newest by time (ls -t) picks B, in the process and at the real paths.
python_mtime_last_write() {
	local prog='
import os, sys, time
d = sys.argv[1]
a = open(f"{d}/A.dat", "wb")
a.write(b"a" * 300000)
a.flush()
time.sleep(0.05)
with open(f"{d}/B.dat", "wb") as b:
    b.write(b"b" * 300000)
time.sleep(0.05)
a.close()
ta, tb = os.stat(f"{d}/A.dat").st_mtime_ns, os.stat(f"{d}/B.dat").st_mtime_ns
print("newest", "B" if tb > ta else "A")
'
	local got
	got=$(ck -- "$PY" -c "$prog" "$T/ck") || fail "the program$(last_error)"
	[ "$got" = "newest B" ] || fail "in the process: $got (B was written after A's last write)"
	[ "$(cd ck && ls -t A.dat B.dat | head -1)" = B.dat ] ||
		fail "at the real paths, ls -t puts $(cd ck && ls -t A.dat B.dat | head -1) first"
}

# shutil.copy2 (a "best model" copy) of checkpoints just written, which the
# cache still holds: it copies the attributes too (listxattr), and the
# attribute calls by path answer as for a file that has none; the same
# output and copies as without the library.
python_copy2() {
	local prog='
import errno, os, shutil, sys
d = sys.argv[1]
os.makedirs(f"{d}/../backup_{os.path.basename(d)}", exist_ok=True)
b = f"{d}/../backup_{os.path.basename(d)}"
for i in range(12):
    with open(f"{d}/state_{i}.bin", "wb") as f:
        f.write(bytes([i]) * (5000 + i))
    shutil.copy2(f"{d}/state_{i}.bin", f"{b}/state_{i}.bin")
    assert open(f"{b}/state_{i}.bin", "rb").read() == bytes([i]) * (5000 + i)
os.symlink("state_11.bin", f"{d}/latest.bin")
for p in ("state_11.bin", "latest.bin"):
    print(p, os.listxattr(f"{d}/{p}"), os.listxattr(f"{d}/{p}", follow_symlinks=False) if p == "state_11.bin" else "")
    try:
        os.removexattr(f"{d}/{p}", "user.none")
    except OSError as e:
        print("removexattr", errno.errorcode[e.errno])
print(sorted(os.listdir(b)) == sorted(f"state_{i}.bin" for i in range(12)))
'
	same_output "shutil.copy2 of checkpoints just written" "$prog"
	local i
	for i in $(seq 0 11); do
		same plainrun/state_$i.bin ck/state_$i.bin "state_$i.bin at its real path"
		same backup_plainrun/state_$i.bin backup_ck/state_$i.bin "the copy of state_$i.bin"
	done
}

case_add python/io python_io
case_add python/start python_start
case_add python/numpy python_numpy
case_add python/memory-peak python_memory_peak

# h5py (HDF5) on tagged files, with HDF5's own file locking on (flock on
# the descriptor): datasets of several shapes written, read back in the same
# process and in a second one, then at their real paths without the library.
python_h5py() {
	"$PY" -c 'import h5py' 2>/dev/null ||
		fail "h5py cannot be imported by $PY (install python3-h5py): $("$PY" -c 'import h5py' 2>&1 | tail -1)"
	cat >h5case.py <<'PYEOF'
import sys, numpy as np, h5py
d, mode = sys.argv[1], sys.argv[2]
def arrays(k):
    r = np.random.default_rng(k)
    return {"field": r.standard_normal((512 + 7 * k, 300)).astype(np.float32),
            "ints": r.integers(0, 1 << 40, size=10001 + k), "scalar": np.float64(k)}
for k in range(6):
    path = f"{d}/step_{k}.h5"
    if mode == "write":
        with h5py.File(path, "w") as f:
            for name, a in arrays(k).items():
                f.create_dataset(name, data=a)
            f.attrs["step"] = k
    with h5py.File(path, "r") as f:
        assert int(f.attrs["step"]) == k, (path, "step")
        for name, a in arrays(k).items():
            assert np.array_equal(f[name][()], a), (path, name)
print("h5 ok", mode)
PYEOF
	ck -- "$PY" h5case.py "$T/ck" write || fail "h5py write and read back under the library$(last_error)"
	stats_ok files==1 objects.written==6
	phase read
	ck -- "$PY" h5case.py "$T/ck" read || fail "h5py read in a second process under the library$(last_error)"
	plain "$PY" h5case.py "$T/ck" read || fail "the HDF5 files at their real paths differ from what was written"
}
case_add python/h5py python_h5py

# File locks on tagged descriptors: an flock of a new checkpoint being
# written, and a read lock (fcntl.lockf) of one read back, exclude a second
# process (its descriptor tagged or passed through) while held, and let it
# in once released (the two meet through marker files).
# py_markers: Python functions by which processes meet through marker files
# (a marker is a file named prefix + name; a wait gives up after 30 s).
py_markers() {
	cat <<'PYEOF'
import os, sys, time
def wait_mark(m, name, who):
    t0 = time.time()
    while not os.path.exists(m + name):
        if time.time() - t0 > 30:
            sys.exit(f"{who}: no {name} after 30 s")
        time.sleep(0.01)
def put_mark(m, name):
    open(m + name, "w").close()
def lockname(path):
    """The lock file of a checkpoint not yet at its real path."""
    h = 0xcbf29ce484222325
    for c in os.path.realpath(path).encode():
        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return f"/dev/shm/ckptcache-{os.getuid()}.locks/lock.{h:016x}"
def lock_refused(f, why):
    """f's exclusive flock must be refused now (another process holds it)."""
    import fcntl
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        sys.exit(why)
    except BlockingIOError:
        pass
PYEOF
}

python_locks() {
	{ py_markers; cat <<'PYEOF'; } >lockcase.py
import fcntl, os, sys, time
role, path, kind, m = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def wait(name):
    wait_mark(m, name, role)
def mark(name):
    put_mark(m, name)
def take(fd, block, how=fcntl.LOCK_EX):
    nb = 0 if block else fcntl.LOCK_NB
    if kind == "flock":
        fcntl.flock(fd, how | nb)
    else:
        fcntl.lockf(fd, how | nb, 0, 0)
def drop(fd):
    (fcntl.flock if kind == "flock" else fcntl.lockf)(fd, fcntl.LOCK_UN)
if role == "holder" and kind == "flock":
    # a new checkpoint, written and locked before it reaches its real path
    with open(path, "wb") as f:
        f.write(b"x" * 100000)
        f.flush()
        take(f.fileno(), True)
        mark("locked"); wait("tried")
        drop(f.fileno())
        mark("unlocked"); wait("done")
elif role == "holder":
    # a read lock of a checkpoint read back from its real path
    with open(path, "rb") as f:
        assert f.read() == b"x" * 100000
        take(f.fileno(), True, fcntl.LOCK_SH)
        mark("locked"); wait("tried")
        drop(f.fileno())
        mark("unlocked"); wait("done")
else:
    wait("locked")
    with open(path, "rb" if kind == "flock" else "r+b") as f:
        try:
            take(f.fileno(), False)
            sys.exit("the lock was held, yet another process got it")
        except OSError:
            pass
        mark("tried"); wait("unlocked")
        take(f.fileno(), False)
        drop(f.fileno())
    mark("done")
PYEOF
	local kind
	for kind in flock lockf; do
		rm -f "$T"/m.*
		[ $kind = lockf ] && { "$PY" -c 'import sys; open(sys.argv[1], "wb").write(b"x" * 100000)' ck/locked.bin || fail "writing the file"; }
		ck -- "$PY" lockcase.py holder "$T/ck/locked.bin" $kind "$T/m." &
		local holder=$!
		ck -- "$PY" lockcase.py other "$T/ck/locked.bin" $kind "$T/m." || fail "$kind on a tagged file$(last_error)"
		wait $holder || fail "$kind: the holder failed$(last_error)"
	done
	[ "$(head -c 100000 /dev/zero | tr '\0' x | cmp - ck/locked.bin 2>&1)" = "" ] ||
		fail "the locked file at its real path differs from what was written"
}
case_add python/locks python_locks

# flock's conversions on a published checkpoint, from Python: a refused
# conversion of a shared lock to exclusive (LOCK_NB) leaves the descriptor
# no lock, as the kernel's does, so a third descriptor gets one once the
# first lets go; the lock goes with an unlock, and comes back. The output
# is compared with the program's without the library.
python_lock_conversions() {
	same_output "flock conversions" '
import fcntl, os, sys
p = os.path.join(sys.argv[1], "conv.bin")
with open(p, "wb") as f:
    f.write(b"x" * 100000); f.flush(); os.fsync(f.fileno())
a, b, c = (os.open(p, os.O_RDONLY) for _ in range(3))
def nb(fd, how):
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB); return "got"
    except BlockingIOError:
        return "refused"
fcntl.flock(a, fcntl.LOCK_SH); fcntl.flock(b, fcntl.LOCK_SH)
print("b to EX beside a SH:", nb(b, fcntl.LOCK_EX))
fcntl.flock(a, fcntl.LOCK_UN)
print("c EX after a let go:", nb(c, fcntl.LOCK_EX))
print("a SH beside c EX:", nb(a, fcntl.LOCK_SH))
fcntl.flock(c, fcntl.LOCK_UN)
print("b EX:", nb(b, fcntl.LOCK_EX))
print("b to SH:", nb(b, fcntl.LOCK_SH))
print("a SH beside b SH:", nb(a, fcntl.LOCK_SH))
print("c EX beside two SH:", nb(c, fcntl.LOCK_EX))
'
}
case_add python/lock-conversions python_lock_conversions

# A process without the library holds a shared flock of a published
# checkpoint and waits for a thread of the program that wrote it (with the
# library; its descriptors are the cache's) to take a shared lock too,
# while another thread of that program waits for an exclusive one: as
# without the library (the kernel lets a shared lock in beside a waiting
# exclusive one), the shared one is had and all finish. Before, the
# waiting exclusive lock held the path's lock file and kept the shared one
# out: the three waited for each other (until the process without the
# library gave up after 10 s).
python_lock_waiting_writer() {
	{ py_markers; cat <<'PYEOF'; } >lockwait.py
import fcntl, os, sys, threading, time
role, path, m = sys.argv[1], sys.argv[2], sys.argv[3]
if role == "plain":
    wait_mark(m, "written", role)
    f = open(path, "rb")
    fcntl.flock(f.fileno(), fcntl.LOCK_SH)
    put_mark(m, "plain-locked")
    t0 = time.time()
    while not os.path.exists(m + "reader-locked"):
        if time.time() - t0 > 10:
            sys.exit("the reader got no shared lock in 10 s beside this one and a waiting exclusive one")
        time.sleep(0.01)
    fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    sys.exit(0)
with open(path, "wb") as f:
    f.write(b"x" * 100000); f.flush(); os.fsync(f.fileno())
put_mark(m, "written")
wait_mark(m, "plain-locked", role)
def take(how, mark):
    with open(path, "rb") as g:
        fcntl.flock(g.fileno(), how)
        put_mark(m, mark)
        fcntl.flock(g.fileno(), fcntl.LOCK_UN)
w = threading.Thread(target=take, args=(fcntl.LOCK_EX, "writer-locked"), daemon=True)
w.start()
time.sleep(0.5)  # (the writer waits by now)
r = threading.Thread(target=take, args=(fcntl.LOCK_SH, "reader-locked"), daemon=True)
r.start()
r.join(30); w.join(30)
if r.is_alive() or w.is_alive():
    sys.exit("a lock was not had in 30 s")
print("done")
PYEOF
	rm -f "$T"/m.*
	plain "$PY" lockwait.py plain "$T/ck/w.bin" "$T/m." &
	local p=$!
	ck -- "$PY" lockwait.py lib "$T/ck/w.bin" "$T/m." || fail "the program with the library$(last_error)"
	wait $p || fail "the process without the library failed"
	[ "$(head -c 100000 /dev/zero | tr '\0' x | cmp - ck/w.bin 2>&1)" = "" ] || fail "the checkpoint at its real path differs"
}
case_add python/lock-waiting-writer python_lock_waiting_writer

# fallocate's modes that change a file's bytes (punch a hole, zero,
# collapse and insert a range) on a checkpoint being written: the kernel's
# answers and bytes, as without the library, in the process and at the
# real path (before, each answered EOPNOTSUPP and changed nothing).
python_fallocate_modes() {
	local prog='
import ctypes, os, sys
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
with open(os.path.join(d, "first.bin"), "wb") as f:
    f.write(b"first")
p = os.path.join(d, "model.bin")
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, bytes(range(256)) * 400)
for name, mode, off in (("punch", 3, 8192), ("zero", 0x10, 16384), ("collapse", 0x08, 24576),
                        ("insert", 0x20, 32768), ("keep", 1, 200000)):
    r = libc.fallocate(fd, mode, off, 4096)
    e = ctypes.get_errno() if r else 0
    print(name, r, os.strerror(e) if r else "", os.fstat(fd).st_size, os.pread(fd, 8, off + 10).hex())
# the errors: a bad range, and a descriptor that cannot write
for name, mode, off, n in (("punch-empty", 3, 0, 0), ("zero-negative", 0x10, -1, 4096)):
    r = libc.fallocate(fd, mode, off, n)
    print(name, r, os.strerror(ctypes.get_errno()) if r else "")
ro = os.open(p, os.O_RDONLY)
r = libc.fallocate(ro, 3, 0, 4096)
print("punch-read-only", r, os.strerror(ctypes.get_errno()) if r else "")
os.close(ro)
os.close(fd)
with open(p, "rb") as f:
    b = f.read()
print(len(b), sum(b) % 1000003)
'
	same_output "fallocate modes" "$prog"
	plain cmp plainrun/model.bin ck/model.bin || fail "the checkpoint at its real path differs from the one without the library"
}
case_add python/fallocate-modes python_fallocate_modes

# A checkpoint whose lock file cannot be opened (here a folder stands at
# its name): flock takes the real file's lock alone, which still excludes
# the program's other descriptors as without the library, and the library
# says once that it did so.
python_lock_file_refused() {
	{ py_markers; cat <<'PYEOF'; } >lockrefused.py
import fcntl, os, sys
p = os.path.join(sys.argv[1], "nolockfile.h5")
with open(p, "wb") as f:
    f.write(b"y" * 70000); f.flush(); os.fsync(f.fileno())
name = lockname(p)
os.makedirs(os.path.dirname(name), mode=0o700, exist_ok=True)
os.makedirs(name, exist_ok=True)
def nb(fd, how):
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB); return "got"
    except BlockingIOError:
        return "refused"
try:
    for rep in range(3):
        a, b = os.open(p, os.O_RDONLY), os.open(p, os.O_RDONLY)
        fcntl.flock(a, fcntl.LOCK_EX)
        print("b beside a EX:", nb(b, fcntl.LOCK_SH))
        fcntl.flock(a, fcntl.LOCK_UN)
        print("b after a let go:", nb(b, fcntl.LOCK_EX))
        print("a beside b EX:", nb(a, fcntl.LOCK_SH))
        print("bytes:", os.pread(a, 70000, 0) == b"y" * 70000)
        os.close(a); os.close(b)
finally:
    os.rmdir(name)
PYEOF
	mkdir -p plainrun
	plain "$PY" lockrefused.py "$T/plainrun" >want.txt || fail "the program without the library"
	ck -- "$PY" lockrefused.py "$T/ck" >got.txt 2>err.txt || fail "the program with the library$(cat err.txt)"
	outputs_match want.txt got.txt
	[ "$(grep -c 'no lock file for its flock' err.txt)" = 1 ] ||
		fail "the library did not say once that the lock file could not be had: $(head -c 600 err.txt)"
	[ "$(head -c 70000 /dev/zero | tr '\0' y | cmp - ck/nolockfile.h5 2>&1)" = "" ] ||
		fail "the checkpoint at its real path differs"
}
case_add python/lock-file-refused python_lock_file_refused

# The lock files of flock(2) on checkpoints not yet at their real paths
# (under /dev/shm) go when the processes that used them end (exit or
# _exit), while the locks still exclude: a forked child that shares a
# locked descriptor still excludes others after its parent closed it, and
# processes that lock, count and close in turn, short ones ending (and
# removing the lock file) among them, are never inside together and lose
# no count.
python_lock_files_go() {
	{ py_markers; cat <<'PYEOF'; } >lockfiles.py
import fcntl, os, sys, time
what, d = sys.argv[1], sys.argv[2]
def start_cache(tag):
    # a process's first checkpoint written whole goes to its real path
    # (the cache starts with the second): the ones below are cached
    with open(f"{d}/first-{tag}.bin", "wb") as f:
        f.write(b"first")
if what == "names":
    for p in sys.argv[3:]:
        print(lockname(p))
elif what == "write":
    # new checkpoints, locked and unlocked while written, then closed
    start_cache("write")
    for i in range(30):
        with open(f"{d}/w{i:02d}.h5", "wb") as f:
            f.write(bytes([i]) * 5000)
            f.flush()
            fcntl.flock(f.fileno(), fcntl.LOCK_SH if i % 3 == 0 else fcntl.LOCK_EX)
            f.write(bytes([i + 1]) * 3000)
            if i % 2:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
elif what == "exit":
    # a process that ends by _exit, its locked checkpoint open
    start_cache("exit")
    f = open(f"{d}/exit.h5", "wb")
    f.write(b"e" * 4000)
    f.flush()
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    os._exit(0)
elif what.startswith("stale-"):
    # x keeps its lock file open unlocked while y, which used it too,
    # ends and removes it; x's next lock must still exclude z
    m = os.path.join(d, "..", "m.")
    def mark(name):
        put_mark(m, name)
    def wait(name):
        wait_mark(m, name, what)
    start_cache(what)
    with open(f"{d}/stale.h5", "wb") as f:
        if what == "stale-x":
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            mark("x-ready"); wait("y-done")
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            mark("x-locked"); wait("z-tried")
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        elif what == "stale-y":
            wait("x-ready")
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        else:
            wait("x-locked")
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                sys.exit("z got the lock x holds (x had locked a lock file removed meanwhile)")
            except OSError:
                pass
            mark("z-tried")
elif what == "fork":
    # a child shares the locked descriptor after its parent closed it
    start_cache("fork")
    f = open(f"{d}/shared.h5", "wb")
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, b"x")
        time.sleep(1.5)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    f.close()
    print("closed", flush=True)
    _, st = os.waitpid(pid, 0)
    sys.exit(st)
elif what == "other":
    # while the child holds it: another process must not get it
    start_cache("other")
    with open(f"{d}/shared.h5", "wb") as f:
        lock_refused(f, "the lock a forked child holds was had by another process")
elif what == "turns":
    # lock, count, unlock and close, over and over
    who, n = sys.argv[3], int(sys.argv[4])
    inside, count = os.path.join(d, "..", "inside"), os.path.join(d, "..", "count")
    start_cache(who)
    for _ in range(n):
        with open(f"{d}/turn.h5", "wb") as f:
            time.sleep(0.002)  # (work between the open and the lock)
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                sys.exit(f"{who}: another process was inside the lock")
            with open(count) as c:
                v = int(c.read() or "0")
            with open(count, "w") as c:
                c.write(str(v + 1))
            os.unlink(inside)
PYEOF
	local names
	names=$("$PY" lockfiles.py names "$T/ck" "$T"/ck/w{00..29}.h5 "$T/ck/shared.h5" "$T/ck/turn.h5" "$T/ck/exit.h5" \
		"$T/ck/stale.h5") ||
		fail "lock names"
	ck -- "$PY" lockfiles.py write "$T/ck" || fail "writing locked checkpoints$(last_error)"
	"$PY" - "$T/ck" <<'PYEOF' || fail "the checkpoints at their real paths differ from what was written"
import sys
for i in range(30):
    if open(f"{sys.argv[1]}/w{i:02d}.h5", "rb").read() != bytes([i]) * 5000 + bytes([i + 1]) * 3000:
        sys.exit(f"w{i:02d}.h5 differs")
PYEOF
	ck -- "$PY" lockfiles.py exit "$T/ck" || fail "a process that ends by _exit$(last_error)"
	[ "$(cat ck/exit.h5)" = "$(head -c 4000 /dev/zero | tr '\0' e)" ] ||
		fail "the checkpoint of a process that ended by _exit differs at its real path"
	# the fork: the child's lock still excludes once the parent closed
	ck CKPTCACHE_PERSIST=never -- "$PY" lockfiles.py fork "$T/ck" >fork.out &
	local parent=$! i
	for ((i = 0; i < 500; i++)); do grep -q closed fork.out 2>/dev/null && break; sleep 0.01; done
	grep -q closed fork.out || fail "the forking process never closed its descriptor"
	ck CKPTCACHE_PERSIST=never -- "$PY" lockfiles.py other "$T/ck" || fail "a child's flock after its parent closed$(last_error)"
	wait $parent || fail "the forking process failed$(last_error)"
	# a lock file removed by a process that ended, while another has it
	# open unlocked: that one's next lock is on the file others lock
	ck CKPTCACHE_PERSIST=never -- "$PY" lockfiles.py stale-x "$T/ck" &
	local x=$!
	ck CKPTCACHE_PERSIST=never -- "$PY" lockfiles.py stale-y "$T/ck" || fail "stale-y$(last_error)"
	[ -e "$(echo "$names" | tail -1)" ] && fail "the lock file a process used is left after it ended"
	touch m.y-done
	ck CKPTCACHE_PERSIST=never -- "$PY" lockfiles.py stale-z "$T/ck" || fail "stale-z$(last_error)"
	wait $x || fail "stale-x$(last_error)"
	# two processes take 150 turns each while short ones of 5 turns come
	# and go, each removing at its end the lock file nobody holds then
	echo 0 >count
	ck CKPTCACHE_PERSIST=never -- "$PY" lockfiles.py turns "$T/ck" a 150 &
	local a=$!
	(for i in $(seq 1 12); do
		ck CKPTCACHE_PERSIST=never -- "$PY" lockfiles.py turns "$T/ck" "c$i" 5 || exit 1
	done) &
	local c=$!
	ck CKPTCACHE_PERSIST=never -- "$PY" lockfiles.py turns "$T/ck" b 150 || fail "turns (b)$(last_error)"
	wait $a || fail "turns (a)$(last_error)"
	wait $c || fail "turns of the short processes$(last_error)"
	[ "$(cat count)" = 360 ] || fail "the count after 2 x 150 + 12 x 5 turns under the lock is $(cat count)"
	# (a fork makes the tagged descriptors real first: the child's lock
	# is the real file's, which the fork wrote)
	[ -e ck/shared.h5 ] || fail "the checkpoint a forked child shares is not at its real path"
	[ ! -e ck/turn.h5 ] || fail "a checkpoint kept from its real path (CKPTCACHE_PERSIST=never) is there"
	local left=0 n
	for n in $names; do [ -e "$n" ] && left=$((left + 1)); done
	[ $left = 0 ] || fail "$left of the lock files of this case's checkpoints are left in /dev/shm"
}
case_add python/lock-files-go python_lock_files_go

# Lock files that no process's end removed (one that ended by an exec)
# go at the end of a later process that used lock files, once they are
# old; a young one stays, and so does an old one another process holds,
# whose lock still excludes.
python_lock_files_stale() {
	{ py_markers; cat <<'PYEOF'; } >lockstale.py
import fcntl, os, sys
what, d, m = sys.argv[1], sys.argv[2], sys.argv[3]
def start_cache():
    with open(f"{d}/first-{what}.bin", "wb") as f:
        f.write(b"first")  # (the cache starts with the second file)
if what == "names":
    for p in sys.argv[4:]:
        print(lockname(p))
    sys.exit(0)
start_cache()
if what.startswith("exec-"):
    # a locked checkpoint, then an exec: its lock file is left
    f = open(f"{d}/{what}.h5", "wb")
    f.write(what.encode() * 1000)
    f.flush()
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    os.execv("/bin/true", ["true"])
elif what == "holder":
    with open(f"{d}/held.h5", "wb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        put_mark(m, "locked"); wait_mark(m, "tried", what)
        f.write(b"held" * 2000)
elif what == "sweeper":
    with open(f"{d}/sweeper.h5", "wb") as f:
        f.write(b"s" * 3000)
        f.flush()
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
elif what == "other":
    with open(f"{d}/held.h5", "wb") as f:
        lock_refused(f, "another process got the lock the holder holds, its lock file old")
    put_mark(m, "tried")
PYEOF
	local names old young held
	names=$("$PY" lockstale.py names "$T/ck" "$T/m." "$T/ck/exec-old.h5" "$T/ck/exec-young.h5" "$T/ck/held.h5") ||
		fail "lock names"
	old=$(echo "$names" | sed -n 1p)
	young=$(echo "$names" | sed -n 2p)
	held=$(echo "$names" | sed -n 3p)
	rm -f "$old" "$young" "$held" "$T"/m.*
	ck -- "$PY" lockstale.py exec-old "$T/ck" "$T/m." || fail "exec-old$(last_error)"
	ck -- "$PY" lockstale.py exec-young "$T/ck" "$T/m." || fail "exec-young$(last_error)"
	[ -e "$old" ] && [ -e "$young" ] || fail "the lock files of processes that ended by an exec are not there"
	touch -d '2 hours ago' "$old"
	ck CKPTCACHE_PERSIST=never -- "$PY" lockstale.py holder "$T/ck" "$T/m." &
	local holder=$! i
	for ((i = 0; i < 3000; i++)); do [ -e m.locked ] && break; sleep 0.01; done
	[ -e "$held" ] || fail "the holder's lock file is not there"
	touch -d '2 hours ago' "$held"
	ck -- "$PY" lockstale.py sweeper "$T/ck" "$T/m." || fail "sweeper$(last_error)"
	[ -e "$old" ] && fail "an old lock file nobody holds is left after a process that used lock files ended"
	[ -e "$young" ] || fail "a young lock file nobody holds was removed"
	[ -e "$held" ] || fail "an old lock file another process holds was removed"
	ck CKPTCACHE_PERSIST=never -- "$PY" lockstale.py other "$T/ck" "$T/m." || fail "other$(last_error)"
	wait $holder || fail "holder$(last_error)"
	rm -f "$young"
	local w
	for w in exec-old exec-young; do
		[ "$(cat "ck/$w.h5")" = "$("$PY" -c "import sys; sys.stdout.write('$w' * 1000)")" ] ||
			fail "$w.h5 at its real path differs from what was written"
	done
	[ "$(cat ck/sweeper.h5)" = "$(head -c 3000 /dev/zero | tr '\0' s)" ] ||
		fail "sweeper.h5 at its real path differs from what was written"
}
case_add python/lock-files-stale python_lock_files_stale

# An flock of a checkpoint still excludes the other processes when its
# real file appears under it: a holder locks a new checkpoint (no real file
# yet, so a lock file is locked) that a third process had opened before
# the lock; a program without the library then writes the real file. The
# third process must not get the lock until the holder lets it go, then
# must get it.
python_lock_real_appears() {
	{ py_markers; cat <<'PYEOF'; } >lockchange.py
import fcntl, os, sys
role, path, m = sys.argv[1], sys.argv[2], sys.argv[3]
def wait(name):
    wait_mark(m, name, role)
def mark(name):
    put_mark(m, name)
def start_cache():
    with open(os.path.join(os.path.dirname(path), f"first-{role}.bin"), "wb") as f:
        f.write(b"first")  # (the cache starts with the second file)
if role == "holder":
    start_cache()
    wait("opened")
    f = open(path, "ab")
    f.write(b"h" * 70000)
    f.flush()
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    mark("locked"); wait("tried")
    fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    mark("unlocked"); wait("done")
    f.close()
elif role == "writer":
    wait("locked")
    with open(path, "ab") as f:
        f.write(b"w" * 60000)
    mark("changed")
else:
    start_cache()
    with open(path, "ab") as f:
        mark("opened"); wait("changed")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            sys.exit("another process got the lock the holder holds, its real file written meanwhile")
        except BlockingIOError:
            pass
        mark("tried"); wait("unlocked")
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    mark("done")
PYEOF
	rm -f "$T"/m.*
	ck -- "$PY" lockchange.py holder "$T/ck/appears.bin" "$T/m." &
	local holder=$!
	plain "$PY" lockchange.py writer "$T/ck/appears.bin" "$T/m." &
	local writer=$!
	ck -- "$PY" lockchange.py other "$T/ck/appears.bin" "$T/m." || fail "the third process$(last_error)"
	wait $writer || fail "the writer failed$(last_error)"
	wait $holder || fail "the holder failed$(last_error)"
	# both appended: the writer's bytes are at the real path, and the
	# holder's too, or (the real file changed under its cached version) in
	# the rescue file the library named
	"$PY" - ck/appears.bin "$T" <<'PYEOF' || fail "bytes were lost"
import glob, sys
b = open(sys.argv[1], "rb").read()
h, w = b.count(b"h"), b.count(b"w")
rescued = [f for f in glob.glob(sys.argv[2] + "/ckptcache-*/rescue.*appears.bin")
           if open(f, "rb").read() == b"h" * 70000]
if w != 60000 or len(b) != h + w or (h != 70000 and not (h == 0 and rescued)):
    sys.exit(f"{len(b)} bytes at the real path: {h} of the holder's, {w} of the writer's; rescued: {rescued}")
PYEOF
}
case_add python/lock-real-appears python_lock_real_appears

# The cache's own files (the ssd tier's file, the temporary files of
# publication) are kept above the descriptor numbers programs pick for
# themselves: a program that dup2s onto a low number it believes free never
# replaces one of them.
python_engine_fds() {
	mkdir -p ssd
	ck CKPTCACHE_SSD_DIR="$T/ssd" CKPTCACHE_SSD_CACHE=16M CKPTCACHE_HOST_CACHE=4M -- "$PY" -c '
import os, sys, time
d = sys.argv[1]
for k in range(8):
    with open(f"{d}/c{k}.bin", "wb") as f:
        f.write(os.urandom(3 << 20))
time.sleep(0.5)
low = []
for n in os.listdir("/proc/self/fd"):
    try:
        t = os.readlink(f"/proc/self/fd/{n}")
    except OSError:
        continue
    if int(n) < 512 and ("/ssd/" in t or ".ckc" in t or "ckptcache-" in t):
        low.append((int(n), t))
assert not low, f"the cache holds files at low numbers: {low}"
' "$T/ck" || fail "engine descriptors$(last_error)"
}
case_add python/engine-fds-high python_engine_fds

# A descriptor open for reading while the program rewrites the checkpoint in
# place, removes it, or renames a new one over it: the reader reads what it
# reads without the library (the new bytes; the old ones; the old ones), and
# the real files are the same.
python_readers_replaced() {
	mkdir -p plain
	plain "$PY" "$E2E/readers_replaced.py" "$T/plain" >expect.txt || fail "the script fails without the library"
	ck -- "$PY" "$E2E/readers_replaced.py" "$T/ck" >got.txt || fail "readers of replaced checkpoints$(last_error)"
	diff expect.txt got.txt >/dev/null || fail "readers read otherwise under the library: $(diff expect.txt got.txt | tr '\n' ' ')"
	same plain/rewrite.bin ck/rewrite.bin "the rewritten checkpoint at its real path"
	same plain/rename.bin ck/rename.bin "the renamed checkpoint at its real path"
	same plain/in_place.bin ck/in_place.bin "the checkpoint rewritten in place at its real path"
	absent ck/unlink.bin "the removed checkpoint"
}

case_add python/readers-replaced python_readers_replaced

# Listings of a checkpoint folder in the program that writes it: a resume
# from the newest checkpoint glob finds, a "keep the last 3" rotation by
# os.listdir, and the "clear the folder and write it again" idiom
# (shutil.rmtree, then fewer shards). Each listing must see every checkpoint
# closed before it; at the end the folder holds exactly the last round's
# shards and the last three checkpoints, with their bytes.
python_listings() {
	ck CKPTCACHE_PATHS="$T/ck/**" -- "$PY" -c '
import glob, os, shutil, sys
d = sys.argv[1]
os.makedirs(d + "/rot")
for i in range(12):
    with open(f"{d}/rot/ckpt_{i:03d}.bin", "wb") as f:
        f.write(bytes([i]) * (300000 + i))
    newest = sorted(glob.glob(f"{d}/rot/ckpt_*.bin"))[-1]
    assert newest.endswith(f"ckpt_{i:03d}.bin"), f"glob after ckpt_{i:03d}: newest is {newest}"
    names = sorted(os.listdir(d + "/rot"))
    for old in names[:-3]:
        os.unlink(f"{d}/rot/{old}")
    left = os.listdir(d + "/rot")
    assert len(left) == min(i + 1, 3), f"after {i}: {left}"
for r in range(5):
    os.makedirs(d + "/shards")
    for i in range(20 - 3 * r):
        with open(f"{d}/shards/s{i:02d}.bin", "wb") as f:
            f.write(bytes([100 + r]) * (200000 + i))
    if r < 4:
        shutil.rmtree(d + "/shards")
' "$T/ck" || fail "listings of the checkpoint folder$(last_error)"
	local names
	names=$(ls ck/rot | tr '\n' ' ')
	[ "$names" = "ckpt_009.bin ckpt_010.bin ckpt_011.bin " ] || fail "ck/rot holds '$names' after the rotation, not the last three checkpoints"
	[ "$(ls ck/shards | wc -l)" = 8 ] || fail "ck/shards holds $(ls ck/shards | wc -l) files, not the last round's 8: $(ls ck/shards | tr '\n' ' ')"
	plain "$PY" -c '
import os, sys
d = sys.argv[1]
for i in (9, 10, 11):
    assert open(f"{d}/rot/ckpt_{i:03d}.bin", "rb").read() == bytes([i]) * (300000 + i), i
for i in range(8):
    assert open(f"{d}/shards/s{i:02d}.bin", "rb").read() == bytes([104]) * (200000 + i), i
' "$T/ck" || fail "the checkpoints at their real paths differ from what was written"
}
case_add python/listings python_listings

# What a program asks of a descriptor besides its bytes: isatty(3),
# tcgetattr(3), ioctl(2) FIONREAD at several positions and into no buffer
# (EFAULT) and a terminal's request (TIOCGWINSZ), on a checkpoint the cache holds, answered as a
# regular file answers them without the library (same values, same errno),
# and the bytes read back.
python_ioctl() {
	local probe='
import array, ctypes, errno, fcntl, os, sys, termios
libc = ctypes.CDLL(None, use_errno=True)
p = sys.argv[1] + "/io.bin"
data = bytes(range(256)) * 4000
with open(p, "wb") as f:
    f.write(data)
out = []
fd = os.open(p, os.O_RDONLY)
for name, call in (("isatty", lambda: libc.isatty(fd)),
                   ("tcgetattr", lambda: libc.tcgetattr(fd, ctypes.create_string_buffer(256)))):
    ctypes.set_errno(0)
    r = call()
    out.append(f"{name}={r}/{errno.errorcode.get(ctypes.get_errno(), 0)}")
out.append(f"os.isatty={os.isatty(fd)}")
for pos in (0, 1000, len(data), len(data) + 10):
    os.lseek(fd, pos, os.SEEK_SET)
    b = array.array("i", [-1])
    fcntl.ioctl(fd, termios.FIONREAD, b, True)
    out.append(f"fionread@{pos}={b[0]}")
ctypes.set_errno(0)
r = libc.ioctl(fd, ctypes.c_ulong(termios.FIONREAD), None)
out.append(f"fionread-null={r}/{errno.errorcode.get(ctypes.get_errno(), 0)}")
try:
    fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8))
    out.append("winsz=ok")
except OSError as e:
    out.append(f"winsz={errno.errorcode[e.errno]}")
os.lseek(fd, 0, os.SEEK_SET)
assert os.read(fd, len(data) + 1) == data, "bytes read back"
os.close(fd)
print(" ".join(out))
'
	mkdir -p plain
	ck -- "$PY" -c "$probe" "$T/ck" >with.txt || fail "the probe under the library$(last_error)"
	plain "$PY" -c "$probe" "$T/plain" >without.txt || fail "the probe without the library"
	stats_ok files==1 host.hits\>0
	[ "$(cat with.txt)" = "$(cat without.txt)" ] ||
		fail "answers differ: with the library '$(cat with.txt)', without '$(cat without.txt)'"
	same plain/io.bin ck/io.bin "io.bin at its real path"
}
case_add python/ioctl python_ioctl
case_add python/copy2-just-written python_copy2

# sendfile and splice from checkpoints the cache holds into pipes and
# sockets, as the kernel's: into a pipe nobody reads yet, the call moves
# what the pipe takes and returns (it does not wait for the rest); an
# event loop's pump into a non-blocking pipe or socket, which takes part of
# each call or nothing (EAGAIN), gets every byte once, in order, whether
# the file's position or an offset of the program's moves; into a blocking
# pipe that a slower thread reads, each call waits for room (no EAGAIN).
# A pipe with no reader and a negative offset get the kernel's errors.
python_sendfile_streams() {
	local prog='
import os, socket, sys
d = sys.argv[1]
data = bytes((i * 131) >> 3 & 255 for i in range(256)) * 4096 * 3 + b"tail"
for i in range(3):
    with open(f"{d}/c{i}.bin", "w+b") as f:
        f.write(data)
for how in ("sendfile", "splice"):
    fd = os.open(f"{d}/c2.bin", os.O_RDONLY)
    os.lseek(fd, 4097, os.SEEK_SET)
    r, w = os.pipe()
    n = os.sendfile(w, fd, None, 1 << 20) if how == "sendfile" else os.splice(fd, w, 1 << 20)
    got = b""
    while len(got) < n:
        got += os.read(r, n - len(got))
    # (what the pipe takes, its 16 pages: the kernel moves whole pages of
    # the file, so 65535 bytes from this offset)
    print(how, "into a pipe nobody reads:", 0 < n <= 65536, os.lseek(fd, 0, os.SEEK_CUR) == 4097 + n,
          got == data[4097:4097 + n])
    for x in (r, w, fd):
        os.close(x)
for kind, call in (("pipe", "sendfile"), ("pipe", "splice"), ("socket", "sendfile")):
    for where in ("position", "offset"):
        fd = os.open(f"{d}/c2.bin", os.O_RDONLY)
        if kind == "pipe":
            r, w = os.pipe()
            os.set_blocking(r, False)
            os.set_blocking(w, False)
            recv = lambda: os.read(r, 1 << 20)
        else:
            a, b = socket.socketpair()
            a.setblocking(False)
            b.setblocking(False)
            w = a.fileno()
            recv = lambda: b.recv(1 << 20)
        got, off, calls = bytearray(), 0, 0
        while True:
            calls += 1
            try:
                if call == "sendfile":
                    n = os.sendfile(w, fd, None if where == "position" else off, 1 << 20)
                else:
                    n = os.splice(fd, w, 1 << 20, offset_src=None if where == "position" else off)
                if n == 0:
                    break
                off += n
            except BlockingIOError:
                pass
            try:
                while True:
                    got += recv()
            except BlockingIOError:
                pass
        print(kind, call, where, len(got), bytes(got) == data, off == len(data))
        os.close(fd)
# a blocking pipe that another thread reads, more slowly than the calls
# fill it: each call waits for room, never fails with EAGAIN
import errno, threading, time
def slow_reader(recv, got):
    """A thread that takes what recv() gives into got until it gives
    nothing, pausing after each piece."""
    def run():
        while True:
            x = recv()
            if not x:
                break
            got.extend(x)
            time.sleep(0.0002)
    t = threading.Thread(target=run)
    t.start()
    return t
for call in ("sendfile", "splice"):
    fd = os.open(f"{d}/c2.bin", os.O_RDONLY)
    r, w = os.pipe()
    got, err = bytearray(), None
    t = slow_reader(lambda: os.read(r, 65536), got)
    try:
        while True:
            n = os.splice(fd, w, 1 << 20) if call == "splice" else os.sendfile(w, fd, None, 1 << 20)
            if n == 0:
                break
    except OSError as e:
        err = errno.errorcode[e.errno]
    os.close(w)
    t.join()
    os.close(r)
    os.close(fd)
    print(call, "into a blocking pipe a slower thread reads:", err, bytes(got) == data)
# a blocking socket that another thread reads, more slowly than the calls
# fill it (the cache sends from its memory what the socket takes at once,
# and waits through its buffer for the rest), by position and by offset,
# from the middle of a page to past the end
for where in ("position", "offset"):
    fd = os.open(f"{d}/c2.bin", os.O_RDONLY)
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    got = bytearray()
    t = slow_reader(lambda: b.recv(50000), got)
    off, sent = 123457, 0
    os.lseek(fd, off, os.SEEK_SET)
    while True:
        n = os.sendfile(a.fileno(), fd, None if where == "position" else off + sent, 700000)
        if n == 0:
            break
        sent += n
    a.close()
    t.join()
    b.close()
    print("socket a slower thread reads,", where, sent, bytes(got) == data[off:],
          os.lseek(fd, 0, os.SEEK_CUR) == (len(data) if where == "position" else off))
    os.close(fd)
# a socket whose peer is gone: EPIPE, the position where it was
fd = os.open(f"{d}/c2.bin", os.O_RDONLY)
a, b = socket.socketpair()
b.close()
try:
    print("socket with no peer:", os.sendfile(a.fileno(), fd, None, 1 << 20))
except OSError as e:
    print("socket with no peer:", errno.errorcode[e.errno], os.lseek(fd, 0, os.SEEK_CUR))
a.close()
os.close(fd)
# a pipe whose reader is gone: EPIPE (Python ignores SIGPIPE), and the
# position of the file where it was
for call in ("sendfile", "splice"):
    fd = os.open(f"{d}/c2.bin", os.O_RDONLY)
    r, w = os.pipe()
    os.close(r)
    try:
        n = os.splice(fd, w, 1 << 20) if call == "splice" else os.sendfile(w, fd, None, 1 << 20)
        print(call, "into a pipe with no reader:", n)
    except OSError as e:
        print(call, "into a pipe with no reader:", errno.errorcode[e.errno], os.lseek(fd, 0, os.SEEK_CUR))
    os.close(w)
    os.close(fd)
# a negative offset: the kernel says EOVERFLOW (copy_file_range) or EINVAL
src = os.open(f"{d}/c1.bin", os.O_RDONLY)
dst = os.open(f"{d}/neg.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
r, w = os.pipe()
for name, f in (("copy_file_range in", lambda: os.copy_file_range(src, dst, 10, -5)),
                ("copy_file_range out", lambda: os.copy_file_range(src, dst, 10, 0, -5)),
                ("sendfile", lambda: os.sendfile(w, src, -5, 10)),
                ("splice", lambda: os.splice(src, w, 10, offset_src=-5))):
    try:
        print(name, "at a negative offset:", f())
    except OSError as e:
        print(name, "at a negative offset:", errno.errorcode[e.errno])
'
	same_output "sendfile and splice into pipes and sockets; negative offsets" "$prog"
	local i
	for i in 0 1 2; do
		same plainrun/c$i.bin ck/c$i.bin "c$i.bin at its real path"
	done
	# the same, every checkpoint kept in memory only (never published
	# while the program runs): every copy comes out of the host tier
	phase memory
	same_output "the same, out of the cache's memory" "$prog" CKPTCACHE_PERSIST=never
	stats_ok files==1 host.hits\>0 home.hits==0
}
case_add python/sendfile-into-streams python_sendfile_streams

# sendfile, splice and copy_file_range out of checkpoints the cache holds
# whose real files hold them too (published by fsync, so in the page
# cache): the kernel's own copy from the real file, as without the library
# (pipe and socket, by position and by offset, a part from the middle, to
# the end and past it), not a copy through the library's memory; the same
# bytes, positions and counts as without the library.
python_sendfile_published() {
	local prog='
import os, socket, sys
d = sys.argv[1]
data = [bytes((i * 7 + (i >> 9) + k) & 255 for i in range((3 << 20) + 1000 * k)) for k in range(3)]
for k in range(3):
    with open(f"{d}/p{k}.bin", "w+b") as f:
        f.write(data[k])
        f.flush()
        os.fsync(f.fileno())
def drain(r, n):
    got = b""
    while len(got) < n:
        got += os.read(r, n - len(got))
    return got
# into a pipe, by offset and by position, in pieces the pipe holds
for k, call in ((0, "sendfile"), (1, "splice")):
    for where in ("offset", "position"):
        fd = os.open(f"{d}/p{k}.bin", os.O_RDONLY)
        r, w = os.pipe()
        got, off = b"", 0
        while True:
            at = None if where == "position" else off
            n = os.sendfile(w, fd, at, 65536) if call == "sendfile" else os.splice(fd, w, 65536, offset_src=at)
            if not n:
                break
            off += n
            got += drain(r, n)
        print(call, where, got == data[k], off, os.lseek(fd, 0, os.SEEK_CUR))
        for x in (r, w, fd):
            os.close(x)
# into a socket a thread reads, whole; a part from the middle
import threading
a, b = socket.socketpair()
recv = bytearray()
def reader():
    while True:
        x = b.recv(1 << 20)
        if not x:
            break
        recv.extend(x)
t = threading.Thread(target=reader)
t.start()
with open(f"{d}/p2.bin", "rb") as f:
    sent = a.sendfile(f)
    os.lseek(f.fileno(), 12345, os.SEEK_SET)
    part = os.sendfile(a.fileno(), f.fileno(), None, 100000)
    pos = f.tell()
a.shutdown(socket.SHUT_WR)
t.join()
print("socket", sent, part, pos, bytes(recv) == data[2] + data[2][12345:12345 + 100000])
# copy_file_range into a file the library does not hold; past the end
fd = os.open(f"{d}/p1.bin", os.O_RDONLY)
out = os.open(f"{d}.copy", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
n1 = os.copy_file_range(fd, out, 1 << 20, 4096, 0)
n2 = os.copy_file_range(fd, out, 8 << 20, None, None)
n3 = os.copy_file_range(fd, out, 10, len(data[1]) + 5)
print("copy_file_range", n1, n2, n3, os.lseek(fd, 0, os.SEEK_CUR))
os.close(out)
os.close(fd)
want = bytearray(data[1][4096:4096 + n1])
want[0:n2] = data[1][0:n2]
with open(f"{d}.copy", "rb") as f:
    print("copied", f.read() == bytes(want))
'
	same_output "sendfile, splice and copy_file_range out of published checkpoints" "$prog"
	# every byte came from the real files (the page cache), none through the host tier
	stats_ok host.hits==0 home.hits\>0
	local k
	for k in 0 1 2; do
		same plainrun/p$k.bin ck/p$k.bin "p$k.bin at its real path"
	done
	same plainrun.copy ck.copy "the copy_file_range copy"
}
case_add python/sendfile-published python_sendfile_published

# A thread's sendfile or splice by a descriptor's position, waiting for
# room in a pipe, out of a published checkpoint and out of a file of an
# earlier run (the kernel's copy on the real file): another thread's
# fstat, read and lseek of that descriptor go on meanwhile, as without the
# library (they waited for the copy, which waited for that thread: a hang).
python_sendfile_blocked() {
	local prog='
import os, subprocess, sys, threading
d = sys.argv[1]
data = bytes(range(256)) * 4096
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
subprocess.run([sys.executable, "-c", f"open({d!r} + \"/old.bin\", \"wb\").write(bytes(range(256)) * 4096)"],
               env=env, check=True)
with open(f"{d}/new.bin", "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
for name in ("new.bin", "old.bin"):
    open(f"{d}/{name}", "rb").read()
    for call in ("sendfile", "splice"):
        for other in ("fstat", "read", "lseek"):
            fd = os.open(f"{d}/{name}", os.O_RDONLY)
            r, w = os.pipe()
            filled = threading.Event()
            def producer():
                n = os.sendfile(w, fd, None, 65536) if call == "sendfile" else os.splice(fd, w, 65536)
                filled.set()
                os.sendfile(w, fd, None, 65536) if call == "sendfile" else os.splice(fd, w, 65536)
            t = threading.Thread(target=producer, daemon=True)
            t.start()
            filled.wait(5)
            import time
            time.sleep(0.1)  # (the producer waits for room in the full pipe)
            res = []
            def look():
                if other == "fstat":
                    res.append(os.fstat(fd).st_size)
                elif other == "read":
                    res.append(len(os.read(fd, 10)))
                else:
                    res.append(os.lseek(fd, 0, os.SEEK_CUR) >= 0)
            b = threading.Thread(target=look, daemon=True)
            b.start()
            b.join(3)
            went_on = not b.is_alive()
            got = b""
            while len(got) < 65536 * 2 - (10 if other == "read" and res else 0) and t.is_alive():
                got += os.read(r, 1 << 16)
            t.join(5)
            print(name, call, other, "went on while the copy waited:", went_on, res if went_on else "",
                  "copy done:", not t.is_alive())
            os.close(r)
            os.close(w)
            os.close(fd)
'
	same_output "fstat, read and lseek while a sendfile of the descriptor waits" "$prog"
	same plainrun/new.bin ck/new.bin "new.bin at its real path"
}
case_add_waits python/sendfile-blocked-descriptor python_sendfile_blocked

# A version published under another name and open for reading, renamed
# over a published checkpoint, the rename of its real file slowed (a
# parallel file system's metadata): a sendfile or splice of that
# descriptor meanwhile sends its version's bytes, as many as its fstat
# says (the real path still held the old file, which the copy sent).
python_sendfile_renamed_over() {
	local prog='
import os, sys, threading, time
d = sys.argv[1]
p = f"{d}/v.bin"
def write(path, b):
    with open(path, "wb") as f:
        f.write(b)
        f.flush()
        os.fsync(f.fileno())
for call in ("sendfile", "splice"):
    write(p, b"\x01" * 70000)
    open(p, "rb").read()
    write(p + ".tmp", b"\x02" * 50000)
    open(p + ".tmp", "rb").read()
    fd = os.open(p + ".tmp", os.O_RDONLY)
    size = os.fstat(fd).st_size
    t = threading.Thread(target=os.rename, args=(p + ".tmp", p))
    t.start()
    time.sleep(0.005)  # (within the rename)
    r, w = os.pipe()
    got = b""
    while True:
        n = os.sendfile(w, fd, None, 65536) if call == "sendfile" else os.splice(fd, w, 65536)
        if not n:
            break
        while n > 0:
            x = os.read(r, n)
            got += x
            n -= len(x)
    t.join()
    print(call, size, len(got), sorted(set(got)))
    for x in (r, w, fd):
        os.close(x)
    os.unlink(p)
'
	SLOW_US=30000 same_output "a sendfile of a version renamed over a checkpoint, during the rename" "$prog" SLOWFS_OPS=rename
	absent ck/v.bin "v.bin (removed by the program)"
}
case_add python/sendfile-renamed-over python_sendfile_renamed_over

# The kernel's answers to copy calls with a checkpoint on one side, where
# the library makes the copy: a splice into a checkpoint out of an empty
# pipe with SPLICE_F_NONBLOCK (EAGAIN: it waited), out of a pipe holding
# exactly 1 MiB with more asked (that MiB: it waited for more); a
# copy_file_range within one checkpoint whose ranges overlap (EINVAL: it
# copied); sendfile and splice into a pipe out of a checkpoint, from an
# offset within a page (the pipe takes the rest of that page, then whole
# pages: it counted whole pipe-fuls). Counts, errors, positions and the
# files compared with the program without the library.
python_copy_kernel_answers() {
	local prog='
import errno, fcntl, os, signal, sys
d = sys.argv[1]
signal.alarm(20)  # (a call that waits for nothing ends the program)
def call(name, f):
    try:
        print(name, f())
    except OSError as e:
        print(name, errno.errorcode[e.errno])
fd = os.open(f"{d}/in.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
r, w = os.pipe()
call("empty pipe, nonblock, by position", lambda: os.splice(r, fd, 4096, flags=os.SPLICE_F_NONBLOCK))
call("empty pipe, nonblock, at an offset", lambda: os.splice(r, fd, 4096, offset_dst=0, flags=os.SPLICE_F_NONBLOCK))
fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
os.write(w, bytes(range(256)) * 4096)
call("a full pipe of 1 MiB, 2 MiB asked", lambda: os.splice(r, fd, 2 << 20))
print("position", os.lseek(fd, 0, os.SEEK_CUR))
os.close(w)
call("a pipe whose writer is gone", lambda: os.splice(r, fd, 4096))
os.close(r)
os.close(fd)
fd = os.open(f"{d}/same.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, bytes(range(200)))
os.lseek(fd, 0, os.SEEK_SET)
for n, a, b in ((100, 0, 50), (100, 50, 0), (10, 0, 0), (50, 0, 100), (10, 300, 0)):
    call(f"copy_file_range within one file {n} {a} {b}", lambda: os.copy_file_range(fd, fd, n, a, b))
call("copy_file_range within one file by position", lambda: os.copy_file_range(fd, fd, 100))
print("position", os.lseek(fd, 0, os.SEEK_CUR))
os.close(fd)
with open(f"{d}/rw.bin", "w+b") as f:
    f.write(bytes(range(256)) * 4096)
    f.flush()
    for how in ("sendfile", "splice"):
        for at in (777, 4096, 0):
            r, w = os.pipe()
            call(f"{how} into a pipe from {at}", lambda: os.sendfile(w, f.fileno(), at, 1 << 20) if how == "sendfile"
                 else os.splice(f.fileno(), w, 1 << 20, offset_src=at))
            os.close(r)
            os.close(w)
'
	same_output "copy calls answered as the kernel answers them" "$prog"
	local f
	for f in in same rw; do
		same plainrun/$f.bin ck/$f.bin "$f.bin at its real path"
	done
}
case_add python/copy-kernel-answers python_copy_kernel_answers
case_add python/mtime-last-write python_mtime_last_write
case_add python/file-as-folder python_file_as_folder
case_add python/xattr-rewrite python_xattr_rewrite
case_add python/fsync-beside-fork python_fsync_beside_fork

# A folder listed while a new checkpoint in it is still being written
# (a rotation that keeps the last k, a progress report): without the
# library the folder holds the new file's name and its bytes so far, so
# os.listdir, glob and os.scandir see it, with its size, in the cache and
# written straight (stepping aside), small and large, and after a reopen
# for appending; a folder that is not there, and the open checkpoint listed
# as a folder, fail as without the library. The files at their real paths
# are the program's bytes.
python_list_while_writing() {
	local prog='
import os, sys, glob, hashlib
d = sys.argv[1]
for n in os.listdir(d):
    os.unlink(os.path.join(d, n))
for i in range(8):
    p = f"{d}/c{i}.bin"
    f = open(p, "wb")
    f.write(bytes([i]) * ((2 << 20) + i if i % 2 else 5000 + i))
    f.flush()
    print(i, sorted(os.listdir(d)), sorted(os.path.basename(x) for x in glob.glob(d + "/*.bin")),
          sorted((e.name, e.stat().st_size) for e in os.scandir(d)))
    if i == 3:
        # the error path: a folder that is not there, and a checkpoint
        # open as a folder, listed while the writer is open
        for bad in (d + "/nope", p):
            try:
                os.listdir(bad)
            except OSError as e:
                print("listdir", os.path.basename(bad), e.errno)
    if i == 5:
        f.close()
        f = open(p, "ab")
        f.write(b"z" * 100)
        f.flush()
        print("append", sorted((e.name, e.stat().st_size) for e in os.scandir(d)))
    f.close()
for n in sorted(os.listdir(d)):
    print(n, hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest())
'
	local aside
	for aside in off auto; do
		rm -rf "$T/ck" "$T/plainrun" && mkdir -p "$T/ck"
		same_output "listings while writing (stepping aside $aside)" "$prog" CKPTCACHE_STEP_ASIDE=$aside
		local f
		for f in "$T"/plainrun/c*.bin; do
			same "$f" "$T/ck/${f##*/}" "${f##*/} at its real path (stepping aside $aside)"
		done
	done
}
case_add python/list-while-writing python_list_while_writing

# The inode of a checkpoint created exclusively (open "x", O_EXCL,
# mkstemp), as fstat and stat report it before its publication, is the
# inode of its real file after it: a program that records it (GNU tar's
# placeholders, a samefile check) finds the same file afterwards, through
# a rename in its folder, an fsync and the close, for one file and for 300
# at once; the numbers this process saw are those of the real files
# without the library.
python_inode_kept() {
	local prog='
import os, sys, tempfile
d = sys.argv[1]
for n in os.listdir(d):
    os.unlink(os.path.join(d, n))
p = f"{d}/a.bin"
f = open(p, "xb")
seen = [os.fstat(f.fileno()).st_ino]
f.write(b"a" * 100000)
seen.append(os.stat(p).st_ino)
f.close()
seen.append(os.lstat(p).st_ino)
os.rename(p, f"{d}/b.bin")
seen.append(os.stat(f"{d}/b.bin").st_ino)
with open(f"{d}/b.bin", "rb+") as g:
    os.fsync(g.fileno())
    seen.append(os.fstat(g.fileno()).st_ino)
print("one file:", len(set(seen)), "inode(s)")
fd, tp = tempfile.mkstemp(dir=d, suffix=".part")
t0 = os.fstat(fd).st_ino
os.write(fd, b"t" * 70000)
os.close(fd)
os.replace(tp, f"{d}/t.bin")
with open(f"{d}/t.bin", "rb") as g:
    os.fsync(g.fileno())
print("mkstemp, then a rename:", t0 == os.stat(f"{d}/t.bin").st_ino)
inos = []
for k in range(300):
    with open(f"{d}/m{k:03d}.bin", "xb") as h:
        inos.append(os.fstat(h.fileno()).st_ino)
        h.write(bytes([k % 256]) * (k + 1))
for k in range(300):
    with open(f"{d}/m{k:03d}.bin", "rb") as h:
        os.fsync(h.fileno())
print("300 files:", sum(os.stat(f"{d}/m{k:03d}.bin").st_ino == inos[k] for k in range(300)), "kept theirs")
# created, written and closed, then looked at (its publication may be under
# way): the inode of the real file, and no two files with one
loop = []
for k in range(200):
    fd = os.open(f"{d}/l{k:03d}.bin", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, b"l" * (k + 1))
    os.close(fd)
    loop.append(os.stat(f"{d}/l{k:03d}.bin").st_ino)
print("200 closed, then looked at:", len(set(loop)), "inodes")
# unlinked while open: the same file as before
fd = os.open(d + "/u.bin", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
u0 = os.fstat(fd).st_ino
os.write(fd, b"data")
os.unlink(d + "/u.bin")
u1 = os.fstat(fd)
print("unlinked:", u0 == u1.st_ino, u1.st_nlink, u1.st_size)
os.close(fd)
with open(f"{sys.argv[1]}.inodes", "w") as out:
    out.write(f"b.bin {seen[0]}\n")
    out.write(f"t.bin {t0}\n")
    for k in range(0, 300, 37):
        out.write(f"m{k:03d}.bin {inos[k]}\n")
    for k in range(0, 200, 23):
        out.write(f"l{k:03d}.bin {loop[k]}\n")
'
	same_output "inodes of new checkpoints" "$prog"
	local name ino
	while read -r name ino; do
		[ "$(stat -c %i "ck/$name")" = "$ino" ] ||
			fail "$name: the process saw inode $ino, its real file has $(stat -c %i "ck/$name")"
		same "plainrun/$name" "ck/$name" "$name at its real path"
	done <ck.inodes
	[ -s ck.inodes ] || fail "the program wrote no inode list"
}
case_add python/inode-kept python_inode_kept

# glibc's realpath(3) and canonicalize_file_name(3) look at the path with
# the C library's own calls: of a checkpoint still open for writing, of a
# closed one not yet published, of its descriptor's /proc/self/fd/N, and
# by a relative path, they name the file as without the library; a missing
# name is ENOENT either way. The bytes are the program's at the real path.
python_realpath() {
	local prog='
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.realpath.restype = ctypes.c_void_p
libc.canonicalize_file_name.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
d = os.path.realpath(sys.argv[1])
os.makedirs(d + "/sub", exist_ok=True)
os.chdir(d)
def rp(q, fn):
    ctypes.set_errno(0)
    r = fn(q.encode(), None) if fn is libc.realpath else fn(q.encode())
    if not r:
        return "errno %d" % ctypes.get_errno()
    s = ctypes.string_at(r).decode()
    libc.free(r)
    return s.replace(d, "D")
for fn in (libc.realpath, libc.canonicalize_file_name):
    p = d + "/sub/a.bin"
    f = open(p, "wb")
    f.write(b"x" * 5000)
    f.flush()
    print("open:", rp(p, fn), rp("/proc/self/fd/%d" % f.fileno(), fn), rp("sub/../sub/a.bin", fn))
    f.close()
    print("closed:", rp(p, fn), rp("./sub/a.bin", fn), rp("sub/nope.bin", fn), rp("sub/a.bin/x", fn))
    os.unlink(p)
    print("removed:", rp(p, fn))
with open(d + "/sub/kept.bin", "wb") as f:
    f.write(b"k" * 70000)
'
	same_output "realpath of checkpoints" "$prog"
	same plainrun/sub/kept.bin ck/sub/kept.bin "kept.bin at its real path"
}
case_add python/realpath python_realpath

# The calls about a file's file system (statvfs, fstatvfs, pathconf,
# fpathconf) and the C library's euidaccess/eaccess, which look with the C
# library's own calls: on a checkpoint still open for writing (its
# descriptor a placeholder of the library's), and on a closed one not yet
# published, they answer as without the library; truncate of a cached
# checkpoint, which publishes it first, leaves errno alone.
python_fs_calls() {
	local prog='
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1]
def fs(v):
    return (v.f_bsize, v.f_fsid, v.f_namemax, v.f_flag)
here = fs(os.statvfs(d))
p = d + "/a.bin"
f = open(p, "wb")
f.write(b"x" * 100000)
f.flush()
print("open: statvfs", fs(os.statvfs(p)) == here, "fstatvfs", fs(os.fstatvfs(f.fileno())) == here,
      "pathconf", os.pathconf(p, "PC_NAME_MAX"), "fpathconf", os.fpathconf(f.fileno(), "PC_NAME_MAX"))
f.close()
print("closed: statvfs", fs(os.statvfs(p)) == here, "pathconf", os.pathconf(p, "PC_NAME_MAX"))
for name in ("euidaccess", "eaccess"):
    fn = getattr(libc, name)
    print(name, fn(p.encode(), os.R_OK | os.W_OK), fn((d + "/nope.bin").encode(), os.F_OK), ctypes.get_errno())
for q in (d + "/nope.bin", p + "/x"):
    try:
        os.statvfs(q)
    except OSError as e:
        print("statvfs", os.path.basename(q), e.errno)
ctypes.set_errno(0)
print("truncate", libc.truncate(p.encode(), ctypes.c_long(70000)), "errno", ctypes.get_errno(), os.stat(p).st_size)
'
	same_output "file-system calls on checkpoints" "$prog"
	same plainrun/a.bin ck/a.bin "a.bin at its real path"
}
case_add python/fs-calls python_fs_calls

# A checkpoint's descriptor looked at by its name in /proc/self/fd or
# /dev/fd, or a thread's (/proc/TID/fd, /proc/self/task/TID/fd) (a program
# that sizes its restore with os.path.getsize of it):
# stat, lstat and the os.path tests answer for the checkpoint, as without
# the library, while it is written, once closed and read, and for a
# rewritten one; fstat agrees.
python_procfd_stat() {
	local prog='
import os, stat, sys, threading
d = sys.argv[1]
def look(fd, what):
    # names through another thread of the process: its id, its task entry
    ready, done, tid = threading.Event(), threading.Event(), []
    def park():
        tid.append(threading.get_native_id())
        ready.set()
        done.wait()
    t = threading.Thread(target=park)
    t.start()
    ready.wait()
    out = []
    for where in ("/proc/self/fd/%d" % fd, "/dev/fd/%d" % fd, "/proc/%d/fd/%d" % (os.getpid(), fd),
                  "/proc/thread-self/fd/%d" % fd, "/proc/%d/fd/%d" % (tid[0], fd),
                  "/proc/self/task/%d/fd/%d" % (tid[0], fd), "/proc/%d/task/%d/fd/%d" % (os.getpid(), tid[0], fd)):
        st, lst = os.stat(where), os.lstat(where)
        out.append("%s %o %d isfile=%s isdir=%s getsize=%d link=%o" % (
            where.split("/")[1], st.st_mode, st.st_size, os.path.isfile(where), os.path.isdir(where),
            os.path.getsize(where), lst.st_mode))
    done.set()
    t.join()
    fs = os.fstat(fd)
    print(what, "fstat %o %d" % (fs.st_mode, fs.st_size), "|", " | ".join(out))
p = d + "/c.bin"
for n in (5000007, 4096, 0):
    with open(p, "wb") as f:
        f.write(b"y" * n)
        f.flush()
        look(f.fileno(), "writing %d" % n)
    with open(p, "rb") as f:
        look(f.fileno(), "reading %d" % n)
        if len(f.read(os.path.getsize("/dev/fd/%d" % f.fileno()))) != n:
            sys.exit("short restore")
    with open(p, "r+b") as f:
        look(f.fileno(), "updating %d" % n)
'
	same_output "stat of a checkpoint by its descriptor's name" "$prog"
	same plainrun/c.bin ck/c.bin "c.bin at its real path"
	# names the kernel refuses for a checkpoint's descriptor (a leading
	# zero, a slash or more after the number, a closed number, another
	# process's number) are refused as without the library; the
	# placeholder behind the number is a folder for the kernel
	prog='
import os, subprocess, sys
d = sys.argv[1]
def tried(what, f, *a):
    try:
        r = f(*a)
        if isinstance(r, os.stat_result):
            r = "%o %d" % (r.st_mode, r.st_size)
        elif isinstance(r, int) and f is os.open:
            os.close(r)
            r = "opened"
        print(what, "->", r)
    except OSError as e:
        print(what, "-> errno", e.errno)
with open(d + "/e.bin", "wb") as f:
    f.write(b"e" * 70000)
    f.flush()
    fd = f.fileno()
    # another process at rest: started, settled (its start-up files closed)
    other = subprocess.Popen([sys.executable, "-c", "import sys; print(1, flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    other.stdout.readline()
    for name in ("/dev/fd/0%d" % fd, "/proc/self/fd/00%d" % fd, "/dev/fd/%d/" % fd, "/dev/fd/%d/." % fd,
                 "/proc/self/fd/%d/x" % fd, "/proc/%d/fd/%d" % (other.pid, fd), "/dev/fd/%d" % (fd + 40)):
        shown = name.replace("/%d/" % other.pid, "/PID/")
        tried("stat " + shown, os.stat, name)
        tried("lstat " + shown, os.lstat, name)
        tried("access " + shown, os.access, name, os.R_OK)
        tried("isdir " + shown, os.path.isdir, name)
        tried("open " + shown, os.open, name, os.O_RDONLY)
    tried("create", os.open, "/dev/fd/%d/new.bin" % fd, os.O_WRONLY | os.O_CREAT, 0o644)
    tried("mkdir", os.mkdir, "/dev/fd/%d/sub" % fd)
    tried("listdir", os.listdir, "/dev/fd/%d" % fd)
    other.stdin.close()
    other.wait()
print(os.listdir(d), os.path.getsize(d + "/e.bin"))
'
	same_output "refused names of a checkpoint's descriptor" "$prog"
	same plainrun/e.bin ck/e.bin "e.bin at its real path"
}
case_add python/procfd-stat python_procfd_stat

# A tagged folder's symbolic link to a folder no pattern tags: files
# written through the link, or renamed into it, are read back by their
# untagged real path in the same process (listed, opened, looked at) right
# away, and through the link too, as without the library.
python_link_to_untagged() {
	local prog='
import os, sys
d = sys.argv[1]
out = os.path.join(os.path.dirname(d), "outside_" + os.path.basename(d))
os.makedirs(out, exist_ok=True)
os.symlink(out, d + "/toplain")
for i in range(5):
    with open(d + "/toplain/f%d" % i, "wb") as f:
        f.write(bytes([65 + i]) * (1000 + i))
    with open(out + "/f%d" % i, "rb") as f:
        print(i, len(f.read()), os.stat(out + "/f%d" % i).st_size)
with open(d + "/y.bin", "wb") as f:
    f.write(b"y" * 3000)
os.rename(d + "/y.bin", d + "/toplain/y.bin")
print("renamed into it:", len(open(out + "/y.bin", "rb").read()), os.path.exists(d + "/y.bin"))
# a link to a folder that is not there: the open fails as the kernel says
os.symlink(out + "/missing", d + "/gone")
try:
    open(d + "/gone/z.bin", "wb")
    print("through a dangling link: opened")
except OSError as e:
    print("through a dangling link: errno", e.errno)
print(sorted(os.listdir(out)))
print([len(open(d + "/toplain/f%d" % i, "rb").read()) for i in range(5)])
'
	same_output "writes through a link to an untagged folder" "$prog"
	local i
	for i in f0 f1 f2 f3 f4 y.bin; do
		same "outside_plainrun/$i" "outside_ck/$i" "$i in the untagged folder"
	done
}
case_add names/link-to-untagged python_link_to_untagged

# Exclusively created checkpoints beyond the number of unnamed files a
# process holds for their inodes (a quarter of its descriptor limit, at
# least 64: 256 here, so 64): 300 are made, looked at, written and closed;
# every one reads back its bytes, in the process and at its real path, and
# no error is reported.
python_inode_bound() {
	local prog='
import os, sys
d = sys.argv[1]
for k in range(300):
    fd = os.open(f"{d}/b{k:03d}.bin", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.fstat(fd)
    os.write(fd, bytes([k % 251]) * (100 + k))
    os.close(fd)
ok = sum(open(f"{d}/b{k:03d}.bin", "rb").read() == bytes([k % 251]) * (100 + k) for k in range(300))
for k in range(300):
    os.stat(f"{d}/b{k:03d}.bin")
print("read back:", ok)
'
	local out
	out=$(ck -- bash -c 'ulimit -n 256 && exec "$@"' sh "$PY" -c "$prog" "$T/ck") ||
		fail "the program with the library$(last_error)"
	[ "$out" = "read back: 300" ] || fail "$out"
	grep -aq 'ckptcache: error' "$T/.log" && fail "an error:$(first_error 'ckptcache: error')"
	local k
	for k in 0 63 64 150 299; do
		k=$(printf %03d $k)
		"$PY" -c 'import sys; k = int(sys.argv[1]); sys.stdout.buffer.write(bytes([k % 251]) * (100 + k))' "$k" >ref
		same ref "ck/b$k.bin" "b$k.bin at its real path"
	done
}
case_add python/inode-bound python_inode_bound

# A chown clears a regular file's set-user-ID bit, and its set-group-ID bit
# where its group may run it (for root too, and for a chown that changes
# nothing); a chmod after it sets them again. The modes the program sees,
# and those of the real files after it ends, are those without the library,
# whatever the order of the calls (tar xpf as root makes a chown then a
# chmod for each file it extracts) and whichever side stepping aside chose.
python_chown_setid() {
	local prog='
import os, stat, sys
d = sys.argv[1]
me, grp = os.getuid(), os.getgid()
seqs = {
    "chown-chmod4755": [("chown",), ("chmod", 0o4755)],
    "chmod4755-chown": [("chmod", 0o4755), ("chown",)],
    "chmod2775-chown": [("chmod", 0o2775), ("chown",)],
    "chmod2745-chown": [("chmod", 0o2745), ("chown",)],
    "chmod6755-fchown-open": [("chmod", 0o6755), ("fchown",)],
    "chown-chmod6711-chown": [("chown",), ("chmod", 0o6711), ("chown",)],
}
for k, (name, seq) in enumerate(sorted(seqs.items())):
    for size in (100, 3 << 20):
        p = f"{d}/{name}-{size}.bin"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, bytes([k]) * size)
        for step in seq:
            if step[0] == "chown":
                os.chown(p, me, grp)
            elif step[0] == "fchown":
                os.fchown(fd, -1, -1)
            else:
                os.chmod(p, step[1])
        print(name, size, oct(stat.S_IMODE(os.fstat(fd).st_mode)), oct(stat.S_IMODE(os.stat(p).st_mode)))
        os.close(fd)
'
	local side
	for side in off auto; do
		rm -rf "$T/ck"/* "$T/plainrun"
		same_output "chown and chmod (step aside $side)" "$prog" CKPTCACHE_STEP_ASIDE=$side
		(cd "$T/plainrun" && plain stat -c '%n %a' *.bin) >want.txt
		(cd "$T/ck" && plain stat -c '%n %a' *.bin) >got.txt
		outputs_match want.txt got.txt
	done
}
case_add python/chown-setid python_chown_setid

# A script's loop over one folder by absolute paths (the open answered from
# the folder's plan once the first tagged path there was looked at): tagged
# checkpoints and untagged logs side by side, of many sizes, written and
# read back; the bytes read in the process and those at the real paths
# without the library are the ones written, and the opens the kernel
# refuses (a missing checkpoint, a name longer than NAME_MAX, a file's
# name spelt as a folder, a checkpoint in a folder that is missing) fail
# with the same errors as without the library.
python_folder_loop() {
	cat >loop.py <<'PYEOF'
import errno, hashlib, os, sys
d = os.path.join(sys.argv[1], "run")
os.makedirs(d, exist_ok=True)
names = [f"ckpt_{i:03d}.bin" if i % 2 == 0 else f"log_{i:03d}.json" for i in range(120)]
def body(i):
    return bytes((i * 7 + k) % 251 for k in range((i * 997) % 20000 + 1))
if sys.argv[2] == "write":
    for i, n in enumerate(names):
        with open(os.path.join(d, n), "wb") as f:
            f.write(body(i))
    for i, n in enumerate(names):
        with open(os.path.join(d, n), "rb") as f:
            if f.read() != body(i):
                print("differs in the process:", n)
    for p in (os.path.join(d, "ckpt_999.bin"), os.path.join(d, "x" * 300 + ".bin"),
              os.path.join(d, "ckpt_000.bin") + "/", os.path.join(d, "gone", "ckpt_0.bin")):
        try:
            open(p, "rb").close()
            print("opened", os.path.basename(p.rstrip("/")))
        except OSError as e:
            print(errno.errorcode[e.errno])
print(hashlib.sha256(b"".join(open(os.path.join(d, n), "rb").read() for n in names)).hexdigest())
PYEOF
	local want got real
	mkdir -p plainrun
	want=$(plain "$PY" loop.py "$T/plainrun" write) || fail "the loop without the library"
	got=$(ck CKPTCACHE_PATHS="$T/ck/*/ckpt_*.bin" -- "$PY" loop.py "$T/ck" write) ||
		fail "the loop with the library$(last_error)"
	[ "$got" = "$want" ] || fail "with the library: $(echo "$got" | tr '\n' ' '); without: $(echo "$want" | tr '\n' ' ')"
	# the 60 checkpoints were tagged (the first maybe written at its real
	# path while the cache starts), the logs not
	stats_ok files==1 objects.written\>=59 objects.written\<=60 objects.opened_for_read\>=120
	real=$(plain "$PY" loop.py "$T/ck" check) || fail "the check without the library"
	[ "$real" = "$(echo "$want" | tail -1)" ] || fail "the real files hold other bytes: $real"
	ls "$T/ck/run" | grep -q '^ckpt_' || fail "no checkpoint at its real path"
}
case_add python/folder-loop python_folder_loop

# readv/writev/preadv/pwritev with pieces of every size (empty ones, runs
# of small ones gathered together, ones too large to gather, a vector
# longer than the gathering buffer), at the position, at offsets, on an
# O_APPEND descriptor and past the end of the file: the answers, the
# bytes read into each piece and the files are those of the program
# without the library, in the cache and written straight to the real path.
python_vectors() {
	local prog='
import hashlib, os, sys
d = sys.argv[1]
cycle = bytes(range(251)) * 220
def pieces(seed, n):
    out = []
    for i in range(n):
        s = (seed * 7919 + i * 104729) % 997
        ln = 0 if s % 11 == 0 else (s * 53 if s % 13 == 0 else s % 300)
        # bytes (seed + i + j) % 251 for j below ln
        k = (seed + i) % 251
        out.append(cycle[k:k + ln])
    return out
with open(f"{d}/v0.bin", "wb") as f:
    f.write(b"first" * 300000)
for k in (1, 2):
    fd = os.open(f"{d}/v{k}.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    total = 0
    for r in range(60):
        p = pieces(r + k, 1 + (r * 37) % 900)
        total += os.writev(fd, p)
    print("wrote", total, os.lseek(fd, 0, os.SEEK_CUR))
    print("pwritev", os.pwritev(fd, pieces(99, 50), 1000), os.pwritev(fd, [b"a" * 70000, b"b" * 3, b"", b"c" * 20000], total - 5))
    size = os.fstat(fd).st_size
    for off in (0, 1, 4095, size - 100, size + 10):
        bufs = [bytearray(n) for n in (0, 1, 17, 300, 0, 5000, 20000, 64, 3)]
        n = os.preadv(fd, bufs, max(off, 0))
        print("preadv", off, n, hashlib.sha256(b"".join(bytes(b) for b in bufs)).hexdigest()[:16])
    os.lseek(fd, 0, os.SEEK_SET)
    got = 0
    h = hashlib.sha256()
    while True:
        bufs = [bytearray(n) for n in (7, 300, 0, 4096, 100, 1)]
        n = os.readv(fd, bufs)
        if n == 0:
            break
        h.update(b"".join(bytes(b) for b in bufs)[:n])
        got += n
    print("readv", got, size, h.hexdigest()[:16])
    os.close(fd)
fd = os.open(f"{d}/v3.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for r in range(20):
    os.writev(fd, pieces(r, 40))
    os.pwrite(fd, b"P" * 10, 0)
os.close(fd)
for k in range(4):
    print(k, hashlib.sha256(open(f"{d}/v{k}.bin", "rb").read()).hexdigest())
'
	local mode
	for mode in off auto; do
		rm -rf plainrun ck
		mkdir -p ck
		phase $mode
		same_output "vectors ($mode)" "$prog" CKPTCACHE_STEP_ASIDE=$mode
		local k
		for k in 0 1 2 3; do
			same plainrun/v$k.bin ck/v$k.bin "v$k.bin at its real path ($mode)"
		done
	done
}
case_add python/vectors python_vectors

# readv/writev of checkpoints written straight to their real paths (the
# second and third of a process, stepping aside) with a piece the program
# cannot read (writev) or write (readv), first or in the middle of a run
# of small pieces: the kernel's answer (the pieces before it, or EFAULT),
# the same position and files as without the library. (Where the cache
# holds a checkpoint in memory, such a piece faults in the program:
# ckptcache(7), UNSUPPORTED CALL PATHS.)
python_vectors_bad_pieces() {
	local prog='
import ctypes, hashlib, os, sys
d = sys.argv[1]
with open(f"{d}/e.bin", "wb") as f:
    f.write(b"first" * 400000)
libc = ctypes.CDLL(None, use_errno=True)
class IOV(ctypes.Structure):
    _fields_ = [("b", ctypes.c_void_p), ("n", ctypes.c_size_t)]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
for f in (libc.writev, libc.readv):
    f.restype = ctypes.c_ssize_t
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
ro = libc.mmap(None, 4096, 1, 0x22, -1, 0)
for bad in (0, 10):
    bufs = [ctypes.create_string_buffer(bytes([65 + i]) * 100, 100) for i in range(20)]
    v = (IOV * 20)(*[IOV(ctypes.addressof(b), 100) for b in bufs])
    fd = os.open(f"{d}/e{bad}.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"z" * 2000000)
    v[bad].b = 16
    r = libc.writev(fd, v, 20)
    print("writev bad", bad, r, ctypes.get_errno() if r < 0 else 0, os.lseek(fd, 0, os.SEEK_CUR))
    v[bad].b = ro
    os.lseek(fd, 1999990, os.SEEK_SET)
    r = libc.readv(fd, v, 20)
    print("readv bad", bad, r, ctypes.get_errno() if r < 0 else 0, os.lseek(fd, 0, os.SEEK_CUR),
          hashlib.sha256(b"".join(b.raw for b in bufs)).hexdigest()[:16])
    os.close(fd)
for n in ("e", "e0", "e10"):
    print(n, hashlib.sha256(open(f"{d}/{n}.bin", "rb").read()).hexdigest())
'
	phase straight
	same_output "bad pieces" "$prog" CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_PATHS="$T/ck/e*.bin"
	local n
	for n in e e0 e10; do
		same plainrun/$n.bin ck/$n.bin "$n.bin at its real path"
	done
	stats_ok files==1 step_aside.written_straight\>=3
}
case_add python/vectors-bad-pieces python_vectors_bad_pieces

# Two threads of one process rewrite the same 20 files in turn (open "wb",
# write, close): one thread's open may go straight to the real file (the
# stepping-aside model, or a second open of a file open for writing) while
# the other's is cached. No file is "changed by another program", no
# rescue file is made, and each file holds one whole write of one thread,
# as without the library. Three runs (the overlap is a matter of timing),
# with no other case beside it: on a machine loaded by two busy loops, 14
# runs in 100 met a version reported as changed before the opens of a
# path whose writer was just handed over went to its real file too
# (robust/handed-writer-reopened), 1 in 100 since; beside other tests'
# work, 4 runs in 91 since, 3 in 35 before (the bytes kept: the file holds
# the other thread's write, the version a rescue file). What is left is
# not understood.
python_threads_rewrite_one_file() {
	local prog='
import os, sys, threading
d = sys.argv[1]
def writer(t):
    for i in range(400):
        with open(f"{d}/t{i % 20}.bin", "wb") as f:
            f.write(bytes([t]) * 50000)
ths = [threading.Thread(target=writer, args=(t,)) for t in (1, 2)]
[t.start() for t in ths]
[t.join() for t in ths]
bad = [j for j in range(20)
       if (lambda c: len(c) != 50000 or c.count(c[:1]) != 50000)(open(f"{d}/t{j}.bin", "rb").read())]
print("files not one whole write:", bad)
'
	local k
	for k in 1 2 3; do
		rm -rf ck plainrun rescue
		mkdir -p ck plainrun rescue
		plain "$PY" -c "$prog" plainrun >want.txt || fail "the program without the library"
		ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_RESCUE_DIR="$T/rescue" -- "$PY" -c "$prog" ck \
			>got.txt 2>err.txt || fail "the program with the library$(last_error)"
		cat err.txt
		outputs_match want.txt got.txt
		grep -q 'ckptcache: error' err.txt && fail "run $k: $(grep -c 'ckptcache: error' err.txt) error(s):$(grep -m1 'ckptcache: error' err.txt | cut -c1-200)"
		[ -z "$(find rescue -type f)" ] || fail "run $k: rescue files made: $(find rescue -type f | head -3 | tr '\n' ' ')"
		# the bytes at the real paths, read without the library
		plain "$PY" -c 'import sys; d = sys.argv[1]; print(sum(1 for j in range(20) if len(set(open(f"{d}/t{j}.bin", "rb").read())) == 1))' ck >n.txt
		[ "$(cat n.txt)" = 20 ] || fail "run $k: $(cat n.txt) of 20 files hold one write at their real paths"
	done
	return 0
}
case_add_alone python/threads-rewrite-one-file python_threads_rewrite_one_file

# A checkpoint the program maps (numpy's mmap_mode, a C program's
# MAP_SHARED, the descriptor closed or kept), then rewrites at the same
# size (np.save over it, open O_TRUNC + write): the mapping shows the new
# bytes, as without the library, where the kernel truncates and writes
# the one file. (A new version published by a rename left the mapping on
# the old file: the program read the old bytes through it.) The files at
# their real paths are the same as without the library.
python_mapped_rewrite() {
	"$PY" -c 'import numpy' 2>/dev/null || fail "numpy cannot be imported by $PY (install python3-numpy)"
	cat >mr.c <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int c, char **v)
{
	size_t n = (1 << 20) + 3;
	char *b = malloc(n), p[4096];
	int keep = c == 3 && v[2][0] == '1';
	snprintf(p, sizeof p, "%s/state.bin", v[1]);
	for (int k = 0; b && k < 4; k++) {
		memset(b, 'A' + k, n);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, b, n) != (ssize_t)n || close(fd))
			return 2;
		int rfd = open(p, O_RDONLY);
		char *m = rfd < 0 ? MAP_FAILED : mmap(0, n, PROT_READ, MAP_SHARED, rfd, 0);
		if (m == MAP_FAILED)
			return 3;
		if (!keep)
			close(rfd);
		memset(b, 'a' + k, n);
		fd = open(p, O_WRONLY | O_TRUNC);
		if (fd < 0 || write(fd, b, n) != (ssize_t)n || close(fd))
			return 4;
		printf("%d: %c%c\n", k, m[0], m[n - 1]);
		munmap(m, n);
		if (keep)
			close(rfd);
	}
	return 0;
}
C
	gcc -O2 -o mr mr.c || fail "the C program did not compile"
	local prog='
import numpy as np, sys
d = sys.argv[1]
for k in range(4):
    np.save(f"{d}/s.npy", np.full(300000, k, dtype=np.float64))
    x = np.load(f"{d}/s.npy", mmap_mode="r")
    np.save(f"{d}/s.npy", np.full(300000, 100 + k, dtype=np.float64))
    print(k, x[0], x[-1])
    del x
'
	local keep
	for keep in 0 1; do
		rm -rf plainrun ck && mkdir -p plainrun ck
		plain ./mr plainrun $keep >want.txt || fail "the C program without the library"
		ck -- ./mr ck $keep >got.txt || fail "the C program with the library$(last_error)"
		outputs_match want.txt got.txt
		same plainrun/state.bin ck/state.bin "state.bin at its real path (descriptor kept: $keep)"
	done
	rm -rf plainrun ck && mkdir -p plainrun ck
	same_output "numpy's mapping" "$prog"
	same plainrun/s.npy ck/s.npy "s.npy at its real path"
}
case_add python/mapped-rewrite python_mapped_rewrite

# A checkpoint mapped a second time after its first mapping is gone (a
# restart that peeks at the header, unmaps, then maps the whole file),
# mapped through two descriptors, or twice through one, the first mapping
# gone: a rewrite with O_TRUNC shows in the live mapping, as without the
# library (the second mapping is of a descriptor already made the real
# file's).
python_mapped_again() {
	local prog='
import mmap, os, sys
d = sys.argv[1]
p = f"{d}/mm.bin"
n = 100003
def write(b):
    with open(p, "wb") as f:
        f.write(b * n)
for case in ("peek then map", "two descriptors", "two alive, one gone"):
    write(b"A")
    fd = os.open(p, os.O_RDONLY)
    if case == "two descriptors":
        fd2 = os.open(p, os.O_RDONLY)
        first = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        m = mmap.mmap(fd2, 0, access=mmap.ACCESS_READ)
        first.close()
    elif case == "two alive, one gone":
        first = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        m = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        first.close()
    else:
        first = mmap.mmap(fd, 4096, access=mmap.ACCESS_READ)
        first.close()
        m = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    write(b"B")
    print(case, m[:1], m[-1:], m[:] == b"B" * n)
    m.close()
    os.close(fd)
    if case == "two descriptors":
        os.close(fd2)
'
	same_output "a checkpoint mapped again, then rewritten" "$prog" CKPTCACHE_STEP_ASIDE=off
	same plainrun/mm.bin ck/mm.bin "mm.bin at its real path"
}
case_add python/mapped-again python_mapped_again

# An HDF5 file made with h5py's "w" mode and opened again by the same
# process while it is open for writing (HDF5 looks for a file it has open
# by device and inode, and shares it): the second open reads it, as
# without the library; a new file opened for reading and writing reports
# one inode to both its descriptors, before the second open and after; and
# h5py's "w" of a file the process has open for reading is refused, as
# without the library, leaving the file whole (it was truncated, its
# reader broken and the file left empty at its real path).
# (The first descriptor reported a number derived from the path, the
# second the real file's: HDF5 took them for two files and failed to lock
# its own.)
python_h5py_opened_twice() {
	"$PY" -c 'import h5py' 2>/dev/null || fail "h5py cannot be imported by $PY (install python3-h5py)"
	local prog='
import os, sys, h5py, numpy as np
d = sys.argv[1]
for i in range(3):
    p = f"{d}/f{i}.h5"
    f1 = h5py.File(p, "w")
    f1["x"] = np.arange(300000) + i
    f1.flush()
    with h5py.File(p, "r") as f2:
        print(i, "second open reads", int(f2["x"][5]))
    f1.close()
    fd = os.open(f"{d}/g{i}.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"x" * 3000000)
    a = os.fstat(fd).st_ino
    fd2 = os.open(f"{d}/g{i}.bin", os.O_RDONLY)
    print(i, "one inode", a == os.fstat(fd2).st_ino == os.fstat(fd).st_ino, len(os.read(fd2, 1 << 22)))
    os.close(fd2)
    os.close(fd)
for i in range(3):
    p = f"{d}/o{i}.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.arange(2000000) + i
    np.save(f"{d}/pad{i}.npy", np.zeros(2000000))
    f1 = h5py.File(p, "r")
    try:
        h5py.File(p, "w").close()
        print(i, "truncated while open")
    except OSError as e:
        print(i, "truncation while open refused")
    print(i, "the open reader reads", int(f1["x"][7]))
    f1.close()
'
	same_output "an HDF5 file opened twice" "$prog" CKPTCACHE_STEP_ASIDE=off
	local i
	for i in 0 1 2; do
		same "plainrun/g$i.bin" "ck/g$i.bin" "g$i.bin at its real path"
		plain "$PY" -c '
import h5py, sys
d, i = sys.argv[1], int(sys.argv[2])
assert int(h5py.File(f"{d}/f{i}.h5", "r")["x"][5]) == 5 + i
assert int(h5py.File(f"{d}/o{i}.h5", "r")["x"][7]) == 7 + i
' "$T/ck" $i || fail "f$i.h5 or o$i.h5 at its real path"
	done
}
case_add python/h5py-opened-twice python_h5py_opened_twice

# More mappings of checkpoints than the library keeps a record of (256):
# numpy maps 300 files, then rewrites the first, the 257th and the last
# while they are all mapped. Every mapping shows its file's new bytes, as
# without the library (past the record, every rewrite goes in place, as
# the kernel's does); the files at their real paths are the same too.
python_mapped_rewrite_many() {
	"$PY" -c 'import numpy' 2>/dev/null || fail "numpy cannot be imported by $PY (install python3-numpy)"
	local prog='
import numpy as np, sys
d = sys.argv[1]
n = 300
for i in range(n):
    np.save(f"{d}/m{i:03d}.npy", np.full(1000 + i, i, dtype=np.int32))
maps = [np.load(f"{d}/m{i:03d}.npy", mmap_mode="r") for i in range(n)]
for i in (0, 256, n - 1):
    np.save(f"{d}/m{i:03d}.npy", np.full(1000 + i, 10000 + i, dtype=np.int32))
print([(i, int(maps[i][0]), int(maps[i][-1])) for i in (0, 1, 255, 256, 257, n - 1)])
print(sum(int(m.sum()) for m in maps))
'
	same_output "300 mappings, three files rewritten" "$prog"
	local i
	for i in 000 001 255 256 257 299; do
		same "plainrun/m$i.npy" "ck/m$i.npy" "m$i.npy at its real path"
	done
}
case_add python/mapped-rewrite-many python_mapped_rewrite_many
