# Device capture without a GPU: the stand-in libcuda.so.1
# (tests/apps/fake_libcuda.c, whose "device memory" is host memory and whose
# copies to pinned memory bypass page protections, as DMA does) under
# tests/apps/stencil_client, a stencil-style program that checkpoints a band
# of a different size each time through one staging buffer and reads it back
# in another order. Each case runs the program without the library, in copy
# mode and in device capture; every run must verify every restored byte on
# the "device", leave the same files as the run without the library, and
# finish within its time limit (a hang is a failure).

# dev_run LABEL [VAR=VALUE]... -- ARGS...: stencil_client against the
# stand-in driver; LABEL none runs it without the library.
dev_run() {
	local label=$1 envs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	[ -n "$FAKECUDA" ] || fail "the stand-in driver (tests/apps/fake_libcuda.c) did not compile"
	[ -n "$STENCIL" ] || fail "no stencil_client program"
	mkdir -p "$T/$label"
	local cmd=(env LD_LIBRARY_PATH="$FAKECUDA" FAKECUDA_DEVICE_MIB=4096 "${envs[@]}" "$STENCIL" --dir "$T/$label"
		--keep "$@")
	if [ "$label" = none ]; then
		plain "${cmd[@]}" >"$T/$label.out" 2>&1
	else
		ck CKPTCACHE_PATHS="$T/$label/*.bin" CKPTCACHE_SSD_DIR="$T/ssd" -- "${cmd[@]}" >"$T/$label.out" 2>&1
	fi
	local rc=$?
	cat "$T/$label.out"
	[ $rc -eq 0 ] || fail "$label: $(status_text $rc)$(grep -a -m1 -E 'does not verify|stencil_client: |ckptcache: error' "$T/$label.out" | sed 's/^/ (/;s/$/)/')"
	grep -q 'verified=\([0-9]*\)/\1' "$T/$label.out" || fail "$label: not every checkpoint verified"
}

# dev_same LABEL: the files LABEL left equal those of the run without the
# library (read without it).
dev_same() {
	local f n=0
	for f in "$T/none"/ckpt_*.bin; do
		same "$f" "$T/$1/${f##*/}" "$1: ${f##*/}"
		n=$((n + 1))
	done
	[ $n -gt 0 ] || fail "the run without the library left no files"
}

