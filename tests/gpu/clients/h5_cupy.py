#!/usr/bin/env python3
"""h5_cupy: CuPy arrays written to HDF5 files with h5py the way it is
usually done (h5py.File(path, "w"), create_dataset(data=cupy.asnumpy(a)),
attributes), and read back (f["field"][...] then cupy.asarray) in reverse
(or another) order; every array is compared with the original on the GPU.
Only the write and read sections are timed."""

import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_common as cc  # noqa: E402

PROG = "h5_cupy"


def check_h5(path, e):
    import h5py
    import numpy
    try:
        with h5py.File(path, "r") as f:
            data = numpy.ascontiguousarray(f["field"][...])
            ok = int(f.attrs["step"]) == e["step"]
    except (OSError, KeyError):
        return False
    return ok and hashlib.sha256(data.tobytes()).hexdigest() == e["sha256"]


def main():
    ap = cc.parser(PROG, __doc__)
    ap.add_argument("--side", type=int, default=4096, help="each dataset is side x side/2 float32 (default 4096)")
    a = ap.parse_args()
    if a.verify:
        cc.verify_bytes(PROG, a.verify, check_h5)
    try:
        import cupy
        import h5py
    except ImportError as e:
        cc.skip(PROG, f"no CuPy/h5py ({e})")
    os.makedirs(a.dir, exist_ok=True)
    rng = cupy.random.default_rng(a.seed)
    arrays = [rng.standard_normal((a.side - 8 * k, a.side // 2), dtype=cupy.float32) for k in range(a.count)]
    paths = [os.path.join(a.dir, f"field_{k:04d}.h5") for k in range(a.count)]
    sync = cupy.cuda.Device().synchronize
    save, load = cc.Clock(sync), cc.Clock(sync)
    manifest = []
    nbytes = 0
    for k, arr in enumerate(arrays):
        if a.manifest:
            manifest.append({"path": paths[k], "kind": "h5", "step": k,
                             "sha256": cc.sha(cupy.asnumpy(arr).tobytes())})
        with save:
            with h5py.File(paths[k], "w") as f:
                f.create_dataset("field", data=cupy.asnumpy(arr))
                f.attrs["step"] = k
        nbytes += arr.nbytes
    verified = 0
    for k in cc.order(a.count, a.order, a.seed):
        with load:
            with h5py.File(paths[k], "r") as f:
                back = cupy.asarray(f["field"][...])
                step = int(f.attrs["step"])
        verified += cc.checked(PROG, step == k and back.shape == arrays[k].shape and
                               bool(cupy.array_equal(back, arrays[k])), paths[k])
        del back
    cc.finish(PROG, a, save.total, load.total, verified, a.count, nbytes, manifest, paths)


if __name__ == "__main__":
    main()
