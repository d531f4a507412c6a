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
	stats_ok files==1 objects.written==$((n + 1)) objects.opened_for_read\>=$((n + 1)) \
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

# Locks on tagged descriptors are taken on the real files (another process
# must see them), and the bytes stay right.
python_locks() {
	ck -- "$PY" "$E2E/pycase.py" locks "$T/ck" || fail "locks on tagged descriptors$(last_error)"
	plain "$PY" -c '
import random, sys
data = random.Random(7).randbytes(2_000_003)
for name in ("locked.bin", "record.bin"):
    assert open(f"{sys.argv[1]}/{name}", "rb").read() == data, name
' "$T/ck" || fail "the locked checkpoints at their real paths differ from what was written"
}

# h5py writes and reads a tagged file (HDF5 locks it when it opens it).
python_h5py() {
	local n=8
	"$PY" -c 'import h5py' 2>/dev/null ||
		fail "h5py cannot be imported by $PY (install python3-h5py): $("$PY" -c 'import h5py' 2>&1 | tail -1)"
	ck -- "$PY" "$E2E/pycase.py" h5py "$T/ck" $n || fail "h5py on a tagged file: exit status $?$(last_error)"
	plain "$PY" -B -c '
import sys, h5py, numpy as np
sys.path.insert(0, sys.argv[1])
import pycase
with h5py.File(sys.argv[2], "r") as f:
    for i in range(int(sys.argv[3])):
        assert np.array_equal(f[f"a{i:03d}"][...], pycase.make_array(np, i)), i
' "$E2E" "$T/ck/state.h5" $n || fail "state.h5 at its real path differs from what was written"
}

# What the library starts in a process with a thread of its own: nothing
# for a reader, and no growth of the descriptor table (which makes the
# kernel wait for an RCU grace period in such a process) for a writer.
python_start() {
	head -c 3000000 /dev/urandom >ck/r.bin
	ck -- "$PY" "$E2E/pycase.py" start "$T/ck" || fail "the library's start in a threaded process$(last_error)"
	same ck/r.bin ck/w.bin "w.bin at its real path"
}

case_add python/io python_io
case_add python/start python_start
case_add python/numpy python_numpy
case_add python/locks python_locks
case_add python/h5py python_h5py
