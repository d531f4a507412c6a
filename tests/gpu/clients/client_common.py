"""What the GPU client programs share: options, the clock, the restore
order, and the manifest of what each file must hold, so that the files can
be checked at their real paths by a process without the library
(--verify MANIFEST). The clients know nothing of ckptcache."""

import argparse
import hashlib
import json
import os
import random
import sys
import time


def parser(prog, doc):
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    ap.add_argument("--dir", help="where the checkpoint files go (created if missing)")
    ap.add_argument("--count", type=int, default=16, help="number of checkpoints")
    ap.add_argument("--order", choices=("reverse", "random", "sequential"), default="reverse")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--manifest", help="write what each file must hold here (JSON)")
    ap.add_argument("--verify", metavar="MANIFEST", help="only check the files against MANIFEST and exit")
    ap.add_argument("--keep", action="store_true", help="keep the files")
    return ap


def skip(prog, why):
    print(f"{prog}: SKIP: {why}", flush=True)
    sys.exit(77)


def order(count, how, seed):
    idx = list(range(count))
    if how == "reverse":
        idx.reverse()
    elif how == "random":
        random.Random(seed).shuffle(idx)
    return idx


def sha(data):
    return hashlib.sha256(data).hexdigest()


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


class Clock:
    """Sums the time of the timed sections."""

    def __init__(self, sync):
        self.sync = sync
        self.total = 0.0

    def __enter__(self):
        self.sync()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.sync()
        self.total += time.perf_counter() - self.t0


def checked(prog, ok, path):
    """1 when a loaded checkpoint matched what was saved; 0, said, when not."""
    if not ok:
        print(f"{prog}: MISMATCH in {path}", flush=True)
    return 1 if ok else 0


def finish(prog, args, ckpt_s, restore_s, verified, count, nbytes, manifest, paths):
    if args.manifest:
        with open(args.manifest, "w") as f:
            json.dump(manifest, f)
    if not args.keep:
        for p in paths:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
    print(f"{prog}: checkpoint {ckpt_s:.3f} s, restore {restore_s:.3f} s, {nbytes / 1e9:.3f} GB", flush=True)
    print(f"RESULT checkpoint_s={ckpt_s:.6f} restore_s={restore_s:.6f} "
          f"checkpoint_GBps={nbytes / max(ckpt_s, 1e-9) / 1e9:.3f} "
          f"restore_GBps={nbytes / max(restore_s, 1e-9) / 1e9:.3f} verified={verified}/{count} bytes={nbytes}",
          flush=True)
    sys.exit(0 if verified == count else 1)


def verify_bytes(prog, manifest_path, check=None):
    """Checks each file of the manifest without the library: its bytes
    (sha256), or check(path, entry) for entries of another kind."""
    with open(manifest_path) as f:
        manifest = json.load(f)
    bad = 0
    for e in manifest:
        if e.get("kind", "bytes") == "bytes":
            ok = os.path.exists(e["path"]) and file_sha(e["path"]) == e["sha256"]
        else:
            ok = check(e["path"], e)
        if not ok:
            bad += 1
            print(f"{prog}: {e['path']}: not the bytes written", flush=True)
    print(f"{prog}: {len(manifest) - bad}/{len(manifest)} files hold the bytes written", flush=True)
    sys.exit(1 if bad else 0)
