# Stepping aside (CKPTCACHE_STEP_ASIDE, src/aside.c): in copy mode a new
# checkpoint goes straight to its real path when that proved as fast for
# the program as the cache. The other cases run with it off (lib.sh), so
# that what they check of the cache does not depend on the page cache's
# speed; these run it as a user gets it, on the programs' own data.

# aside_proxy_run N EXTRA...: the proxy writes N checkpoints of 2 MiB of the
# reference data and reads them back in reverse, with the library and
# CKPTCACHE_STEP_ASIDE as EXTRA says; each checkpoint is checked at its
# real path afterwards without the library.
aside_proxy_run() {
	local n=$1 i
	shift
	[ -n "$PROXY" ] || fail "no rtm_proxy program"
	[ -d "$REF" ] || fail "no reference checkpoints"
	ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HOST_CACHE=16M "$@" -- "$PROXY" --dir "$T/ck" --count "$n" \
		--size "$REF_SIZE" --order reverse --seed "$REF_SEED" --keep --interval-ms 0 >"$T/proxy.out" 2>&1
	local rc=$?
	cat "$T/proxy.out"
	[ $rc -eq 0 ] || fail "rtm_proxy exited with status $rc$(last_error)"
	grep -q "^RESULT .*verified=$n/$n" "$T/proxy.out" || fail "rtm_proxy did not verify $n/$n checkpoints"
	for ((i = 0; i < n && i < REF_COUNT; i++)); do
		same "$(printf '%s/ck/ckpt_%05d.bin' "$T" $i)" "$(ref_ckpt $i)" "checkpoint $i at its real path"
	done
}

# A process begins on the real path, as without the library: its first
# checkpoint goes there before the cache starts, the cache's first two go
# straight there too, the next tries the cache; whatever the outcome,
# every byte is right.
aside_tries_both_sides() {
	phase auto
	aside_proxy_run 12 CKPTCACHE_STEP_ASIDE=auto
	stats_ok files==1 step_aside.on==1 step_aside.tries\>=1 step_aside.written_straight\>=2 \
		host.put_ops\>0 objects.written==11 objects.opened_for_read==12
}

# A real path whose writes take 40 ms each (a slow parallel file system):
# after the three checkpoints that begin there (the first before the cache
# starts), the cache takes them, and the real path is tried again once in
# the next eight.
aside_slow_real_path_takes_the_cache() {
	phase slow
	SLOW_US=40000 aside_proxy_run 12 CKPTCACHE_STEP_ASIDE=auto SLOWFS_OPS=pwrite
	stats_ok files==1 step_aside.on==1 step_aside.written_straight\<=3 step_aside.switches==1 \
		host.put_ops\>=8 objects.written==11
}

# CKPTCACHE_STEP_ASIDE=off: nothing is written straight.
aside_off() {
	phase off
	aside_proxy_run 12 CKPTCACHE_STEP_ASIDE=off
	stats_ok files==1 step_aside.on==0 step_aside.written_straight==0 step_aside.tries==0
}

# numpy saves and loads a hundred arrays the way a user's script does; each
# is checked in the process and, after exit, at its real path without the
# library.
aside_numpy() {
	"$PY" -c 'import numpy' 2>/dev/null || fail "numpy cannot be imported by $PY (install python3-numpy)"
	phase numpy
	local prog='
import sys, numpy as np
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    np.save(f"{d}/a{i:03d}.npy", np.arange(i, i + (1 << 18) + 4096 * (i % 5), dtype=np.float32))
for i in reversed(range(n)):
    a = np.load(f"{d}/a{i:03d}.npy")
    assert np.array_equal(a, np.arange(i, i + (1 << 18) + 4096 * (i % 5), dtype=np.float32)), i
'
	ck CKPTCACHE_PATHS="$T/ck/*.npy" CKPTCACHE_STEP_ASIDE=auto -- "$PY" -c "$prog" "$T/ck" 40 ||
		fail "numpy save/load under the library$(last_error)"
	stats_ok files==1 step_aside.on==1 step_aside.written_straight\>=1 objects.written==39
	plain "$PY" -c '
import sys, numpy as np
d = sys.argv[1]
for i in range(40):
    a = np.load(f"{d}/a{i:03d}.npy")
    assert np.array_equal(a, np.arange(i, i + (1 << 18) + 4096 * (i % 5), dtype=np.float32)), i
' "$T/ck" || fail "the arrays at their real paths differ from what was saved"
}

# PERSIST=never keeps the cache: the program asked for no real files.
aside_not_for_persist_never() {
	phase never
	[ -n "$PROXY" ] || fail "no rtm_proxy program"
	ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HOST_CACHE=64M CKPTCACHE_PERSIST=never CKPTCACHE_STEP_ASIDE=auto -- \
		"$PROXY" --dir "$T/ck" --count 12 --size 2M --order reverse --seed 3 --interval-ms 0 >"$T/proxy.out" 2>&1 ||
		fail "rtm_proxy under PERSIST=never$(last_error)"
	grep -q "^RESULT .*verified=12/12" "$T/proxy.out" || fail "rtm_proxy did not verify 12/12 checkpoints"
	stats_ok files==1 step_aside.on==0 step_aside.written_straight==0
}

# Checkpoints open for writing when the program closes every number above
# 2 at once: stepping aside keeps a written checkpoint's bytes in an unnamed
# file of the library's, which must stay open.
aside_closeall() {
	need_helper
	local how i
	for how in close_range closefrom; do
		rm -f ck/all*.bin
		ck CKPTCACHE_STEP_ASIDE=auto -- "$HELPER" closeall "$T/ck" $how ||
			fail "$how: the program failed$(last_error)"
		for i in 0 1 2 3; do
			run_ok "$how: checkpoint $i at its real path" plain "$HELPER" check "ck/all$i.bin" 2M $((50 + i))
		done
	done
}

