#!/usr/bin/env python3
"""The client programs of the GPU tests, without the library, in copy mode
and in device capture, in one invocation on the GPU machine; owns
scripts/bench/clients (its wrapper).

Each client is a program written the way its users write it, knowing
nothing of ckptcache (tests/apps/stencil_cuda.cu, tests/gpu/clients/*.py,
tests/apps/rtm_proxy_cuda.cu for the shot the HPDC'23 authors' code runs).
Every run must verify every byte it restores; the files each run leaves are
then checked at their real paths by a process without the library (the
stencil's against the run without the library, the Python clients' against
the manifest each writes). Runs of one client rotate through the modes,
repeats times, each started after a sync(2) so that no run pays for the
write-back of the files the one before it left; the report gives the median seconds of checkpoint and
restore of each mode with the spread (min-max), and the ratios to the run
without the library (above 1: faster with it). When the VeloC-GPU baseline
(the authors' code as published, with its driver) is found, its shot runs
beside the proxy's, and the restore from the gpu tier is set against the
device-to-device copy rate measured by gpu_limits.

Writes OUT/clients.csv (every run), OUT/veloc.csv, OUT/clients.md (the tables),
OUT/clients.png (the ratios) and OUT/runs/ (each run's output and
statistics). Exit 0 when every run verified its bytes, 1 otherwise."""

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = ("nolib", "copy", "device")


