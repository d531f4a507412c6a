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