case_add aside/closeall-keeps-writers aside_closeall
case_add aside/tries-both-sides aside_tries_both_sides
case_add aside/slow-real-path-takes-the-cache aside_slow_real_path_takes_the_cache
case_add aside/off aside_off
case_add aside/numpy aside_numpy
case_add aside/not-for-persist-never aside_not_for_persist_never

# Cases of other files run again with stepping aside on: what a checkpoint
# written straight to its real path must do as a cached one does.
# A descriptor that reads such a checkpoint (its real file) while the
# program rewrites it reads what it would without the library.
aside_readers_replaced() { E2E_STEP_ASIDE=auto python_readers_replaced; }
# Its real path refuses the name: the bytes go to a rescue file, said where.
aside_long_path_rescue() { E2E_STEP_ASIDE=auto long_path_rescue; }
aside_rescue_planted() { E2E_STEP_ASIDE=auto rescue_planted; }
# Written again through a symbolic link to its folder.
aside_untagged_spelling() { E2E_STEP_ASIDE=auto untagged_spelling; }
# numpy arrays in an irregular hinted order.
aside_python_numpy() { E2E_STEP_ASIDE=auto python_numpy; }

case_add aside/readers-replaced aside_readers_replaced
case_add aside/long-path-rescue aside_long_path_rescue
case_add aside/rescue-planted aside_rescue_planted
case_add aside/untagged-spelling aside_untagged_spelling
case_add aside/python-numpy-hinted aside_python_numpy

