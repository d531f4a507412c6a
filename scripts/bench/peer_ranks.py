#!/usr/bin/env python3
"""Ranks-per-GPU benchmark of peer lending (scripts/bench/peer_ranks).

One process per GPU, as an MPI job places them, each runs the CUDA RTM proxy
(build/gpu/rtm_proxy_cuda) with device capture, replaying its own column of a
per-rank checkpoint-size trace (default tests/data/rtm-8gpu-sample.csv) at a
fixed interval. Every rank's gpu tier gets the same size, chosen so that the
rank with the largest history overflows it and the one with the smallest
keeps room to spare. Each repetition runs, in turn: without the library, and
with it under CKPTCACHE_PEER=off (local only), greedy and maxflow. The
figures: the group's checkpoint blocking time (the slowest rank's timed
checkpoint I/O, since the ranks are tightly coupled), the restore
throughput (all ranks' bytes over the slowest rank's restore time), what was
lent, and whether every restored byte verified. Medians with min-max over
the repetitions, ratios against local-only measured in the same
repetitions. Results go to $OUT (peer-ranks.md, peer-ranks.csv) when set.
Exits 1 when a run failed or a byte did not verify, 77 without 2 GPUs.
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU"))


def parse_size(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)i?B?", s.strip(), re.I)
    if not m:
        raise argparse.ArgumentTypeError("bad size %r" % s)
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " "))


def trace_columns(path):
    cols = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] == "#":
                continue
            vals = [int(v) for v in line.split(",")]
            cols = [[] for _ in vals] if cols is None else cols
            for k, v in enumerate(vals):
                cols[k].append(v)
    return cols or []


def run_group(args, mode, cols, cache, rep, work):
    """Runs one rank per GPU at once; returns a dict of the group's figures."""
    n = len(cols)
    job = "%d%03d%d" % (os.getpid() % 100000, rep, ["none", "off", "greedy", "maxflow"].index(mode))
    procs = []
    for r in range(n):
        d = os.path.join(work, "%s-r%d" % (mode, r))
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        vis = ",".join([str(r)] + [str(k) for k in range(n) if k != r])
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=vis, SLURM_JOB_ID=job, SLURM_STEP_ID="0",
                   SLURM_NODEID="0", SLURM_PROCID=str(r), SLURM_LOCALID=str(r),
                   SLURM_NTASKS_PER_NODE=str(n))
        if mode != "none":
            env.update(LD_PRELOAD=args.lib, CKPTCACHE_PATHS=d + "/*.bin", CKPTCACHE_CAPTURE="device",
                       CKPTCACHE_GPU_CACHE=str(cache), CKPTCACHE_PEER=mode,
                       CKPTCACHE_STATS=os.path.join(work, "%s-r%d.json" % (mode, r)),
                       CKPTCACHE_LOG=os.environ.get("CKPTCACHE_LOG", "warn"))
        cmd = [args.proxy, "--dir", d, "--sizes", "%s:%d" % (args.trace, args.col[r]), "--device", "0",
               "--interval-ms", str(args.interval_ms)]
        log = open(os.path.join(work, "%s-r%d.log" % (mode, r)), "w")
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    res = {"mode": mode, "rep": rep, "ok": True, "ranks": []}
    t_end = time.time() + args.timeout
    for r, (p, log) in enumerate(procs):
        try:
            rc = p.wait(timeout=max(1, t_end - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        log.close()
        text = open(os.path.join(work, "%s-r%d.log" % (mode, r))).read()
        m = re.search(r"RESULT .*verified=(\d+)/(\d+) ckpt_s=([\d.]+) restore_s=([\d.]+) bytes=(\d+)", text)
        rank = {"rc": rc}
        if m:
            rank.update(verified=int(m.group(1)), count=int(m.group(2)), ckpt_s=float(m.group(3)),
                        restore_s=float(m.group(4)), bytes=int(m.group(5)))
        st = os.path.join(work, "%s-r%d.json" % (mode, r))
        if os.path.exists(st):
            try:
                peer = json.load(open(st)).get("peer") or {}
                rank["lent"] = (peer.get("lent") or {}).get("bytes", 0)
                rank["borrowed"] = (peer.get("borrowed") or {}).get("bytes", 0)
                rank["placed"] = (peer.get("borrowed") or {}).get("placed_bytes", 0)
            except (OSError, ValueError):
                pass
        if rc != 0 or not m or rank["verified"] != rank["count"]:
            res["ok"] = False
            sys.stderr.write("peer_ranks: %s rank %d (rep %d): rc=%s\n%s\n" % (mode, r, rep, rc, text[-2000:]))
        res["ranks"].append(rank)
    if res["ok"]:
        res["block_s"] = max(x["ckpt_s"] for x in res["ranks"])
        res["restore_GBps"] = sum(x["bytes"] for x in res["ranks"]) / max(x["restore_s"] for x in res["ranks"]) / 1e9
        res["lent"] = sum(x.get("lent", 0) for x in res["ranks"])
        res["placed"] = sum(x.get("placed", 0) for x in res["ranks"])
    return res


def spread(v):
    return "%.4g (%.4g-%.4g)" % (statistics.median(v), min(v), max(v)) if v else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=0, help="ranks (default: one per GPU)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trace", default=os.path.join(ROOT, "tests/data/rtm-8gpu-sample.csv"))
    ap.add_argument("--col", default="", help="the trace column of each rank (default: the largest "
                    "histories for the first --borrowers ranks, then the smallest ones)")
    ap.add_argument("--borrowers", type=int, default=1,
                    help="ranks given the largest histories (default 1)")
    ap.add_argument("--gpu-cache", type=parse_size, default=0,
                    help="each rank's gpu tier (default: between the largest and the smallest history)")
    ap.add_argument("--interval-ms", type=int, default=10)
    ap.add_argument("--timeout", type=int, default=180, help="seconds per group run")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build/.libs/libckptcache.so"))
    ap.add_argument("--proxy", default=os.path.join(ROOT, "build/gpu/rtm_proxy_cuda"))
    ap.add_argument("--work", default="", help="folder for the checkpoints (default: under /dev/shm)")
    args = ap.parse_args()

    ng = gpus()
    n = args.ranks or ng
    if ng < 2 or n < 2 or n > ng:
        print("peer_ranks: SKIP: needs 2 GPUs or more (found %d)" % ng)
        return 77
    cols = trace_columns(args.trace)
    sums = [sum(c) for c in cols]
    if args.col:
        args.col = [int(c) for c in args.col.split(",")][:n]
    else:
        order = sorted(range(len(cols)), key=lambda k: sums[k])
        b = max(1, min(args.borrowers, n - 1))
        args.col = order[::-1][:b] + order[:n - b]
    if len(args.col) < n:
        ap.error("--col names fewer columns than ranks")
    hist = [sums[c] for c in args.col]
    # between the borrowers' smallest history and the lenders' largest
    b = max(1, min(args.borrowers, n - 1))
    cache = args.gpu_cache or (min(hist[:b]) + max(hist[b:])) // 2
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = args.work or tempfile.mkdtemp(prefix="ckc-peer-ranks-", dir=base)
    os.makedirs(work, exist_ok=True)
    print("peer_ranks: %d ranks, trace %s columns %s (histories %s MB), gpu tier %.0f MB each, %d ms interval"
          % (n, os.path.basename(args.trace), args.col, [round(h / 1e6) for h in hist], cache / 1e6,
             args.interval_ms))
    runs = []
    ok = True
    for rep in range(args.repeats):
        for mode in ("none", "off", "greedy", "maxflow"):
            r = run_group(args, mode, [cols[c] for c in args.col], cache, rep, work)
            ok &= r["ok"]
            runs.append(r)
            if r["ok"]:
                print("  rep %d %-8s blocking %.4f s  restore %.2f GB/s  lent %.0f MB  placed on peers %.0f MB"
                      % (rep, mode, r["block_s"], r["restore_GBps"], r.get("lent", 0) / 1e6,
                         r.get("placed", 0) / 1e6), flush=True)
    rows = []
    for mode in ("none", "off", "greedy", "maxflow"):
        good = [r for r in runs if r["mode"] == mode and r["ok"]]
        ratio = []
        for r in good:
            loc = [x for x in runs if x["mode"] == "off" and x["rep"] == r["rep"] and x["ok"]]
            if loc:
                ratio.append(r["block_s"] / loc[0]["block_s"])
        rows.append({"mode": mode, "runs": len(good),
                     "block_s": spread([r["block_s"] for r in good]),
                     "vs_local": spread(ratio),
                     "restore_GBps": spread([r["restore_GBps"] for r in good]),
                     "lent_MB": spread([r.get("lent", 0) / 1e6 for r in good]),
                     "placed_MB": spread([r.get("placed", 0) / 1e6 for r in good])})
    hdr = ["mode", "runs", "block_s", "vs_local", "restore_GBps", "lent_MB", "placed_MB"]
    lines = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    lines += ["| " + " | ".join(str(r[h]) for h in hdr) + " |" for r in rows]
    print("\n".join(lines))
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "peer-ranks.md"), "w") as f:
            f.write("%d ranks, columns %s, gpu tier %.0f MB each, %d ms interval, %d repeats\n\n"
                    % (n, args.col, cache / 1e6, args.interval_ms, args.repeats))
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(out, "peer-ranks.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["rep", "mode", "ok", "block_s", "restore_GBps", "lent_bytes", "placed_bytes"])
            for r in runs:
                w.writerow([r["rep"], r["mode"], r["ok"], r.get("block_s", ""), r.get("restore_GBps", ""),
                            r.get("lent", ""), r.get("placed", "")])
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print("peer_ranks: %s" % ("every byte verified" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
