#!/usr/bin/env python3
"""Everyday programs over a folder the patterns tag, with and without the
library, paired; owns scripts/bench/tools (its wrapper).

A job's folder is often tagged whole (CKPTCACHE_PATHS=/scratch/run42/**):
besides its checkpoints, the job's script extracts its inputs there, appends
to its logs, keeps a small database, zips its results. Each program below
is run the way its users run it, knowing nothing of the library, in a
folder of its own each run (a file system reuses no inode it freed a
moment ago, which made creates after a removal slower run by run); the
side without the library runs with an LD_PRELOAD of the C library, so both
sides have an environment of one size. Pairs alternate their order. After
each run, a process without the library checks what the program left at
its real paths (the tree extracted, the database's rows, the archive's
members, the log's lines).

Prints, per program, the median time of each side, the median of the
per-pair ratios (time without / time with: below 1, slower with the
library) and their spread, and writes the table to OUT/tools.md. Exit 0
when every run's files checked out and every median ratio reached
--target (default 0.95), 1 otherwise."""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

SQLITE = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1] + "/run.db")
c.execute("create table t(a integer, b text)")
for k in range(100):
    c.executemany("insert into t values(?, ?)", [(i, "x" * 50) for i in range(200)])
    c.commit()
"""
ZIPF = """
import sys, zipfile
with zipfile.ZipFile(sys.argv[1] + "/a.zip", "w") as z:
    for i in range(300):
        z.writestr("m%d" % i, bytes([i % 251]) * 65536)
"""
LOGGING = """
import logging, sys
logging.basicConfig(filename=sys.argv[1] + "/run.log", level=logging.INFO, format="%(message)s")
for i in range(20000):
    logging.info("step %d", i)
"""


def programs(src_tar):
    """(name, shell command with $D the run's folder, check of the folder)."""
    return [
        ("tar x of a source tree", f"tar xf {src_tar} -C \"$D\"", ("tree", src_tar)),
        ("shell appends (1000 x echo >> log)",
         "for i in $(seq 1000); do echo \"line $i\" >> \"$D/out.log\"; done", ("lines", "out.log", 1000)),
        ("Python logging (20000 lines)", f"{PY} -c '{LOGGING}' \"$D\"", ("lines", "run.log", 20000)),
        ("sqlite3 (100 transactions)", f"{PY} -c '{SQLITE}' \"$D\"", ("sqlite", "run.db", 20000)),
        ("zipfile (300 x 64 KiB)", f"{PY} -c '{ZIPF}' \"$D\"", ("zip", "a.zip", 300)),
        ("a program that does nothing (/bin/true)", "true", None),
    ]


def check(d, how):
    """None when the folder holds what the program wrote, else why not (run
    without the library)."""
    if how is None:
        return None
    kind = how[0]
    if kind == "tree":
        ref = tempfile.mkdtemp(prefix="ckc-tools-ref.")
        try:
            subprocess.run(["tar", "xf", how[1], "-C", ref], check=True)
            r = subprocess.run(["diff", "-r", ref, d], capture_output=True, text=True)
            return None if r.returncode == 0 else "the tree differs: " + r.stdout[:300]
        finally:
            shutil.rmtree(ref)
    p = os.path.join(d, how[1])
    if kind == "lines":
        with open(p, "rb") as f:
            n = sum(1 for _ in f)
        return None if n == how[2] else f"{how[1]}: {n} lines, not {how[2]}"
    if kind == "sqlite":
        import sqlite3
        c = sqlite3.connect(p)
        n = c.execute("select count(*), sum(length(b)) from t").fetchone()
        c.close()
        return None if n == (how[2], how[2] * 50) else f"{how[1]}: rows {n}"
    if kind == "zip":
        import zipfile
        with zipfile.ZipFile(p) as z:
            for i in range(how[2]):
                if z.read("m%d" % i) != bytes([i % 251]) * 65536:
                    return f"{how[1]}: member m{i} differs"
        return None
    return f"no check for {kind}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=15, help="paired runs per program (default 15)")
    p.add_argument("--lib", default=os.path.join(ROOT, "build", ".libs", "libckptcache.so"))
    p.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the folders go")
    p.add_argument("--target", type=float, default=0.95, help="the lowest median ratio that passes")
    p.add_argument("--out", default=".", help="where tools.md goes")
    a = p.parse_args()
    if not os.path.exists(a.lib):
        sys.exit(f"tools: no library at {a.lib} (scripts/build first)")
    work = tempfile.mkdtemp(prefix="ckc-tools.", dir=a.dir)
    # the source tree tar extracts: the project's own sources, made once
    src_tar = os.path.join(work, "src.tar")
    subprocess.run(["tar", "cf", src_tar, "-C", ROOT, "src", "intercept", "tests", "docs"], check=True)
    runs = os.path.join(work, "runs")
    os.makedirs(runs)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CKPTCACHE_") and k != "LD_PRELOAD"}
    base_env["CKPTCACHE_PATHS"] = os.path.join(runs, "**")
    count = [0]
    bad = []

    def one(name, cmd, how, side):
        count[0] += 1
        d = os.path.join(runs, f"r{count[0]:05d}")
        os.makedirs(d)
        env = dict(base_env, D=d, LD_PRELOAD=a.lib if side == "with" else LIBC)
        t = time.perf_counter()
        r = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True)
        w = time.perf_counter() - t
        if r.returncode != 0:
            bad.append(f"{name} ({side}): exit status {r.returncode}: {r.stderr[-300:]}")
        why = check(d, how)
        if why:
            bad.append(f"{name} ({side}): {why}")
        return w

    rows = []
    for name, cmd, how in programs(src_tar):
        one(name, cmd, how, "without")
        one(name, cmd, how, "with")
        t = {"without": [], "with": []}
        for k in range(a.pairs):
            for side in (("without", "with") if k % 2 == 0 else ("with", "without")):
                t[side].append(one(name, cmd, how, side))
        ratios = sorted(x / y for x, y in zip(t["without"], t["with"]))
        row = (name, statistics.median(t["without"]), statistics.median(t["with"]), statistics.median(ratios),
               ratios[0], ratios[-1])
        rows.append(row)
        print(f"{name:44s} without {row[1] * 1e3:8.2f} ms  with {row[2] * 1e3:8.2f} ms  "
              f"ratio {row[3]:.3f} ({row[4]:.2f}..{row[5]:.2f})", flush=True)
    shutil.rmtree(work)
    lines = ["| program | without (ms) | with (ms) | ratio (median) | ratio min..max |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1] * 1e3:.2f} | {r[2] * 1e3:.2f} | {r[3]:.3f} | {r[4]:.2f}..{r[5]:.2f} |")
    with open(os.path.join(a.out, "tools.md"), "w") as f:
        f.write(f"{a.pairs} pairs per program; ratio: time without the library / time with it\n\n")
        f.write("\n".join(lines) + "\n")
    for b in bad:
        print("FAIL", b)
    low = [r for r in rows if r[3] < a.target]
    for r in low:
        print(f"BELOW {r[0]}: {r[3]:.3f} < {a.target}")
    return 1 if bad or low else 0


if __name__ == "__main__":
    sys.exit(main())
