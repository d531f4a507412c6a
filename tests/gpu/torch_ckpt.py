#!/usr/bin/env python3
"""torch_ckpt: a PyTorch program that checkpoints CUDA tensors with torch.save
and restores them with torch.load(map_location="cuda"), knowing nothing of
ckptcache (it is an unmodified program the library is preloaded into).

This file owns: K CUDA tensors of various shapes and dtypes (float32, bfloat16,
int64; 1 to --max-mib MiB each; one of them non-contiguous), each saved to
DIR/t_%03d.pt, then loaded back in reverse order straight to the GPU and
compared with torch.equal against the originals, which stay on the GPU; then
one torch.save of a dict of tensors (DIR/t_dict.pt) loaded and compared the
same way. Only the torch.save / torch.load calls (with a device synchronise)
are timed.

Output: 'save', 'load' and 'dict' lines, 'torch_ckpt: verified K/K' and
  RESULT save_GBps=X load_GBps=Y verified=K/K dict=ok|MISMATCH
Exit: 0 when everything verified, 1 on a mismatch or an error, 2 on a usage
error, 77 (skipped) without PyTorch or without a CUDA device.
"""

import argparse
import os
import random
import sys
import time

PROG = "torch_ckpt"
MiB = 1024 * 1024


def skip(why):
    print(f"{PROG}: SKIP: {why}", flush=True)
    sys.exit(77)


def parse_args():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="where the .pt files go (created if missing)")
    ap.add_argument("--count", type=int, default=16, help="number of tensors (default 16)")
    ap.add_argument("--max-mib", type=int, default=64, help="largest tensor in MiB; sizes are 1..N (default 64)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the sizes and the data (default 1)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    ap.add_argument("--keep", action="store_true", help="do not delete the files at the end")
    a = ap.parse_args()
    if a.count < 1 or a.max_mib < 1 or a.device < 0:
        ap.error("--count and --max-mib must be >= 1, --device >= 0")
    return a


def make_tensor(torch, k, nbytes, gen, dev):
    """Tensor k: dtype by k % 3, rank by k % 4, about nbytes bytes; k % 5 == 4 is a
    transposed (non-contiguous) view."""
    dtype = (torch.float32, torch.bfloat16, torch.int64)[k % 3]
    item = torch.empty((), dtype=dtype).element_size()
    n = max(4096, nbytes // item // 4096 * 4096)
    shape = ((n,), (n // 256, 256), (n // 2048, 64, 32), (n // 4096, 8, 16, 32))[k % 4]
    if dtype == torch.int64:
        t = torch.randint(-(2**61), 2**61, shape, generator=gen, device=dev, dtype=dtype)
    else:
        t = torch.randn(shape, generator=gen, device=dev, dtype=dtype)
    if k % 5 == 4:
        t = t.reshape(n // 256, 256).t()
    return t


def same(torch, a, b):
    return (
        b.device.type == "cuda"
        and a.dtype == b.dtype
        and a.shape == b.shape
        and a.stride() == b.stride()
        and torch.equal(a, b)
    )


def main():
    a = parse_args()
    try:
        import torch
    except ImportError as e:
        skip(f"no PyTorch ({e})")
    if not torch.cuda.is_available() or torch.cuda.device_count() <= a.device:
        skip(f"no CUDA device {a.device} (torch {torch.__version__})")
    dev = torch.device("cuda", a.device)
    torch.cuda.set_device(dev)
    os.makedirs(a.dir, exist_ok=True)
    d = os.path.realpath(a.dir)

    rng = random.Random(a.seed)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)
    ts = [make_tensor(torch, k, rng.randint(1, a.max_mib) * MiB, gen, dev) for k in range(a.count)]
    torch.cuda.synchronize()
    nbytes = [t.untyped_storage().nbytes() for t in ts]
    total = sum(nbytes)
    paths = [os.path.join(d, f"t_{k:03d}.pt") for k in range(a.count)]
    print(f"{PROG}: device {a.device} {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, "
          f"{a.count} tensors, {total / MiB:.1f} MiB, dtypes float32/bfloat16/int64, dir {d}", flush=True)

    def phase(name, n, b, s, extra=""):
        print(f"{PROG}: {name:<10}  {n} files  {b / MiB:.1f} MiB  {s:.3f} s  "
              f"{b / s / 1e9 if s > 0 else 0.0:.2f} GB/s{extra}", flush=True)

    # Save every tensor (the original stays on the GPU).
    tw = 0.0
    for t, p in zip(ts, paths):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.save(t, p)
        tw += time.perf_counter() - t0
    phase("save", a.count, total, tw)

    # Load them back in reverse order straight to the GPU.
    tr = 0.0
    verified = 0
    for k in reversed(range(a.count)):
        t0 = time.perf_counter()
        r = torch.load(paths[k], map_location=dev, weights_only=True)
        torch.cuda.synchronize()
        tr += time.perf_counter() - t0
        if isinstance(r, torch.Tensor) and same(torch, ts[k], r):
            verified += 1
        else:
            print(f"{PROG}: MISMATCH in {paths[k]}: got "
                  f"{getattr(r, 'dtype', type(r))} {tuple(getattr(r, 'shape', ()))} on "
                  f"{getattr(r, 'device', '?')}, expected {ts[k].dtype} {tuple(ts[k].shape)}", flush=True)
        del r
    phase("load", a.count, total, tr, " (reverse order, map_location=cuda)")

    # One dict of tensors in one file (a state_dict-like checkpoint).
    sd = {f"layer{k}.weight": ts[k] for k in range(0, a.count, 2)}
    sd["step"] = torch.tensor(a.count, device=dev)
    dpath = os.path.join(d, "t_dict.pt")
    dbytes = sum(v.untyped_storage().nbytes() for v in sd.values())
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.save(sd, dpath)
    ts_dict = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = torch.load(dpath, map_location=dev, weights_only=True)
    torch.cuda.synchronize()
    tl_dict = time.perf_counter() - t0
    dict_ok = isinstance(r, dict) and r.keys() == sd.keys() and all(same(torch, sd[k], r[k]) for k in sd)
    del r
    print(f"{PROG}: dict        {len(sd)} tensors  {dbytes / MiB:.1f} MiB  save {ts_dict:.3f} s  "
          f"load {tl_dict:.3f} s  {'verified' if dict_ok else 'MISMATCH'}", flush=True)

    ok = verified == a.count and dict_ok
    if ok and not a.keep:
        for p in paths + [dpath]:
            os.unlink(p)
    print(f"{PROG}: verified {verified}/{a.count}" + ("" if ok or a.keep else " (files kept for inspection)"))
    print(f"RESULT save_GBps={total / tw / 1e9 if tw > 0 else 0.0:.3f} "
          f"load_GBps={total / tr / 1e9 if tr > 0 else 0.0:.3f} verified={verified}/{a.count} "
          f"dict={'ok' if dict_ok else 'MISMATCH'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