# A process's first checkpoint goes to its real path before the cache
# starts (stepping aside begins on the real path): a tool that writes one
# file (cp, tee, a converter) starts no cache (its statistics say so), and
# the bytes land. A descriptor of that first file still open when the
# process rewrites the file (O_TRUNC, now through a started cache) shares
# the file with the new one as without the library: the program, run with
# and without it, reads and leaves the same bytes. With stepping aside off
# the first checkpoint is cached.
aside_first_checkpoint() {
	head -c 300000 /dev/urandom >src.bin
	phase cp
	ck CKPTCACHE_STEP_ASIDE=auto -- cp src.bin ck/one.bin || fail "cp into ck/one.bin$(last_error)"
	same src.bin ck/one.bin "ck/one.bin at its real path"
	# its statistics: that checkpoint, and no tier (no cache started)
	stats_ok files==1 step_aside.written_straight==1 objects.written==0
	grep -q '"tiers": \[$' st.cp/*.json && ! grep -q '"name": "host"' st.cp/*.json ||
		fail "the statistics of a process that started no cache name a tier: $(head -c 300 st.cp/*.json)"
	phase off
	ck CKPTCACHE_STEP_ASIDE=off -- "$PY" -c 'open("ck/two.bin", "wb").write(open("src.bin", "rb").read())' ||
		fail "writing ck/two.bin$(last_error)"
	same src.bin ck/two.bin "ck/two.bin at its real path"
	stats_ok files==1 objects.written==1 step_aside.written_straight==0
	local prog='
import os, sys
d = sys.argv[1]
a = os.open(f"{d}/k.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(a, b"A" * 5000)
# the cache starts with this one
with open(f"{d}/other.bin", "wb") as f:
    f.write(b"other" * 1000)
b = os.open(f"{d}/k.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(b, b"B" * 3000)
os.write(a, b"C" * 100)
os.close(b)
os.close(a)
with open(f"{d}/k.bin", "rb") as f:
    got = f.read()
print(len(got), got[:3000].count(b"B"), got.count(b"C"), got.count(b"\0"))
'
	phase keep
	same_output "the first file rewritten while open" "$prog" CKPTCACHE_STEP_ASIDE=auto
	same plainrun/k.bin ck/k.bin "k.bin at its real path, against the run without the library"
	same plainrun/other.bin ck/other.bin "other.bin at its real path"
	stats_ok files==1 step_aside.written_straight\>=1
}
case_add aside/first-checkpoint aside_first_checkpoint

# The first checkpoint's edges: a first open that fails (a missing folder)
# is not counted and leaves the next checkpoint first; a shell that ends
# with _exit (dash) still writes the statistics; the first file renamed
# while open, or opened again through /proc/self/fd, then rewritten:
# the program reads and leaves the same bytes as without the library.
aside_first_edges() {
	head -c 5000 /dev/urandom >src.bin
	phase failed
	ck CKPTCACHE_STEP_ASIDE=auto -- cp src.bin ck/nodir/x.bin 2>/dev/null && fail "cp into a missing folder succeeded"
	no_stats
	phase dash
	ck CKPTCACHE_STEP_ASIDE=auto -- dash -c 'echo one >ck/d.txt' || fail "dash -c 'echo one >ck/d.txt'$(last_error)"
	[ "$(cat ck/d.txt)" = one ] || fail "ck/d.txt holds '$(cat ck/d.txt)'"
	stats_ok files==1 step_aside.written_straight==1
	local prog='
import os, sys
d = sys.argv[1]
fd = os.open(f"{d}/a.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"A" * 1000)
with open(f"{d}/b.bin", "wb") as f:  # the cache starts with this one
    f.write(b"B" * 2000)
os.rename(f"{d}/a.tmp", f"{d}/a.bin")
with open(f"{d}/a.bin", "wb") as f:
    f.write(b"a" * 500)
os.write(fd, b"Z" * 10)
os.close(fd)
r = os.open(f"{d}/b.bin", os.O_RDONLY)
again = os.open(f"/proc/self/fd/{r}", os.O_RDONLY)
os.close(r)
with open(f"{d}/b.bin", "wb") as f:
    f.write(b"b" * 700)
got = os.read(again, 5000)
print(len(got), got[:1], open(f"{d}/a.bin", "rb").read().count(b"Z"), os.path.getsize(f"{d}/a.bin"))
'
	phase edges
	same_output "renamed or reopened first file rewritten" "$prog" CKPTCACHE_STEP_ASIDE=auto
	same plainrun/a.bin ck/a.bin "a.bin at its real path, against the run without the library"
	same plainrun/b.bin ck/b.bin "b.bin at its real path, against the run without the library"
}
case_add aside/first-checkpoint-edges aside_first_edges

# Opens for writing that make no new version before the first checkpoint
# (HDF5 looks for its file with O_RDWR before it makes it; a part of a
# shared file, opened with O_CREAT alone) work on the real files and start
# no cache: the first checkpoint written whole, opened for both reading and
# writing as HDF5 does, still goes to its real path. The program reads and
# leaves the same bytes as without the library; h5py's file holds what was
# written, read back in the process and again without the library.
aside_first_after_probe() {
	local prog='
import os, sys
d = sys.argv[1]
p = f"{d}/state.h5"
try:
    os.close(os.open(p, os.O_RDWR))
    print("opened a missing file")
except FileNotFoundError:
    print("missing")
s = os.open(f"{d}/shared.bin", os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(s, b"S" * 4096, 8192)
os.close(s)
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
data = bytes(range(256)) * 8192
os.write(fd, data)
os.pwrite(fd, b"HDR", 0)
back = os.pread(fd, 16, 0)
os.close(fd)
print(back, open(p, "rb").read() == b"HDR" + data[3:], os.path.getsize(f"{d}/shared.bin"))
'
	phase probe
	same_output "a look for the file, a shared part, then the checkpoint" "$prog" CKPTCACHE_STEP_ASIDE=auto
	same plainrun/state.h5 ck/state.h5 "state.h5 at its real path, against the run without the library"
	same plainrun/shared.bin ck/shared.bin "shared.bin at its real path, against the run without the library"
	stats_ok files==1 step_aside.written_straight==1 objects.written==0
	"$PY" -c 'import h5py' 2>/dev/null || fail "h5py cannot be imported by $PY"
	rm -f ck/*
	phase h5py
	ck CKPTCACHE_STEP_ASIDE=auto -- "$PY" -c '
import sys, numpy as np, h5py
p = sys.argv[1] + "/run.h5"
with h5py.File(p, "w") as f:
    for i in range(3):
        f.create_dataset(f"a{i}", data=np.arange(300000, dtype=np.float64) * (i + 1))
with h5py.File(p, "r") as f:
    ok = all(np.array_equal(f[f"a{i}"][...], np.arange(300000, dtype=np.float64) * (i + 1)) for i in range(3))
sys.exit(0 if ok else 3)
' "$T/ck" || fail "h5py write and read back under the library$(last_error)"
	plain "$PY" -c '
import sys, numpy as np, h5py
with h5py.File(sys.argv[1], "r") as f:
    sys.exit(0 if all(np.array_equal(f[f"a{i}"][...], np.arange(300000, dtype=np.float64) * (i + 1))
                      for i in range(3)) else 3)
' ck/run.h5 || fail "ck/run.h5 read without the library does not hold what was written"
	stats_ok files==1 step_aside.written_straight==1 objects.written==0
}
case_add aside/first-checkpoint-after-probe aside_first_after_probe

# The real path's folder takes no new file when a checkpoint would go
# straight there (an O_TMPFILE open fails with EIO): the checkpoint stays
# in the cache instead, the program's open and writes succeed and it reads
# its bytes back; the flush meets the same folder and rescues them, and
# says where.
aside_folder_refuses() {
	phase refused
	head -c 3000000 /dev/urandom >src.bin
	mkdir -p warm
	# (warm/w.bin: the first checkpoint, which goes to its real path before
	# the cache starts, in a folder that takes new files)
	SLOW_US=1 SLOWFS_OPS=none ck CKPTCACHE_STEP_ASIDE=auto SLOWFS_TMPFILE_ERRNO=5 \
		CKPTCACHE_PATHS="$T/ck/**:$T/warm/*" -- "$PY" -c '
open("warm/w.bin", "wb").write(b"first")
data = open("src.bin", "rb").read()
with open("ck/a.bin", "wb") as f:
    f.write(data)
assert open("ck/a.bin", "rb").read() == data, "read back in the process"
' >out.txt 2>err.txt || fail "the program failed: $(head -c 300 err.txt)"
	cat err.txt
	stats_ok files==1 step_aside.on==1 step_aside.written_straight==1 host.put_ops\>=1 objects.rescued==1
	local r
	r=$(sed -n 's/.*its [0-9]* bytes are saved in \(.*\)$/\1/p' err.txt | head -1)
	[ -n "$r" ] || fail "no message saying where the bytes are"
	same src.bin "$r" "the rescue file"
}
case_add aside/folder-refuses-new-files aside_folder_refuses

# A script writes many small files (1 B to 4 KiB: JSON, bytes, pickles) in a
# loop, faster than the real path's folder takes new files (each open there
# slowed to 1 ms): once 64 of them wait to be published, new ones are
# written straight to their real paths, so the program's end does not wait
# for hundreds of publications it would not have made without the library.
# Every file reads back in the process and at its real path; with stepping
# aside off every one is cached. (The first one or two of a process go
# straight to their real paths as cached objects, as every process begins:
# they count in both sums.)
# No library error, and ck/s_NNNNN.dat (COUNT files) at their real paths
# hold small_body(NNNNN + OFFSET) of the parity workload, read without the
# library; WHAT prefixes the failure.
small_files_landed() {
	local count=$1 offset=$2 what=$3
	if grep -aq 'ckptcache: error' "$T/.log"; then
		fail "${what}the library reported an error$(first_error 'ckptcache: error')"
	fi
	plain "$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
from parity_py import small_body
for i in range(int(sys.argv[3])):
    with open(f"{sys.argv[2]}/s_{i:05d}.dat", "rb") as f:
        assert f.read() == small_body(i + int(sys.argv[4])), f"s_{i:05d}.dat at its real path differs from what was written"
' "$ROOT/tests/bench" "$T/ck" "$count" "$offset" || fail "${what}the files at their real paths$(last_error)"
}

aside_small_files() {
	local side
	for side in auto off; do
		phase $side
		rm -rf ck
		mkdir ck
		# the benchmark's workload (tests/bench/parity_py.py), which
		# checks each file it reads back in the process
		# (the program's own opens at the real path too: without them,
		# the real path's 490 us a file under the sanitizers against the
		# cache's 160 us left a margin that a case run beside this one
		# could close, and the choice went to the real path before 64
		# waited)
		SLOW_US=1000 SLOWFS_OPS=open,openat ck CKPTCACHE_STEP_ASIDE=$side -- "$PY" \
			"$ROOT/tests/bench/parity_py.py" small "$T/ck" 600 || fail "$side: the program failed$(last_error)"
		small_files_landed 600 0 "$side: "
	done
	phase auto
	stats_ok files==1 step_aside.on==1 step_aside.written_straight\>=100 objects.written\>=64 \
		objects.written+step_aside.written_straight\>=600 objects.written+step_aside.written_straight\<=602
	phase off
	stats_ok files==1 step_aside.written_straight==0 objects.written==600
}
# (alone: the slowed opens are the library's too, and a program's open
# waits for one of the library's under way, ckptcache(7) Descriptors; two
# full sanitizer runs beside other cases counted 78 and 83 straight)
case_add_alone aside/small-files aside_small_files

# Small files on a file system that makes them fast (a tmpfs): the program's
# time for each, from its open to its close, is measured on both sides, for
# files opened with open(2) (Python) and with fopen(3) (the C library, by
# ctypes), and every file reads back in the process and at its real path.
# Which side wins is the machine's to say (a benchmark's matter): here both
# must have been timed, and every file must have gone to one of them.
# shm_dir NAME: a new folder under /dev/shm (a tmpfs: files made fast),
# removed with the case's; its path on standard output.
shm_dir() {
	local d
	d=$(mktemp -d "/dev/shm/ckpt-e2e-$1.XXXXXX") || fail "no folder under /dev/shm"
	echo "$d" >>"$T/.elsewhere"
	echo "$d"
}

aside_small_files_timed() {
	local d
	d=$(shm_dir small) || exit 1
	phase timed
	ck CKPTCACHE_PATHS="$d/*.dat" CKPTCACHE_STEP_ASIDE=auto -- "$PY" -c '
import ctypes, sys
sys.path.insert(0, sys.argv[1])
from parity_py import small_body
d = sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
for i in range(600):
    b = small_body(i)
    if i % 3 == 2:
        f = libc.fopen(f"{d}/s_{i:05d}.dat".encode(), b"wb")
        assert f, f"fopen s_{i:05d}.dat: errno {ctypes.get_errno()}"
        assert libc.fwrite(b, 1, len(b), f) == len(b)
        assert libc.fclose(f) == 0
    else:
        with open(f"{d}/s_{i:05d}.dat", "wb") as f:
            f.write(b)
for i in range(600):
    with open(f"{d}/s_{i:05d}.dat", "rb") as f:
        assert f.read() == small_body(i), f"s_{i:05d}.dat read back differs"
' "$ROOT/tests/bench" "$d" || fail "the program failed$(last_error)"
	plain "$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
from parity_py import small_body
for i in range(600):
    with open(f"{sys.argv[2]}/s_{i:05d}.dat", "rb") as f:
        assert f.read() == small_body(i), f"s_{i:05d}.dat at its real path differs from what was written"
' "$ROOT/tests/bench" "$d" || fail "the files at their real paths$(last_error)"
	if grep -aq 'ckptcache: error' "$T/.log"; then
		fail "the library reported an error$(first_error 'ckptcache: error')"
	fi
	stats_ok files==1 step_aside.on==1 step_aside.small.real_path_samples\>=2 \
		step_aside.small.cache_samples\>=1 step_aside.small.real_path_us\>0 step_aside.small.cache_us\>0 \
		objects.written+step_aside.written_straight\>=600 objects.written+step_aside.written_straight\<=602
}
case_add aside/small-files-timed aside_small_files_timed

# Small files made with O_CREAT|O_EXCL (Python's "x" mode; tar and cp make
# their files so) are timed and sent to a side by the same model as those
# opened with O_TRUNC: on a file system that makes them fast (a tmpfs) both
# sides are measured and every file goes to one of them; tar's extraction
# of 300 small files into a tagged folder gives the same files as without
# the library. (Such files went to the cache untimed: tar xf of 2,000 files
# of 1 B-4 KiB on ext4 took 0.14 s under the library, 0.05 s without.)
aside_small_files_excl() {
	local d
	d=$(shm_dir excl) || exit 1
	phase excl
	ck CKPTCACHE_PATHS="$d/**" CKPTCACHE_STEP_ASIDE=auto -- "$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
from parity_py import small_body
d = sys.argv[2]
for i in range(600):
    with open(f"{d}/s_{i:05d}.dat", "xb") as f:
        f.write(small_body(i))
for i in range(600):
    with open(f"{d}/s_{i:05d}.dat", "rb") as f:
        assert f.read() == small_body(i), f"s_{i:05d}.dat read back differs"
try:
    open(f"{d}/s_00007.dat", "xb")
    sys.exit("an exclusive create of an existing name succeeded")
except FileExistsError:
    pass
' "$ROOT/tests/bench" "$d" || fail "the program failed$(last_error)"
	plain "$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
from parity_py import small_body
for i in range(600):
    with open(f"{sys.argv[2]}/s_{i:05d}.dat", "rb") as f:
        assert f.read() == small_body(i), f"s_{i:05d}.dat at its real path differs from what was written"
' "$ROOT/tests/bench" "$d" || fail "the files at their real paths$(last_error)"
	stats_ok files==1 step_aside.on==1 step_aside.small.real_path_samples\>=2 \
		step_aside.small.cache_samples\>=1 \
		objects.written+step_aside.written_straight\>=600 objects.written+step_aside.written_straight\<=602
	phase tar
	mkdir -p src "$d/x"
	"$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
from parity_py import small_body
for i in range(300):
    open(f"src/t_{i:04d}.dat", "wb").write(small_body(i))
' "$ROOT/tests/bench"
	tar cf small.tar src
	ck CKPTCACHE_PATHS="$d/**" CKPTCACHE_STEP_ASIDE=auto -- tar xf small.tar -C "$d/x" ||
		fail "tar xf under the library$(last_error)"
	diff -r src "$d/x/src" >&2 || fail "the files tar extracted differ from the archive's"
	stats_ok files==1 step_aside.small.real_path_samples\>=2 \
		objects.written+step_aside.written_straight\>=300
}
case_add aside/small-files-excl aside_small_files_excl

# A checkpoint written straight to its real path, then replaced there by
# another program (without the library), and read back while an order names
# it ahead: the read meets the new file, its size and its bytes, as without
# the library (not the size the cache knew).
aside_replaced_named_ahead() {
	ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_ORDER=sequential -- "$PY" -c '
import os, random, subprocess, sys
d, t = sys.argv[1], sys.argv[2]
a = random.Random(1).randbytes(4 << 20)
with open(f"{d}/c0.bin", "wb") as f:
    f.write(a)
b = random.Random(2).randbytes(6 << 20)
with open(f"{t}/new.bin", "wb") as f:
    f.write(b)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
subprocess.run(["cp", f"{t}/new.bin", f"{d}/c0.bin"], env=env, check=True)
with open(f"{d}/c0.bin", "rb") as f:
    got = f.read()
    size = os.fstat(f.fileno()).st_size
assert size == len(b), f"fstat says {size} bytes, the file has {len(b)}"
assert got == b, f"read {len(got)} bytes, not the {len(b)} the other program wrote"
' "$T/ck" "$T" || fail "the program failed$(last_error)"
	same "$T/new.bin" "$T/ck/c0.bin" "c0.bin at its real path"
	stats_ok files==1 step_aside.written_straight\>=1
}
case_add aside/replaced-named-ahead aside_replaced_named_ahead

# Small files written again and again (a script that saves its state each
# step under the same names): once many wait to be published, a new version
# of a name the cache holds goes straight to the real file too.
aside_small_rewritten() {
	SLOW_US=1000 SLOWFS_OPS=open ck CKPTCACHE_STEP_ASIDE=auto -- "$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
from parity_py import small_body
d, n = sys.argv[2], 300
for r in range(3):
    for i in range(n):
        with open(f"{d}/s_{i:05d}.dat", "wb") as f:
            f.write(small_body(i + 1000 * r))
for i in range(n):
    with open(f"{d}/s_{i:05d}.dat", "rb") as f:
        assert f.read() == small_body(i + 2000), f"s_{i:05d}.dat read back differs"
' "$ROOT/tests/bench" "$T/ck" || fail "the program failed$(last_error)"
	small_files_landed 300 2000 ""
	stats_ok files==1 step_aside.written_straight\>=100 objects.written+step_aside.written_straight\>=900
}
case_add aside/small-files-rewritten aside_small_rewritten

# A cached small checkpoint not yet published is opened for writing again
# while many wait to be published: the open must meet what the program
# wrote (the file exists, with its mode), not the real path as it still is.
aside_overwrite_unpublished() {
	cat >ow.py <<'PYEOF'
import errno, os, sys
d = sys.argv[1]
os.umask(0o022)
W = os.O_WRONLY

def put(name, flags, mode, data):
    try:
        fd = os.open(f"{d}/{name}", flags, mode)
    except OSError as e:
        return f"{name}: {errno.errorcode[e.errno]}"
    os.write(fd, data)
    os.close(fd)
    st = os.stat(f"{d}/{name}")
    return f"{name}: {st.st_mode & 0o777:o} {st.st_size}"

n = 0
def fillers(k):
    global n
    for _ in range(k):
        put(f"f{n:04d}", W | os.O_CREAT | os.O_TRUNC, 0o644, b"filler\n")
        n += 1

fillers(20)
for t in ("t0", "t1", "t2"):
    put(t, W | os.O_CREAT | os.O_TRUNC, 0o600, b"version one\n")
fillers(100)
print(put("t0", W | os.O_TRUNC, 0o644, b"v2\n"))
fillers(2)
print(put("t1", W | os.O_CREAT | os.O_TRUNC, 0o644, b"v2\n"))
fillers(2)
print(put("t2", W | os.O_CREAT | os.O_EXCL | os.O_TRUNC, 0o644, b"v2\n"))
PYEOF
	mkdir -p ref
	plain "$PY" ow.py "$T/ref" >expect.txt || fail "the program failed without the library"
	SLOW_US=50000 SLOWFS_OPS=rename ck CKPTCACHE_STEP_ASIDE=auto -- "$PY" ow.py "$T/ck" >got.txt ||
		fail "the program failed$(last_error)"
	if grep -aq 'ckptcache: error' "$T/.log"; then
		fail "the library reported an error$(first_error 'ckptcache: error')"
	fi
	cmp -s expect.txt got.txt || fail "the opens differ: without the library $(tr '\n' ';' <expect.txt) with it $(tr '\n' ';' <got.txt)"
	local t
	for t in t0 t1 t2; do
		[ -f "ck/$t" ] || fail "ck/$t is not at its real path"
		same "ref/$t" "ck/$t" "ck/$t at its real path"
		[ "$(stat -c %a "ck/$t")" = "$(stat -c %a "ref/$t")" ] ||
			fail "ck/$t has mode $(stat -c %a "ck/$t"), without the library $(stat -c %a "ref/$t")"
	done
}
case_add aside/overwrite-unpublished aside_overwrite_unpublished

# The atomic checkpoint of Python programs: tempfile.NamedTemporaryFile in
# the checkpoint folder (O_RDWR|O_CREAT|O_EXCL), the bytes written, then
# os.replace onto the checkpoint's name, and a rotation that keeps the
# last three by a glob of the folder, with an fsync before the replace
# (a durable one) or without. On a real path that takes the checkpoints
# at memory speed, they go straight to it as numpy.save's do: a
# descriptor open for reading too may go straight (it reads back from
# there), an fsync of a cached one counts in its time, and so does a
# listing's wait for its publication (before: every one after the first
# cached, 1.1 to 1.5 times the program's time with fsync, 1.5 to 3 times
# without). Every byte lands, and a descriptor reads back what it wrote.
aside_atomic_replace() {
	local prog='
import glob, os, random, sys, tempfile
d, n, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "fsync"
for i in range(n):
    data = bytes([i % 251]) * (4 << 20) + random.Random(i).randbytes(4096 + i)
    with tempfile.NamedTemporaryFile(dir=d, delete=False) as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())
        f.seek(4 << 20)
        if f.read() != data[4 << 20:]:
            sys.exit("read back through its descriptor: not what was written (%d)" % i)
    os.replace(f.name, os.path.join(d, "ck%03d.bin" % i))
    for old in sorted(glob.glob(os.path.join(d, "ck*.bin")))[:-3]:
        os.remove(old)
    with open(os.path.join(d, "ck%03d.bin" % i), "rb") as f:
        if f.read() != data:
            sys.exit("checkpoint %d read back: not what was written" % i)
print(sorted(os.listdir(d)))
'
	local how
	for how in fsync plain; do
		phase "$how"
		mkdir -p "plainrun/$how" "ck/$how"
		plain "$PY" -c "$prog" "plainrun/$how" 24 "$how" >"want.$how" || fail "$how: the program without the library"
		ck CKPTCACHE_PATHS="$T/ck/$how/*" CKPTCACHE_STEP_ASIDE=auto -- "$PY" -c "$prog" "$T/ck/$how" 24 "$how" >"got.$how" ||
			fail "$how: the program with the library$(last_error)"
		outputs_match "want.$how" "got.$how"
		# the first one, and the two the real path is measured with
		# before the cache is tried, whatever the speeds (before: the
		# first one only, a descriptor that reads too was cached); where
		# the rest go is the machine's speeds' business (on a 2-core
		# machine, 20 or more of the 24 with the fsync; under a sanitizer
		# beside other tests, as few as 4)
		stats_ok files==1 step_aside.on==1 step_aside.written_straight\>=3
		local i
		for i in 021 022 023; do
			cmp "plainrun/$how/ck$i.bin" "ck/$how/ck$i.bin" || fail "$how: ck$i.bin at its real path"
		done
	done
}
case_add aside/atomic-replace aside_atomic_replace

# Python's atomic save, as scripts write it: each checkpoint to a
# temporary name, then os.replace() onto the last version of its name
# (120 over 20 names, sizes of 1 MiB give or take a few bytes), a name
# read back now and then in between; with stepping aside as a user gets it
# and with it off. The program's reads see the last version, the folder
# holds the names a run without the library leaves (no temporary left) and
# the real files hold the last versions, read without the library.
aside_replace_over_names() {
	local prog='
import hashlib, os, sys
d = sys.argv[1]
def body(i):
    n = (1 << 20) + (i * 37) % 4099 - 2000
    return (i.to_bytes(4, "little") * (n // 4 + 1))[:n]
last = {}
for i in range(120):
    name = f"{d}/ck_{i % 20:02d}.bin"
    with open(name + ".tmp", "wb") as f:
        f.write(body(i))
    os.replace(name + ".tmp", name)
    last[name] = i
    if i % 7 == 3:
        back = f"{d}/ck_{(i * 11) % 20:02d}.bin"
        if back in last:
            with open(back, "rb") as f:
                if f.read() != body(last[back]):
                    print("stale read of", os.path.basename(back), "after", i)
for name in sorted(last):
    print(os.path.basename(name), hashlib.sha256(body(last[name])).hexdigest())
'
	local how
	for how in auto off; do
		phase "$how"
		rm -rf "$T/ck" "$T/plainrun" && mkdir -p "$T/ck"
		same_output "atomic replaces (CKPTCACHE_STEP_ASIDE=$how)" "$prog" CKPTCACHE_STEP_ASIDE=$how \
			CKPTCACHE_PATHS="$T/ck/ck_*"
		[ "$(ls -A "$T/ck")" = "$(ls -A "$T/plainrun")" ] ||
			fail "the folder holds $(ls -A "$T/ck" | tr '\n' ' '), without the library $(ls -A "$T/plainrun" | tr '\n' ' ')"
		local f
		for f in "$T"/plainrun/ck_*.bin; do
			same "$f" "$T/ck/${f##*/}" "${f##*/} at its real path"
		done
	done
}
case_add aside/replace-over-names aside_replace_over_names