# device_stencil IO STAGING ORDER TOUCH [SIDE COUNT GPU]
device_stencil() {
	local io=$1 staging=$2 order=$3 touch=$4 side=${5:-1024} count=${6:-40} gpu=${7:-1G}
	local args=(--io "$io" --staging "$staging" --order "$order" --touch "$touch" --side "$side" --count "$count"
		--seed 3)
	mkdir -p "$T/ssd"
	dev_run none -- "${args[@]}"
	phase copy
	dev_run copy CKPTCACHE_HOST_CACHE=256M CKPTCACHE_ORDER="$order" -- "${args[@]}"
	dev_same copy
	phase device
	dev_run device CKPTCACHE_CAPTURE=device CKPTCACHE_GPU_CACHE="$gpu" CKPTCACHE_HOST_CACHE=256M \
		CKPTCACHE_HINTS="$T/order.txt" -- "${args[@]}" --hints "$T/order.txt"
	dev_same device
	# the device path was taken: captures; restores as device copies, or
	# (the program looked at the bytes first) owed pages filled. With an
	# allocator before the library (a sanitizer's runtime), pageable memory
	# is never owed, and says so.
	if [ "$staging" != pinned ] && "$PY" "$E2E/stats.py" "$STATS"/*.json -- capture.pageable==0 >/dev/null 2>&1; then
		grep -q "only pinned host memory is captured" "$T/device.out" ||
			fail "pageable capture off without a warning"
		stats_ok capture.captured==0
	elif [ "$touch" != none ]; then
		# reads whose bytes the program looks at first stop being owed
		# (each owed one cost a fill on top of the copy)
		stats_ok capture.captured\>0 capture.filled\>0 capture.read_refs\<$((count / 2))
	else
		# whole captures written at the end of a checkpoint are attached
		# (fwrite too: the stream's buffer never reads the staging memory)
		stats_ok capture.captured\>0 capture.attached\>0 capture.restored_d2d\>0
		# each restore is one read of the gpu tier: fread too (glibc
		# would read the part past its last whole buffer through the
		# stream's buffer, a second read whose copy fills the
		# destination's last page)
		[ "$gpu" != 1G ] || stats_ok gpu.read_ops=="$count"
		# below a gpu tier a hinted checkpoint is brought back into it,
		# not left in the page cache (whose read is the staged copy the
		# program makes without the library)
		stats_ok gpu.prefetch_cached==0
	fi
	# a large pinned staging buffer is made of huge pages
	if [ "$staging" = pinned ]; then
		stats_ok capture.huge_pinned\>=1
	fi
}

# (--quick under a sanitizer's runtime: each staging buffer and each call
# once, as write or fwrite, and each touch once)
for io in write fwrite; do
	for staging in offset malloc pinned; do
		if [ $QUICK_SAN -eq 1 ] && [ "$io-$staging" != write-offset ] && [ "$io-$staging" != fwrite-malloc ] &&
			[ "$io-$staging" != write-pinned ]; then
			continue
		fi
		case_add "device/stencil-$io-$staging-reverse" device_stencil "$io" "$staging" reverse none
	done
done
[ $QUICK_SAN -eq 1 ] || case_add "device/stencil-write-each-sequential" device_stencil write each sequential none
case_add "device/stencil-pread-offset-random" device_stencil pread offset random none
case_add "device/stencil-write-offset-random-touch-read" device_stencil write offset random read
case_add "device/stencil-write-malloc-reverse-touch-write" device_stencil write malloc reverse write
[ $QUICK_SAN -eq 1 ] || case_add "device/stencil-write-pinned-random-touch-write" device_stencil write pinned random write
# a larger field, and a history four times the gpu tier: captures that do
# not fit, evictions, flushes and prefetches back (under a sanitizer's
# runtime, a field of 1024 and a tier of a quarter the size: the same
# ratio, a quarter of the bytes)
big="2048 60 256M"
[ $QUICK_SAN -eq 1 ] && big="1024 60 64M"
case_add "device/stencil-write-offset-reverse-2048" device_stencil write offset reverse none $big

# A program's own fault on its own protected page, under device capture
# with owed pages about: the default action (death by SIGSEGV), never a
# loop of faults.
device_own_fault() {
	mkdir -p "$T/ssd" "$T/device"
	ck CKPTCACHE_PATHS="$T/device/*.bin" CKPTCACHE_CAPTURE=device CKPTCACHE_SSD_DIR="$T/ssd" -- \
		env LD_LIBRARY_PATH="$FAKECUDA" FAKECUDA_DEVICE_MIB=4096 "$STENCIL" --dir "$T/device" --count 4 \
		--side 1024 --own-fault >"$T/out" 2>&1
	local rc=$?
	cat "$T/out"
	[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "the program's fault looped until the time limit"
	[ $rc -eq $((128 + 14)) ] && fail "the program's fault looped until its alarm"
	# a sanitizer's runtime handles the fault itself (its report, exit 1)
	if [ $rc -eq 1 ] && grep -q 'AddressSanitizer: SEGV' "$T/out"; then
		return 0
	fi
	[ $rc -eq $((128 + 11)) ] || fail "expected death by SIGSEGV, got $(status_text $rc)"
}
case_add "device/own-fault-is-the-programs" device_own_fault

# A Python program (numpy, the driver through ctypes, as CuPy reaches it)
# under device capture: its copies into numpy arrays are captured, np.save
# attaches them, np.load's reads are owed and its copies back to the device
# are device copies. Python's allocator is the C library's, reached through
# the executable: the library must see its frees.
device_python() {
	"$PY" -c 'import numpy' 2>/dev/null || fail "numpy cannot be imported by $PY"
	mkdir -p "$T/ssd" "$T/device"
	cat >devpy.py <<'PYEOF'
import ctypes, sys, numpy as np
d = sys.argv[1]
cu = ctypes.CDLL("libcuda.so.1")
ctx = ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
dtoh, htod = cu.cuMemcpyDtoH_v2, cu.cuMemcpyHtoD_v2
dtoh.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_size_t]
htod.argtypes = [ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_size_t]
arrays = []
for k in range(6):
    n = (3 << 20) + 4096 * k + 12
    ref = np.random.default_rng(k).integers(0, 255, size=n, dtype=np.uint8)
    dev = ctypes.c_ulonglong()
    assert cu.cuMemAlloc_v2(ctypes.byref(dev), n) == 0
    ctypes.memmove(dev.value, ref.ctypes.data, n)      # the "kernel" that made it
    host = np.empty(n, dtype=np.uint8)
    assert dtoh(host.ctypes.data, dev.value, n) == 0
    np.save(f"{d}/a{k}.npy", host)
    del host
    arrays.append((ref, n))
for k in reversed(range(6)):
    ref, n = arrays[k]
    back = np.load(f"{d}/a{k}.npy")
    dev2 = ctypes.c_ulonglong()
    assert cu.cuMemAlloc_v2(ctypes.byref(dev2), n) == 0
    assert htod(dev2.value, back.ctypes.data, n) == 0
    got = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(dev2.value))
    assert np.array_equal(got, ref), k
print("python device ok")
PYEOF
	ck CKPTCACHE_PATHS="$T/device/*.npy" CKPTCACHE_CAPTURE=device CKPTCACHE_SSD_DIR="$T/ssd" CKPTCACHE_GPU_CACHE=256M -- \
		env LD_LIBRARY_PATH="$FAKECUDA" FAKECUDA_DEVICE_MIB=4096 "$PY" devpy.py "$T/device" >"$T/out" 2>&1
	local rc=$?
	cat "$T/out"
	[ $rc -eq 0 ] || fail "python under device capture: $(status_text $rc)$(last_error)"
	plain "$PY" -c '
import sys, numpy as np
for k in range(6):
    n = (3 << 20) + 4096 * k + 12
    assert np.array_equal(np.load(f"{sys.argv[1]}/a{k}.npy"), np.random.default_rng(k).integers(0, 255, size=n, dtype=np.uint8)), k
' "$T/device" || fail "the arrays at their real paths differ from what was saved"
	# a library preloaded before this one (the sanitizer's runtime) frees
	# on its own; alone, Python's frees reach the library
	if [[ $PRELOAD == *" "* ]]; then
		grep -q "only pinned host memory is captured" "$T/out" || fail "pageable capture off without a warning"
	else
		stats_ok capture.pageable==1 capture.captured\>=6 capture.attached\>=6 capture.restored_d2d\>=6
	fi
}
case_add device/python-numpy device_python

# HDF5 files of float32 fields written from "device" copies (one copy hashed
# first, as a manifest would, then one written) and read back in reverse,
# each copied by the CPU before use, as CuPy copies a loaded array into a
# pinned buffer: the read site stops owing after its first outcomes, and
# the later reads from the gpu tier run in lanes. The stand-in driver does
# what the real one does when it allocates pinned memory (its own heap,
# madvise(MADV_DONTFORK)); a helper of a copy made while the program held a
# lock of the library's must never wait for that lock (a hang).
device_h5py_lanes() {
	"$PY" -c 'import h5py' 2>/dev/null || fail "h5py cannot be imported by $PY"
	mkdir -p "$T/ssd" "$T/device"
	cat >devh5.py <<'PYEOF'
import ctypes, hashlib, sys, numpy as np, h5py
d, count = sys.argv[1], 10
cu = ctypes.CDLL("libcuda.so.1")
ctx = ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
dtoh = cu.cuMemcpyDtoH_v2
dtoh.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_size_t]
refs = []
for k in range(count):
    shape = (2048 + 8 * k, 1536 + 3 * k)
    ref = np.random.default_rng(k).standard_normal(shape, dtype=np.float32)
    dev = ctypes.c_ulonglong()
    assert cu.cuMemAlloc_v2(ctypes.byref(dev), ref.nbytes) == 0
    ctypes.memmove(dev.value, ref.ctypes.data, ref.nbytes)
    def asnumpy():
        h = np.empty(shape, dtype=np.float32)
        assert dtoh(h.ctypes.data, dev.value, ref.nbytes) == 0
        return h
    hashlib.sha256(asnumpy().tobytes()).hexdigest()
    with h5py.File(f"{d}/field_{k:04d}.h5", "w") as f:
        f.create_dataset("field", data=asnumpy())
        f.attrs["step"] = k
    refs.append(ref)
for k in reversed(range(count)):
    with h5py.File(f"{d}/field_{k:04d}.h5", "r") as f:
        back = f["field"][...]
        staged = np.empty_like(back)
        staged[...] = back
        assert int(f.attrs["step"]) == k, k
    assert np.array_equal(staged, refs[k]), k
print("h5py device ok")
PYEOF
	ck CKPTCACHE_PATHS="$T/device/*.h5" CKPTCACHE_CAPTURE=device CKPTCACHE_ORDER=reverse CKPTCACHE_SSD_DIR="$T/ssd" \
		CKPTCACHE_GPU_CACHE=512M CKPTCACHE_LANES=2 -- env LD_LIBRARY_PATH="$FAKECUDA" FAKECUDA_DEVICE_MIB=4096 "$PY" devh5.py "$T/device" \
		>"$T/out" 2>&1
	local rc=$?
	cat "$T/out"
	[ $rc -eq 0 ] || fail "h5py under device capture: $(status_text $rc)$(last_error)"
	plain "$PY" -c '
import sys, numpy as np, h5py
for k in range(10):
    with h5py.File(f"{sys.argv[1]}/field_{k:04d}.h5", "r") as f:
        ref = np.random.default_rng(k).standard_normal((2048 + 8 * k, 1536 + 3 * k), dtype=np.float32)
        assert np.array_equal(f["field"][...], ref) and int(f.attrs["step"]) == k, k
' "$T/device" || fail "the fields at their real paths differ from what was saved"
	if [[ $PRELOAD != *" "* ]] && [ "$(nproc)" -ge 2 ]; then
		stats_ok capture.captured\>=10 lanes.copies\>=1
	fi
}
case_add device/h5py-reads-in-lanes device_h5py_lanes
