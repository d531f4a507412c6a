#!/usr/bin/env python3
"""npy_cupy: CuPy arrays saved the way numpy users save them,
numpy.save(path, cupy.asnumpy(a)), and loaded back the same way,
cupy.asarray(numpy.load(path)), in reverse (or another) order; every
loaded array is compared with the original, kept on the GPU.

Arrays are float32 of 64 to 81 MiB (a different size each). Only the
save and load calls are timed (with a device synchronise)."""

import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_common as cc  # noqa: E402

PROG = "npy_cupy"


def main():
    ap = cc.parser(PROG, __doc__)
    ap.add_argument("--min-mib", type=int, default=64)
    ap.add_argument("--max-mib", type=int, default=81)
    a = ap.parse_args()
    if a.verify:
        cc.verify_bytes(PROG, a.verify)
    try:
        import cupy
        import numpy
    except ImportError as e:
        cc.skip(PROG, f"no CuPy/numpy ({e})")
    os.makedirs(a.dir, exist_ok=True)
    rng = cupy.random.default_rng(a.seed)
    sizes = [((a.min_mib << 20) + (k * 7919 * 4096 + k * 12) % (((a.max_mib - a.min_mib) << 20) + 1)) // 4
             for k in range(a.count)]
    arrays = [rng.standard_normal(n, dtype=cupy.float32) for n in sizes]
    paths = [os.path.join(a.dir, f"arr_{k:04d}.npy") for k in range(a.count)]
    sync = cupy.cuda.Device().synchronize
    save, load = cc.Clock(sync), cc.Clock(sync)
    manifest = []
    nbytes = 0
    for k, arr in enumerate(arrays):
        if a.manifest:
            b = io.BytesIO()
            numpy.save(b, cupy.asnumpy(arr))
            manifest.append({"path": paths[k], "sha256": cc.sha(b.getvalue())})
        with save:
            numpy.save(paths[k], cupy.asnumpy(arr))
        nbytes += arr.nbytes
    verified = 0
    for k in cc.order(a.count, a.order, a.seed):
        with load:
            back = cupy.asarray(numpy.load(paths[k]))
        verified += cc.checked(PROG, back.dtype == arrays[k].dtype and back.shape == arrays[k].shape and
                               bool(cupy.array_equal(back, arrays[k])), paths[k])
        del back
    cc.finish(PROG, a, save.total, load.total, verified, a.count, nbytes, manifest, paths)


if __name__ == "__main__":
    main()