# A process whose node's last run with the same patterns and program wrote
# its small checkpoints faster at their real paths than into the cache
# (the record of the step-aside model) writes its first 200 ms of small
# checkpoints there without starting the cache: a script that writes a
# few thousand small files in 70 ms paid the cache's start and end (2-3
# ms) for nothing. After those 200 ms, or where its first checkpoint is
# 1 MiB or more, the cache starts as before. On a tmpfs, where the real
# path is the faster one for small files.
aside_small_start_deferred() {
	local d
	d=$(mktemp -d /dev/shm/ckc-e2e-defer.XXXXXX) || fail "no folder under /dev/shm"
	cat >small.py <<'PYEOF'
import os, sys, time
d, count, pause, first = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
os.makedirs(d, exist_ok=True)
body = lambda i: (b"%06d" % i) * (1 + i % 300)
for i in range(count):
    with open(f"{d}/s_{i:05d}.dat", "wb") as f:
        f.write(b"L" * first if i == 0 and first else body(i))
    if pause:
        time.sleep(pause)
for i in range(count):
    with open(f"{d}/s_{i:05d}.dat", "rb") as f:
        got = f.read()
    assert got == (b"L" * first if i == 0 and first else body(i)), f"s_{i:05d}.dat read back wrong"
PYEOF
	local paths="$d/*/*.dat" run
	phase learn
	ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_PATHS="$paths" -- "$PY" small.py "$d/learn" 400 0 0 ||
		fail "learn: the program failed$(last_error)"
	local choice
	choice=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["step_aside"]["small"]["choice"])' "$STATS"/*.json)
	phase defer
	ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_PATHS="$paths" -- "$PY" small.py "$d/defer" 400 0 0 ||
		fail "defer: the program failed$(last_error)"
	if [ "$choice" = real_path ]; then
		stats_ok files==1 step_aside.written_straight==400 objects.written==0
		grep -q '"name": "host"' "$STATS"/*.json && fail "defer: the cache started (its statistics name a tier)"
	else
		# the record says the cache: it starts with the second file
		stats_ok files==1 host.put_ops\>=0
	fi
	phase slow
	ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_PATHS="$paths" -- "$PY" small.py "$d/slow" 60 0.006 0 ||
		fail "slow: the program failed$(last_error)"
	stats_ok files==1 host.put_ops\>=0 step_aside.written_straight+objects.written\>=60
	phase large
	ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_PATHS="$paths" -- "$PY" small.py "$d/large" 50 0 2097152 ||
		fail "large: the program failed$(last_error)"
	stats_ok files==1 host.put_ops\>=0
	# a first open that fails (a missing folder): its error is the
	# program's, and the deferring does not follow a file that is not there
	phase failfirst
	ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_PATHS="$paths" -- "$PY" -c '
import errno, runpy, sys
d = sys.argv[1]
try:
    open(f"{d}/nodir/s_00000.dat", "wb")
    sys.exit("the open into a missing folder succeeded")
except OSError as e:
    assert e.errno == errno.ENOENT, f"open into a missing folder: {e}"
sys.argv = ["small.py", f"{d}/failfirst", "40", "0", "0"]
runpy.run_path("small.py", run_name="__main__")
' "$d" || fail "failfirst: the program failed$(last_error)"
	stats_ok host.put_ops\>=0
	# every file at its real path, read without the library
	for run in learn defer slow large failfirst; do
		plain "$PY" - "$d/$run" <<'PYEOF' || fail "$run: the files at their real paths differ"
import os, sys
d = sys.argv[1]
names = sorted(os.listdir(d))
for n in names:
    i = int(n[2:7])
    got = open(os.path.join(d, n), "rb").read()
    want = (b"%06d" % i) * (1 + i % 300)
    assert got == want or (i == 0 and got == b"L" * len(got)), f"{n} differs"
print(len(names))
PYEOF
	done
	[ "$choice" = real_path ] || echo "the learning run chose the cache for small files ($choice): the deferral was not exercised"
	rm -rf "$d"
}
case_add aside/small-start-deferred aside_small_start_deferred

# The record of the step-aside model is kept for the program and its first
# argument where that names a file (python3 and its script); a compiled
# program given its run's folder (./sim /scratch/run42) is the same program
# from run to run. A second run of one, in a folder of its own, writes its
# small files straight to their real paths without starting the cache, as
# a second run of a script does. Its files read back in the process and,
# without the library, at their real paths. On a tmpfs, where the real
# path is the faster one for small files.
aside_small_record_by_program() {
	local d
	d=$(mktemp -d /dev/shm/ckc-e2e-rundir.XXXXXX) || fail "no folder under /dev/shm"
	echo "$d" >>"$T/.elsewhere"
	# the benchmark's compiled program (tests/bench/small_files.c): its
	# folder first, COUNT files written and read back, or only checked
	gcc -O2 -o sim "$ROOT/tests/bench/small_files.c" || fail "the program did not compile"
	local paths="$d/*/*.dat" choice
	phase learn
	ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_PATHS="$paths" -- ./sim "$d/run1" 400 || fail "learn: the program failed$(last_error)"
	choice=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["step_aside"]["small"]["choice"])' "$STATS"/*.json)
	phase again
	ck CKPTCACHE_STEP_ASIDE=auto CKPTCACHE_PATHS="$paths" -- ./sim "$d/run2" 400 || fail "again: the program failed$(last_error)"
	plain ./sim "$d/run1" 400 check || fail "run1: the files at their real paths differ"
	plain ./sim "$d/run2" 400 check || fail "run2: the files at their real paths differ"
	if [ "$choice" = real_path ]; then
		stats_ok files==1 step_aside.written_straight==400 objects.written==0
		grep -q '"name": "host"' "$STATS"/*.json && fail "again: the cache started (its statistics name a tier): the first run's record was not found"
	else
		echo "the learning run chose the cache for small files ($choice): the record's use was not exercised"
	fi
	rm -rf "$d"
}
case_add aside/small-record-by-program aside_small_record_by_program

# A program that keeps many checkpoints open at once under a low
# descriptor limit (ulimit -n 64): 48 files opened for writing, each
# written, all closed, read back. Stepping aside writes a version through
# a file of the library's beside the program's descriptor; once a
# sixteenth of the limit is open for writing the program's own open writes
# the real file, as without the library, so the 48 opens succeed where the
# 29th failed with EMFILE. The same program without the library is the control;
# every file is compared at its real path without the library.
aside_many_open_low_limit() {
	local prog='
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
files = []
for i in range(n):
    files.append(open(f"{d}/m{i:03d}.bin", "wb"))
for i, f in enumerate(files):
    f.write(bytes([i % 251]) * (1000 + 4099 * i))
for f in files:
    f.close()
for i in range(n):
    with open(f"{d}/m{i:03d}.bin", "rb") as f:
        assert f.read() == bytes([i % 251]) * (1000 + 4099 * i), f"m{i:03d}.bin read back wrong"
print("ok", n)
'
	mkdir -p plainrun
	(ulimit -n 64 && plain "$PY" -c "$prog" "$T/plainrun" 48) >want.txt || fail "without the library, under ulimit -n 64, the program failed"
	phase many
	(ulimit -n 64 && ck CKPTCACHE_STEP_ASIDE=auto -- "$PY" -c "$prog" "$T/ck" 48) >got.txt ||
		fail "with the library, under ulimit -n 64, the program failed$(last_error)"
	outputs_match want.txt got.txt
	local i
	for i in $(seq 0 47); do
		same "plainrun/m$(printf %03d "$i").bin" "ck/m$(printf %03d "$i").bin" "m$(printf %03d "$i").bin at its real path"
	done
}
case_add aside/many-open-low-limit aside_many_open_low_limit

# A checkpoint the model sends straight to its real path whose writes are
# small (records written one by one, without a buffer) moves into the
# cache after its first writes: the bytes written so far, the records
# after them, a header patched with pwrite, a writev, and what the program
# reads back through its own descriptor are those of the program without
# the library, in the process and at the real paths; with a 4 MiB cache
# the second one (6 MB) outgrows it once moved, and goes back to its real
# path. (Each phase names its files its own way: a record of the node's
# from the first would start the second in the cache.)
aside_small_writes_move() {
	local prog='
import hashlib, os, sys
d = sys.argv[1]
with open(f"{d}/c0.bin", "wb") as f:
    f.write(b"0" * 2000000)
for k in (1, 2, 3):
    fd = os.open(f"{d}/c{k}.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(30000 * k):
        os.write(fd, (b"%07d|" % (i * k)) * (1 + i % 24))
    os.pwrite(fd, b"HEADER%d" % k, 0)
    os.writev(fd, [b"x" * j for j in range(0, 300)])
    size = os.fstat(fd).st_size
    os.lseek(fd, 0, os.SEEK_SET)
    got = b""
    while len(got) < size:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        got += b
    print(k, size, len(got), hashlib.sha256(got).hexdigest())
    os.close(fd)
for k in range(4):
    print(k, hashlib.sha256(open(f"{d}/c{k}.bin", "rb").read()).hexdigest())
'
	local k cache
	for cache in 32M 4M; do
		rm -rf plainrun ck
		mkdir -p ck
		phase auto$cache
		same_output "small writes moved into the cache ($cache)" "$prog" CKPTCACHE_STEP_ASIDE=auto \
			CKPTCACHE_HOST_CACHE=$cache CKPTCACHE_PATHS="$T/ck/c*.bin:$T/ck/$cache/*"
		for k in 0 1 2 3; do
			same plainrun/c$k.bin ck/c$k.bin "c$k.bin at its real path ($cache), against the run without the library"
		done
		stats_ok files==1 step_aside.moved_to_cache\>=1
	done
}
case_add aside/small-writes-move aside_small_writes_move