def clients(a, data):
    """(name, argv, environment for the library runs, how files are checked)."""
    st = os.path.join(a.bin, "stencil_cuda")
    cl = os.path.join(ROOT, "tests", "gpu", "clients")
    py = sys.executable
    q = a.quick
    side, count = (2048, 24) if q else (4096, 80)
    hints = os.path.join(data, "order.txt")
    out = []
    base = [st, "--dir", data, "--side", str(side), "--count", str(count), "--keep"]
    fit = [os.path.join(a.bin, "rtm_proxy_cuda"), "--dir", data, "--count", "8" if q else "24", "--size", "128M",
           "--interval-ms", "10", "--order", "reverse", "--hints", hints, "--keep"]
    # the proxy's shot first: the figure against the HPDC'23 code
    out.append(("rtm-proxy-fit", fit, {"CKPTCACHE_HINTS": hints, "CKPTCACHE_GPU_CACHE": "4G",
                                       "CKPTCACHE_HOST_CACHE": "16G"}, "same"))
    out.append(("stencil-write-offset", base + ["--staging", "offset"], {"CKPTCACHE_ORDER": "reverse"}, "same"))
    out.append(("stencil-fwrite-offset", [st, "--dir", data, "--side", str(side // 2), "--count", str(count * 3),
                                          "--keep", "--staging", "offset", "--io", "fwrite"],
                {"CKPTCACHE_ORDER": "reverse"}, "same"))
    out.append(("stencil-write-pinned", base + ["--staging", "pinned"], {"CKPTCACHE_ORDER": "reverse"}, "same"))
    out.append(("stencil-random-hints", base + ["--staging", "offset", "--order", "random", "--hints", hints],
                {"CKPTCACHE_HINTS": hints}, "same"))
    out.append(("stencil-reuse-touch", base + ["--staging", "malloc", "--touch", "write", "--order", "random",
                                              "--hints", hints], {"CKPTCACHE_HINTS": hints}, "same"))
    man = os.path.join(data, "manifest.json")
    out.append(("npy-cupy", [py, os.path.join(cl, "npy_cupy.py"), "--dir", data, "--count", "6" if q else "20",
                             "--manifest", man, "--keep"], {"CKPTCACHE_ORDER": "reverse"}, "manifest"))
    out.append(("h5-cupy", [py, os.path.join(cl, "h5_cupy.py"), "--dir", data, "--count", "6" if q else "16",
                            "--manifest", man, "--keep"], {"CKPTCACHE_ORDER": "reverse"}, "manifest"))
    out.append(("torch-resnet", [py, os.path.join(cl, "torch_resnet.py"), "--dir", data, "--count",
                                 "3" if q else "12", "--manifest", man, "--keep"], {"CKPTCACHE_ORDER": "reverse"},
                "manifest"))
    return [c for c in out if not a.only or re.search(a.only, c[0])]


def result(text):
    """Checkpoint and restore seconds and the verified count of a RESULT line."""
    m = re.search(r"^RESULT (.*)$", text, re.M)
    if not m:
        return None
    kv = dict(p.split("=", 1) for p in m.group(1).split() if "=" in p)
    ck = float(kv.get("checkpoint_s", kv.get("ckpt_s", "nan")))
    rs = float(kv.get("restore_s", "nan"))
    v = kv.get("verified", "0/1").split("/")
    return ck, rs, int(v[0]) == int(v[1]) and int(v[1]) > 0, float(kv.get("bytes", "0"))


def hashes(folder):
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith((".bin", ".npy", ".h5", ".pt")):
            h = hashlib.sha256()
            with open(os.path.join(folder, name), "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
            out[name] = h.hexdigest()
    return out


def quiesce():
    """Every run starts with no dirty pages of the runs before it: their
    write-back would compete with whichever run came next."""
    os.sync()


def run_one(a, name, argv, envs, check, mode, rep, data, ref, log):
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    tag = f"{name}.{mode}.{rep}"
    stats = os.path.join(a.out, "runs", tag + ".json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CKPTCACHE_") and k != "LD_PRELOAD"}
    quiesce()
    if mode != "nolib":
        env.update(envs)
        env.update({"CKPTCACHE_PATHS": os.path.join(data, "*"), "CKPTCACHE_CAPTURE": mode,
                    "CKPTCACHE_SSD_DIR": a.ssd, "CKPTCACHE_STATS": stats, "LD_PRELOAD": a.lib})
    t0 = time.time()
    try:
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=a.timeout)
        text, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = (e.stdout or "") if isinstance(e.stdout, str) else "", 124
    wall = time.time() - t0
    with open(os.path.join(a.out, "runs", tag + ".out"), "w") as f:
        f.write(text)
    r = result(text)
    ok = rc == 0 and r is not None and r[2]
    why = "" if ok else (f"timed out after {a.timeout} s" if rc == 124 else f"exit {rc}, not verified")
    # the files at their real paths, read without the library
    if ok and check == "same":
        got = hashes(data)
        if mode == "nolib":
            ref[name] = got
        elif ref.get(name) and got != ref[name]:
            ok, why = False, "its files differ from those of the run without the library"
    elif ok and check == "manifest":
        v = subprocess.run([argv[0], argv[1], "--verify", os.path.join(data, "manifest.json")],
                           env={k: v for k, v in env.items() if k != "LD_PRELOAD" and not k.startswith("CKPTCACHE_")},
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if v.returncode != 0:
            ok, why = False, "files at the real paths: " + v.stdout.strip().splitlines()[-1]
    cap = {}
    if mode != "nolib" and os.path.exists(stats):
        try:
            with open(stats) as f:
                cap = json.load(f).get("capture", {})
        except (OSError, ValueError):
            pass
    row = {"client": name, "mode": mode, "rep": rep, "ok": int(ok), "why": why,
           "checkpoint_s": r[0] if r else "", "restore_s": r[1] if r else "", "bytes": r[3] if r else "",
           "wall_s": round(wall, 2), "captured": cap.get("captured", ""), "restored_d2d": cap.get("restored_d2d", ""),
           "filled": cap.get("filled", "")}
    caps = f", captured {row['captured']}, restored from device {row['restored_d2d']}, filled {row['filled']}" \
        if mode == "device" else ""
    print(f"{'PASS' if ok else 'FAIL'} {tag}: checkpoint {row['checkpoint_s']} s, restore {row['restore_s']} s{caps}"
          + (f" ({why})" if why else ""), flush=True)
    log.writerow(row)
    return row


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return f"{min(xs):.3g}-{max(xs):.3g}" if xs else "-"


def veloc(a):
    """The authors' shot, repeats times: ckpt and restore GB/s."""
    vd = a.veloc
    if not vd or not os.path.exists(os.path.join(vd, "run.sh")):
        return None
    res = []
    log = open(os.path.join(a.out, "veloc.csv"), "w")
    log.write("rep,ok,checkpoint_GBps,restore_GBps\n")
    for rep in range(a.repeats):
        od = os.path.join(a.out, "runs", f"veloc.{rep}")
        os.makedirs(od, exist_ok=True)
        env = dict(os.environ, N="8" if a.quick else "24", S="128M", I="10", GPU_CACHE="4", HOST_CACHE="16",
                   EXTRA="--drain 0", OUTDIR=od)
        env.pop("LD_PRELOAD", None)
        quiesce()
        p = subprocess.run(["bash", os.path.join(vd, "run.sh"), "main"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=a.timeout)
        m = re.search(r"ckpt ([0-9.]+) GB/s, restore ([0-9.]+) GB/s.*failures (\d+)", p.stdout)
        ok = p.returncode == 0 and m and m.group(3) == "0"
        print(f"{'PASS' if ok else 'FAIL'} veloc.{rep}: {m.group(0) if m else p.stdout[-300:]}", flush=True)
        if m:
            res.append((float(m.group(1)), float(m.group(2))))
            log.write(f"{rep},{int(bool(ok))},{m.group(1)},{m.group(2)}\n")
    return res


def limits(a):
    exe = os.path.join(a.bin, "gpu_limits")
    if not os.path.exists(exe):
        return {}
    p = subprocess.run([exe, "--size", "128M", "--repeat", "5"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"LIMIT (\S+) GBps=([0-9.]+)", p.stdout)}


def report(a, rows, lim, vel, device_name):
    by = {}
    for r in rows:
        if r["mode"] in MODES and r["ok"]:
            by.setdefault((r["client"], r["mode"]), []).append(r)
    names = []
    for r in rows:
        if r["client"] not in names and r["mode"] in MODES:
            names.append(r["client"])
    lines = [f"# Client programs: without the library, copy mode, device capture",
             "", f"Machine: {device_name}. Command: `{a.cmdline}`. Median of {a.repeats} runs, spread min-max; "
             "ratio = seconds without the library / seconds with it (above 1: faster with it).", "",
             "| client | mode | checkpoint s | restore s | checkpoint ratio | restore ratio | runs ok |",
             "|---|---|---:|---:|---:|---:|---:|"]
    summary = []
    for n in names:
        base = by.get((n, "nolib"), [])
        bc = med([r["checkpoint_s"] for r in base])
        brs = med([r["restore_s"] for r in base])
        for m in MODES:
            rs = by.get((n, m), [])
            allr = [r for r in rows if r["client"] == n and r["mode"] == m]
            ck = [r["checkpoint_s"] for r in rs]
            rt = [r["restore_s"] for r in rs]
            if m == "nolib" or not rs:
                cr = rr = "-"
            else:
                ckr = [bc / x for x in ck if x > 0]
                rtr = [brs / x for x in rt if x > 0]
                cr = f"{med(ckr):.2f} ({spread(ckr)})"
                rr = f"{med(rtr):.2f} ({spread(rtr)})"
                summary.append((n, m, med(ckr), med(rtr)))
            lines.append(f"| {n} | {m} | {med(ck):.4g} ({spread(ck)}) | {med(rt):.4g} ({spread(rt)}) | {cr} | {rr} "
                         f"| {len(rs)}/{len(allr)} |")
    if lim:
        lines += ["", "Limits (gpu_limits): " + ", ".join(f"{k} {v:.4g} GB/s" for k, v in sorted(lim.items()))]
    fit = by.get(("rtm-proxy-fit", "device"), [])
    if fit and lim.get("d2d"):
        gbs = [r["bytes"] / r["restore_s"] / 1e9 for r in fit if r["restore_s"] > 0]
        cks = [r["bytes"] / r["checkpoint_s"] / 1e9 for r in fit if r["checkpoint_s"] > 0]
        lines += ["", "## The shot of the HPDC'23 code (history in the gpu tier)", "",
                  "| | checkpoint GB/s | restore GB/s | restore / D2D |", "|---|---:|---:|---:|",
                  f"| ckptcache, rtm_proxy_cuda, device capture | {med(cks):.0f} ({spread(cks)}) | "
                  f"{med(gbs):.0f} ({spread(gbs)}) | {med(gbs) / lim['d2d']:.0%} |"]
        if vel:
            vc = [x[0] for x in vel]
            vr = [x[1] for x in vel]
            lines.append(f"| VeloC-GPU (authors' code, same shot) | {med(vc):.0f} ({spread(vc)}) | "
                         f"{med(vr):.0f} ({spread(vr)}) | {med(vr) / lim['d2d']:.0%} |")
    if vel is None and not a.quick:
        lines.append("\n(VeloC-GPU baseline not found: set VELOC_DIR to its folder to run it beside the proxy.)")
    with open(os.path.join(a.out, "clients.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(10, 4.5))
        labels = [f"{n}\n{m}" for n, m, _, _ in summary]
        x = range(len(summary))
        ax.bar([i - 0.2 for i in x], [s[2] for s in summary], 0.4, label="checkpoint")
        ax.bar([i + 0.2 for i in x], [s[3] for s in summary], 0.4, label="restore")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("speed-up over no library (median)")
        ax.set_title(f"Client programs with ckptcache, {device_name}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "clients.png"), dpi=110)
    except ImportError:
        pass


def main():
    ap = argparse.ArgumentParser(prog="scripts/bench/clients", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller histories, for tests/gpu/run")
    ap.add_argument("--only", help="a regular expression of client names")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", ".libs", "libckptcache.so"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "gpu"))
    ap.add_argument("--data", default="/tmp/ckptcache-clients", help="the checkpoint folder (local disk)")
    ap.add_argument("--veloc", default=os.environ.get("VELOC_DIR", ""),
                    help="the VeloC-GPU baseline folder (run.sh); default $VELOC_DIR")
    ap.add_argument("--timeout", type=int, default=240, help="seconds a run may take (default 240)")
    ap.add_argument("--budget-s", type=int, default=0, help="start no run after this many seconds")
    a = ap.parse_args()
    a.cmdline = "scripts/bench/clients " + " ".join(sys.argv[1:])
    a.out = os.environ.get("OUT") or "/tmp/ckptcache-bench-clients"
    os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
    if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.DEVNULL,
                                                            stderr=subprocess.DEVNULL).returncode != 0:
        print("scripts/bench/clients: no GPU here: it runs on the GPU machine")
        return 0
    device_name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[0]
    modes = [m for m in a.modes.split(",") if m in MODES]
    data = os.path.join(a.data, "run")
    a.ssd = os.path.join(a.data, "ssd")
    os.makedirs(a.ssd, exist_ok=True)
    lim = limits(a)
    start = time.time()
    rows, ref = [], {}
    fields = ["client", "mode", "rep", "ok", "why", "checkpoint_s", "restore_s", "bytes", "wall_s", "captured",
              "restored_d2d", "filled"]
    with open(os.path.join(a.out, "clients.csv"), "w", newline="") as f:
        log = csv.DictWriter(f, fieldnames=fields)
        log.writeheader()
        for name, argv, envs, check in clients(a, data):
            for rep in range(a.repeats):
                # the modes in turn, starting with another one each time;
                # the run without the library first on the first round
                order = modes[rep % len(modes):] + modes[:rep % len(modes)] if rep else modes
                for m in order:
                    if a.budget_s and time.time() - start > a.budget_s:
                        print(f"SKIP {name}.{m}.{rep}: the budget of {a.budget_s} s is spent", flush=True)
                        continue
                    rows.append(run_one(a, name, argv, envs, check, m, rep, data, ref, log))
                    f.flush()
    vel = veloc(a) if not a.quick and (not a.only or re.search(a.only, "rtm-proxy-fit")) else None
    shutil.rmtree(a.data, ignore_errors=True)
    report(a, rows, lim, vel, device_name)
    bad = sum(1 for r in rows if not r["ok"])
    print(f"{len(rows) - bad} passed, {bad} failed", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
