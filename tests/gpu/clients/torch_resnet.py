#!/usr/bin/env python3
"""torch_resnet: a torchvision ResNet-50 trained with Adam on random data,
its model and optimizer state saved after every step with
torch.save({"model": ..., "optim": ...}, path), then loaded back in reverse
(or another) order with torch.load(path, map_location="cuda"); every
tensor of every loaded state is compared with a copy of the state kept on
the GPU at save time. Only torch.save and torch.load are timed."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_common as cc  # noqa: E402

PROG = "torch_resnet"


def flat(obj, out, prefix=""):
    """Every tensor of a nested state, by path."""
    import torch
    if isinstance(obj, torch.Tensor):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flat(v, out, f"{prefix}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flat(v, out, f"{prefix}/{i}")
    return out


def main():
    ap = cc.parser(PROG, __doc__)
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    if a.verify:
        cc.verify_bytes(PROG, a.verify)
    try:
        import torch
        import torchvision
    except ImportError as e:
        cc.skip(PROG, f"no PyTorch/torchvision ({e})")
    if not torch.cuda.is_available():
        cc.skip(PROG, "no CUDA device")
    os.makedirs(a.dir, exist_ok=True)
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    model = torchvision.models.resnet50().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    paths = [os.path.join(a.dir, f"step_{k:04d}.pt") for k in range(a.count)]
    sync = torch.cuda.synchronize
    save, load = cc.Clock(sync), cc.Clock(sync)
    kept, manifest = [], []
    nbytes = 0
    for k in range(a.count):
        x = torch.randn(a.batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (a.batch,), device=dev)
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": k}
        tensors = flat(state, {})
        kept.append({p: t.detach().clone() for p, t in tensors.items()})
        if a.manifest:
            # the bytes a file of that name must hold (torch.save names the
            # archive's folder after the file): saved beside, untimed
            scratch = os.path.join(a.dir + ".manifest", os.path.basename(paths[k]))
            os.makedirs(os.path.dirname(scratch), exist_ok=True)
            torch.save(state, scratch)
            manifest.append({"path": paths[k], "sha256": cc.file_sha(scratch)})
            os.unlink(scratch)
        with save:
            torch.save(state, paths[k])
        nbytes += sum(t.numel() * t.element_size() for t in tensors.values())
    verified = 0
    for k in cc.order(a.count, a.order, a.seed):
        with load:
            back = torch.load(paths[k], map_location="cuda", weights_only=True)
        got = flat(back, {})
        # map_location="cuda" brings every tensor to the GPU, the optimizer's
        # CPU step counters too
        ok = back.get("step") == k and got.keys() == kept[k].keys() and all(
            got[p].device.type == "cuda" and got[p].dtype == kept[k][p].dtype
            and torch.equal(got[p], kept[k][p].to(got[p].device)) for p in got)
        verified += cc.checked(PROG, ok, paths[k])
        del back, got
    cc.finish(PROG, a, save.total, load.total, verified, a.count, nbytes, manifest, paths)


if __name__ == "__main__":
    main()
