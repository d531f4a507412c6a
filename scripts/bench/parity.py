#!/usr/bin/python3
"""The parity benchmark of ckptcache: every workload run without and with
the preloaded library, in pairs (the order alternating from pair to pair,
the same inputs), and the ratio of each pair: the library's speed over the
speed without it (time without / time with, or throughput with / without),
so that 1.0 is parity and less is slower. scripts/bench/parity runs this
after building what it needs; --help lists the options.

Prints a table (median of each side, the median ratio and its spread over
the pairs, peak RSS of each side) and writes it as markdown and the raw
runs as CSV. Exits 1 with a FAIL line for every row whose median ratio is
below its target (0.95 unless the row says otherwise), 2 on a usage error,
3 when a run failed or read back wrong bytes.
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
LIB = os.path.join(ROOT, "build", ".libs", "libckptcache.so")
PROXY = os.path.join(ROOT, "build", "tests", "apps", "rtm_proxy")
FREAD = os.path.join(ROOT, "build", "tests", "bench", "fread_bench")
BANDS = os.path.join(ROOT, "build", "tests", "bench", "bands_bench")
CHARS = os.path.join(ROOT, "build", "tests", "bench", "stdio_chars")
FRESH = os.path.join(ROOT, "build", "tests", "bench", "fresh_bench")
SMALL_C = os.path.join(ROOT, "build", "tests", "bench", "small_files")
RANDOM = os.path.join(ROOT, "build", "tests", "bench", "random_bench")
PEAK_RSS = os.path.join(ROOT, "build", "tests", "bench", "peak_rss")
PYWORK = os.path.join(ROOT, "tests", "bench", "parity_py.py")
# the Python rows' interpreter: PARITY_PYTHON, else the system's (where
# numpy and h5py live on Debian), else this one
PY = os.environ.get("PARITY_PYTHON") or (
    "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable)


def same_size_preload(lib=LIB):
    """The C library's path, with as many slashes added as make it as long
    as lib's (the baseline's LD_PRELOAD: loaded anyway, it changes nothing
    but the environment's size)."""
    with open("/proc/self/maps") as f:
        libc = next(l.split()[-1] for l in f if re.search(r"/libc[.-][^/]*so", l))
    head, tail = os.path.split(libc)
    return head + "/" * max(1, len(lib) - len(libc) + 1) + tail


SAME_SIZE_PRELOAD = same_size_preload()


# The Python rows pin glibc's malloc thresholds on both sides. Its dynamic
# mmap threshold (raised by the first free of a large block) decides which
# of a program's 16 MiB arrays come from reused heap memory and which from
# fresh pages, and that follows the process's history chaotically: one more
# environment variable, or a few small allocations, turned 35,000 page
# faults of an h5py load into 47,000 and swung loads by 2x, either way,
# with no library loaded at all. With these, large arrays are reused from
# the heap on both sides, and what is left to compare is the I/O.
PY_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


class RunError(Exception):
    pass


# Seconds every run of a workload that moves hundreds of MiB waits before it
# starts (after its files from the run before are removed): see --settle-s.
SETTLE = {"s": 0.0}
# MiB each run of those workloads finds at hand: see --at-hand-mib.
AT_HAND = {"mib": 0}
# the workloads that move hundreds of MiB: they wait --settle-s
MEMORY_WORK = ("numpy", "pickle", "h5py", "bands", "fresh", "proxy", "stdio", "miss", "tools")
# By default, about what a run of each moves through memory on both sides
# (its own buffers, the page cache, the library's tiers), in MiB at the
# default sizes: the filling costs time outside the timed run, so no more.
AT_HAND_DEFAULT = {"numpy": 4096, "pickle": 2048, "h5py": 2048, "bands": 3072, "fresh": 1536,
                   "proxy": 2048, "stdio": 2048, "miss": 1024, "tools": 1536}


def at_hand_for(a, w):
    """MiB of memory a run of workload w finds at hand (--at-hand-mib)."""
    if w not in MEMORY_WORK or a.at_hand_mib == 0:
        return 0
    mib = a.at_hand_mib if a.at_hand_mib > 0 else AT_HAND_DEFAULT[w] // (4 if a.quick else 1)
    return min(mib, a.mem_available_mib // 2)


def run(cmd, env=None):
    """Runs cmd; returns (wall seconds, peak RSS in KiB, stdout). Both are
    measured by tests/bench/peak_rss, which starts cmd from a process of
    its own: a process forked from this one (tens of MiB) counts this one's
    resident memory as its own peak, whatever it uses itself."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("CKPTCACHE_") and k != "LD_PRELOAD"}
    full.update(env or {})
    if "LD_PRELOAD" in full:
        full["PEAK_RSS_PRELOAD"] = full.pop("LD_PRELOAD")
    if AT_HAND["mib"] > 0:
        full["PEAK_RSS_AT_HAND_MIB"] = str(AT_HAND["mib"])
    subprocess.run(["sync"], check=False)
    if SETTLE["s"] > 0:
        time.sleep(SETTLE["s"])
    with tempfile.TemporaryFile() as cap, tempfile.TemporaryFile() as errf, \
            tempfile.NamedTemporaryFile(mode="r") as peak:
        t0 = time.perf_counter()
        p = subprocess.Popen([PEAK_RSS, peak.name, *cmd], env=full, stdout=cap, stderr=errf)
        try:
            p.wait()
        except BaseException:
            p.kill()
            raise
        wall = time.perf_counter() - t0
        errf.seek(0)
        err = errf.read().decode(errors="replace")
        cap.seek(0)
        text = cap.read().decode(errors="replace")
        got = peak.read().split()
        rss = int(got[0]) if got and got[0].isdigit() else 0
        if len(got) > 1:
            wall = float(got[1])  # the program's own time, without peak_rss's filling
    if p.returncode != 0:
        raise RunError(f"{' '.join(cmd)}: exit status {p.returncode}\n{text[-2000:]}{err[-2000:]}")
    if "ckptcache: error" in err or "ckptcache: warning" in err:
        raise RunError(f"{' '.join(cmd)}: the library complained:\n{err[-2000:]}")
    return wall, rss, text


def keyvals(text):
    return {k: float(v) for k, v in re.findall(r"\b([A-Za-z_]+)=([0-9.]+)\b", text)}


def clean(d):
    for name in os.listdir(d):
        p = os.path.join(d, name)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = tempfile.mkdtemp(prefix="ckc-parity.", dir=a.dir)
        self.ck = os.path.join(self.work, "ck")       # tagged files live here
        self.out = os.path.join(self.work, "out")     # untagged copies
        self.ssd = os.path.join(self.work, "ssd")
        self.stats = os.path.join(self.work, "stats")  # the library's statistics of a run
        for d in (self.ck, self.out, self.ssd, self.stats):
            os.makedirs(d)
        self.rows = []    # (row, metric, higher_is_better, target)
        self.samples = {} # (row, metric) -> {"without": [...], "with": [...], "ratio": [...]}
        self.rss = {}     # row -> {"without": [...], "with": [...]}
        self.cached = {}  # row -> [KiB the library's memory tiers held at most, per run with it]
        self.steal = {}   # row -> {"without": [...], "with": [...]}: ms the host took from the CPUs, per run
        self.unpaired = set()  # rows measured in one process, with no order
        self.raw = []     # csv rows
        self.warming = False  # an untimed run: measured, not recorded
        self.fixed = []   # KiB the library adds to /bin/true's peak, per pair
        self.fixed_started = []  # KiB it adds to cp's peak once its cache started, per pair
        self.extended = {}  # (row, metric) -> median ratio of its first pairs, for rows given more pairs
        self.small_runs = 0  # the runs of the small files' row so far (each writes a directory of its own)

    def undecided(self, rows):
        """The (row, metric) of rows whose median ratio is below the target
        while one pair at least reached it: the pairs so far do not settle
        whether the library is slower, or the machine was."""
        out = []
        for (row, m, _higher, target) in rows:
            r = self.samples[(row, m)]["ratio"]
            if row not in self.unpaired and r and med(r) < target <= max(r):
                out.append((row, m))
        return out

    def fixed_cost(self):
        """The library's own resident memory: what it adds to the peak of
        a program that does nothing with it (/bin/true), and of one that
        runs its paths and starts its cache with almost nothing to hold
        (cp of two 1-byte files into tagged paths: the second starts the
        cache). The latter, its code (its text mapped whole: the kernel
        maps code around each page a program runs), its threads' stacks
        and its share of the node's table, is each row's allowance: beside
        a tool whose whole peak is 2 MiB (tar, du, a C stdio program), 10%
        is less than any library's code takes."""
        srcs = []
        for name in ("one-a.bin", "one-b.bin"):
            srcs.append(os.path.join(self.work, name))
            with open(srcs[-1], "wb") as f:
                f.write(b"x")
        for k in range(self.a.pairs):
            got, started = {}, {}
            for side in (("without", "with") if k % 2 == 0 else ("with", "without")):
                _, got[side], _ = run(["true"], self.env(side, os.path.join(self.ck, "*.bin")))
                clean(self.ck)
                _, started[side], _ = run(["cp"] + srcs + [self.ck], self.env(side, os.path.join(self.ck, "*.bin")))
            self.take_cached()
            self.fixed.append(max(0, got["with"] - got["without"]))
            self.fixed_started.append(max(0, started["with"] - started["without"]))
        clean(self.ck)

    def env(self, side, paths, **extra):
        """The environment of one side: the library and its settings, or,
        without it, the same variables (inert without the library) and an
        LD_PRELOAD of the same length naming the C library, which every
        program loads anyway. A program's heap layout follows the size of
        its environment: one more variable moved Python's 16 MiB arrays
        between fresh and reused memory and swung a load 2x either way,
        with no library at all."""
        env = {"LD_PRELOAD": LIB if side == "with" else SAME_SIZE_PRELOAD, "CKPTCACHE_PATHS": paths,
               "CKPTCACHE_STATS": os.path.join(self.stats, "%p.json")}
        env.update(extra)
        env.update(self.a.env)
        return env

    def add_row(self, row, metrics, target=0.95):
        if row in self.rss:
            return
        for m, higher in metrics:
            self.rows.append((row, m, higher, target))
            self.samples[(row, m)] = {"without": [], "with": [], "ratio": []}
        self.rss[row] = {"without": [], "with": []}
        self.cached[row] = []

    def take_cached(self):
        """The most checkpoint bytes (KiB) one process of the last run with
        the library held in its memory tiers (host, gpu) at once, from its
        statistics; the files are removed."""
        most = 0
        for name in os.listdir(self.stats):
            path = os.path.join(self.stats, name)
            try:
                with open(path) as f:
                    doc = json.load(f)
                most = max(most, sum(t.get("peak_used_bytes", 0) for t in doc.get("tiers", [])
                                     if t.get("name") in ("host", "gpu")))
            except (OSError, ValueError):
                pass
            os.unlink(path)
        return most // 1024

    def record(self, row, pair, side, values, rss):
        self.rss[row][side].append(rss)
        if side == "with":
            self.cached[row].append(self.take_cached())
        for (r, m, higher, _t) in self.rows:
            if r != row:
                continue
            if m not in values:
                raise RunError(f"{row}: no {m} in the run's output")
            self.samples[(r, m)][side].append(values[m])
            self.raw.append([row, m, pair, side, f"{values[m]:.6f}", rss])

    def pair(self, row, k, measure):
        """One pair: measure(side) -> (values, rss); the order alternates.
        While warming, one run without the library, not recorded."""
        if self.warming:
            measure("without")
            return
        sides = ("without", "with") if k % 2 == 0 else ("with", "without")
        got = {}
        steal = self.steal.setdefault(row, {"without": [], "with": []})
        for side in sides:
            s0 = steal_ms()
            got[side] = measure(side)
            steal[side].append(steal_ms() - s0)
        for side in ("without", "with"):
            self.record(row, k, side, *got[side])
        for (r, m, higher, _t) in self.rows:
            if r == row:
                w, wo = got["with"][0][m], got["without"][0][m]
                ratio = (w / wo if higher else wo / w) if w > 0 and wo > 0 else 0.0
                self.samples[(r, m)]["ratio"].append(ratio)

    # ---- the workloads ----------------------------------------------------

    def numpy(self, k):
        row = f"numpy save/load ({self.a.np_count} x {self.a.np_mib} MiB)"
        if k == 0:
            self.add_row(row, [("save_s", False), ("load_s", False), ("job_s", False)])

        def m(side):
            clean(self.ck)
            env = self.env(side, os.path.join(self.ck, "*.npy"), **PY_MALLOC)
            wall, rss, text = run([PY, PYWORK, "numpy", self.ck, str(self.a.np_count), str(self.a.np_mib)], env)
            v = keyvals(text)
            v["job_s"] = wall
            return v, rss
        self.pair(row, k, m)

    def pickle(self, k):
        row = f"pickle of a dict ({self.a.pickle_entries} entries)"
        if k == 0:
            self.add_row(row, [("save_s", False), ("load_s", False), ("job_s", False)])

        def m(side):
            clean(self.ck)
            env = self.env(side, os.path.join(self.ck, "*.pkl"), **PY_MALLOC)
            wall, rss, text = run([PY, PYWORK, "pickle", self.ck, str(self.a.pickle_entries)], env)
            v = keyvals(text)
            v["job_s"] = wall
            return v, rss
        self.pair(row, k, m)

    def h5py(self, k):
        """h5py as a user runs it (HDF5 locks its files: the locks are taken
        on the real files, and the files are cached)."""
        row = f"h5py write/read ({self.a.h5_count} x {self.a.h5_mib} MiB)"
        if k == 0:
            self.add_row(row, [("save_s", False), ("load_s", False), ("job_s", False)])

        def m(side):
            clean(self.ck)
            env = self.env(side, os.path.join(self.ck, "*.h5"), **PY_MALLOC)
            wall, rss, text = run([PY, PYWORK, "h5py", self.ck, str(self.a.h5_count), str(self.a.h5_mib)], env)
            v = keyvals(text)
            v["job_s"] = wall
            return v, rss
        self.pair(row, k, m)

    def bands(self, k):
        """A stencil code's checkpoint: bands of one grid written right after
        each other (no computation between), with the default host tier."""
        a = self.a
        row = f"back-to-back bands ({a.band_count} x {a.band_mib} MiB, write/read)"
        if k == 0:
            self.add_row(row, [("checkpoint_GBps", True), ("restore_GBps", True)])

        self.c_files(row, k, BANDS, "band_*.bin", a.band_count, a.band_mib)

    def c_files(self, row, k, prog, pattern, count, mib):
        """One pair of a C benchmark that takes a folder, a count and MiB,
        the files it makes there tagged by pattern."""
        def m(side):
            clean(self.ck)
            env = self.env(side, os.path.join(self.ck, pattern))
            _, rss, text = run([prog, self.ck, str(count), str(mib)], env)
            return keyvals(text), rss
        self.pair(row, k, m)

    def fresh(self, k):
        """A restore into memory the program has just mapped (a framework's
        new tensor storages), from the cache with the library."""
        a = self.a
        row = f"restore into new memory ({a.fresh_count} x {a.fresh_mib} MiB, read)"
        if k == 0:
            self.add_row(row, [("restore_GBps", True)])

        self.c_files(row, k, FRESH, "fresh_*.bin", a.fresh_count, a.fresh_mib)

    def random(self, k):
        """A restore that gathers pieces: 4 KiB preads at random places of
        checkpoints the process wrote, served by the cache (the library's
        step-aside model off, so that the cache takes them)."""
        a = self.a
        row = f"random 4 KiB preads ({a.random_count} x {a.random_mib} MiB, same process)"
        if k == 0:
            self.add_row(row, [("random_read_s", False)])

        def m(side):
            clean(self.ck)
            env = self.env(side, os.path.join(self.ck, "random_*.bin"), CKPTCACHE_STEP_ASIDE="off")
            _, rss, text = run([RANDOM, self.ck, str(a.random_count), str(a.random_mib)], env)
            return keyvals(text), rss
        self.pair(row, k, m)

    def small(self, k):
        """Many small files written in a loop and read back (a script's
        logs, JSON metadata and pickles beside its checkpoints); the job's
        time includes the end of the process, which waits for what the
        library has not yet published."""
        self.small_files(k, "Python", lambda d: [PY, PYWORK, "small", d, str(self.a.small_count)])

    def small_c(self, k):
        """The same from a compiled program given its run's folder as its
        first argument (./sim /scratch/run42): each run names another."""
        self.small_files(k, "C, its folder as argument", lambda d: [SMALL_C, d, str(self.a.small_count)])

    def small_files(self, k, what, cmd):
        row = f"small files ({self.a.small_count} x 1 B-4 KiB, {what})"
        if k == 0:
            self.add_row(row, [("save_s", False), ("load_s", False), ("job_s", False)])

        # Each run writes into a directory of its own, and the files stay
        # until the row is done: ext4 does not hand out an inode freed in
        # the last few seconds again, and skipping the 3,000 a removal
        # just freed made each create 10x slower (openat 123 us against
        # 21 us, in ext4's recently_deleted()), a cost that grew and
        # shrank from run to run on both sides.
        if k == 0 and self.warming:
            clean(self.ck)

        def m(side):
            # a sample is small_reps runs, each into a folder of its own
            got, peak = {"save_s": 0.0, "load_s": 0.0, "job_s": 0.0}, 0
            for _ in range(self.a.small_reps):
                self.small_runs += 1
                d = os.path.join(self.ck, f"run{self.small_runs:03d}")
                os.makedirs(d)
                # one pattern for every run, as a job script sets it
                env = self.env(side, os.path.join(self.ck, "*", "*.dat"))
                wall, rss, text = run(cmd(d), env)
                v = keyvals(text)
                got["save_s"] += v["save_s"]
                got["load_s"] += v["load_s"]
                got["job_s"] += wall
                peak = max(peak, rss)
            return got, peak
        self.pair(row, k, m)

    def replace(self, k):
        """Python's atomic save: each checkpoint written to a temporary
        name and os.replace()d onto the last version of its name; the job's
        time includes the end of the process."""
        row = f"atomic replace ({self.a.replace_count} x 1 MiB over 20 names, Python)"
        if k == 0:
            self.add_row(row, [("save_s", False), ("job_s", False)])

        def m(side):
            clean(self.ck)
            env = self.env(side, os.path.join(self.ck, "ck_*"))
            wall, rss, text = run([PY, PYWORK, "replace", self.ck, str(self.a.replace_count), "20", "1024"], env)
            v = keyvals(text)
            v["job_s"] = wall
            return v, rss
        self.pair(row, k, m)

    def tagged_walkers(self, k):
        """du, tar and find over a tree of checkpoints the patterns tag
        (made once, without the library): a user's look at what a job left."""
        tree = os.path.join(self.work, "tagged")
        if not os.path.isdir(tree):
            for d in range(self.a.tagged_dirs):
                sub = os.path.join(tree, f"step_{d:03d}")
                os.makedirs(sub)
                for f in range(self.a.tagged_files):
                    with open(os.path.join(sub, f"rank_{f:04d}.bin"), "wb") as fh:
                        fh.write(b"x" * (64 + f))
        self.walk_rows(k, os.path.join(tree, "**"), (
            # into a file: GNU tar reads no file when its archive is /dev/null
            (f"tar of a tagged tree into an archive ({self.a.tagged_dirs} x {self.a.tagged_files} files)",
             ["tar", "cf", os.path.join(self.work, "tagged.tar"), tree]),
            (f"du over a tagged tree ({self.a.tagged_dirs} x {self.a.tagged_files} files)", ["du", "-s", tree]),
            (f"find over a tagged tree ({self.a.tagged_dirs} x {self.a.tagged_files} files)",
             ["find", tree, "-name", "*.bin"])))
        self.walk_beside_job(k, tree)

    def walk_beside_job(self, k, tree):
        """du over the tagged tree while a job under the library writes
        checkpoints beside it (each version held by the job until it is
        published), on both sides: a user's look at the folder while the
        job runs."""
        row = f"du over a tagged tree while a job writes checkpoints ({self.a.tagged_dirs} x {self.a.tagged_files} files)"
        if k == 0:
            self.add_row(row, [("time_s", False)])
        job = os.path.join(self.ck, "job")
        os.makedirs(job, exist_ok=True)
        paths = os.path.join(tree, "**") + ":" + os.path.join(job, "*")
        stop = os.path.join(self.work, "job.stop")

        def m(side):
            if os.path.exists(stop):
                os.unlink(stop)
            env = {k: v for k, v in os.environ.items() if not k.startswith("CKPTCACHE_")}
            env.update(self.env("with", paths))
            env.pop("CKPTCACHE_STATS")
            w = subprocess.Popen([PY, PYWORK, "job", job, "4", stop], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT)
            try:
                time.sleep(0.3)
                total, rss = 0.0, 0
                for _ in range(self.a.walk_reps):
                    wall, r, _ = run(["du", "-s", tree], self.env(side, paths))
                    total += wall
                    rss = max(rss, r)
            finally:
                open(stop, "w").close()
                out = w.communicate(timeout=120)[0].decode(errors="replace")
            if w.returncode != 0:
                raise SystemExit(f"parity: the job beside the walker failed: {out}")
            return {"time_s": total}, rss
        self.pair(row, k, m)

    def walk_rows(self, k, paths, rows):
        """Rows of short walks: each sample is walk_reps runs of the command."""
        for row, cmd in rows:
            if k == 0:
                self.add_row(row, [("time_s", False)])

            def m(side, cmd=cmd):
                env = self.env(side, paths)
                total, rss = 0.0, 0
                for _ in range(self.a.walk_reps):
                    wall, r, _ = run(cmd, env)
                    total += wall
                    rss = max(rss, r)
                return {"time_s": total}, rss
            self.pair(row, k, m)

    def walkers(self, k):
        tree = self.a.tree
        # a subtree and a file-name pattern, neither matching the tree
        paths = f"{self.ck}/ckpt_*.bin:{self.ck}/sub/**"
        self.walk_rows(k, paths, ((f"tar over {tree} (untagged)", ["tar", "cf", "/dev/null", tree]),
                                  (f"du over {tree} (untagged)", ["du", "-s", tree]),
                                  (f"find over {tree} (untagged)", ["find", tree])))

    def proxy_args(self, extra=(), d=None):
        a = self.a
        return [PROXY, "--dir", d or self.ck, "--count", str(a.count), "--size", a.size, "--interval-ms",
                str(a.interval), "--order", "reverse", "--seed", "42", *extra]

    def proxy_values(self, text):
        v = keyvals(text)
        if f"verified={self.a.count}/{self.a.count}" not in text:
            raise RunError("rtm_proxy did not verify every checkpoint:\n" + text[-1500:])
        return {k: v[k] for k in ("checkpoint_GBps", "restore_GBps") if k in v}

    def proxy(self, k):
        a = self.a
        hints = os.path.join(self.work, "order.txt")
        tiers = [("host", {"CKPTCACHE_HOST_CACHE": a.host_cache, "CKPTCACHE_SSD_CACHE": "0"})]
        if a.ssd_cache != "0":
            tiers.append(("host+ssd", {"CKPTCACHE_HOST_CACHE": a.host_cache, "CKPTCACHE_SSD_DIR": self.ssd,
                                       "CKPTCACHE_SSD_CACHE": a.ssd_cache}))
        levels = [("no hints", {"CKPTCACHE_ORDER": "none"}, []),
                  ("reverse hints", {"CKPTCACHE_ORDER": "reverse"}, []),
                  ("all hints", {"CKPTCACHE_HINTS": hints}, ["--hints", hints])]
        for tname, tenv in tiers:
            for lname, lenv, largs in levels:
                row = f"RTM proxy, {lname}, {tname}"
                if k == 0:
                    self.add_row(row, [("checkpoint_GBps", True), ("restore_GBps", True)])

                def m(side, tenv=tenv, lenv=lenv, largs=largs):
                    clean(self.ck)
                    env = self.env(side, os.path.join(self.ck, "ckpt_*.bin"), **tenv, **lenv)
                    # the baseline writes the same hint file (untimed)
                    _, rss, text = run(self.proxy_args(largs), env)
                    return self.proxy_values(text), rss
                self.pair(row, k, m)

    def stdio(self, k):
        row = "C stdio program (rtm_proxy --io fwrite, no hints)"
        if k == 0:
            self.add_row(row, [("checkpoint_GBps", True), ("restore_GBps", True)])

        def m(side):
            clean(self.ck)
            env = self.env(side, os.path.join(self.ck, "ckpt_*.bin"), CKPTCACHE_HOST_CACHE=self.a.host_cache)
            _, rss, text = run(self.proxy_args(["--io", "fwrite"]), env)
            return self.proxy_values(text), rss
        self.pair(row, k, m)

    def chars(self, k):
        """stdio a character or a record at a time: putc then getc of a
        tagged text file, and 4-byte freads of an untagged file."""
        a = self.a
        row = f"C stdio putc then getc ({a.chars_mb} MB of tagged text)"
        if k == 0:
            self.add_row(row, [("write_s", False), ("read_s", False)])

        def m(side):
            clean(self.ck)
            env = self.env(side, os.path.join(self.ck, "*.txt"))
            _, rss, text = run([CHARS, "text", os.path.join(self.ck, "t.txt"), str(a.chars_mb)], env)
            return keyvals(text), rss
        self.pair(row, k, m)

        src = os.path.join(self.work, "records.bin")
        if not os.path.exists(src):
            with open("/dev/urandom", "rb") as r, open(src, "wb") as w:
                for _ in range(a.records_mib):
                    w.write(r.read(1 << 20))
        row = f"C fread of 4-byte records ({a.records_mib} MiB, untagged)"
        if k == 0:
            self.add_row(row, [("read_s", False)])

        def m2(side):
            env = self.env(side, os.path.join(self.ck, "*.bin"))
            _, rss, text = run([CHARS, "records", src], env)
            return keyvals(text), rss
        self.pair(row, k, m2)

    def records(self, k):
        """A program that writes its checkpoints a record at a time, without
        a buffer of its own: write(2) of each 100-byte record, then writev(2)
        of 64 such records per call; 3 files, each checked afterwards."""
        a = self.a
        for pieces in (1, 64):
            how = "write() of 100-byte records" if pieces == 1 else "writev() of 64 x 100-byte records"
            row = f"C {how} (3 x {a.records_write_mb} MB)"
            if k == 0:
                self.add_row(row, [("write_s", False), ("job_s", False)])

            def m(side, pieces=pieces):
                clean(self.ck)
                env = self.env(side, os.path.join(self.ck, "w_*.bin"))
                wall, rss, text = run([CHARS, "writes", self.ck, "3", str(a.records_write_mb), "100", str(pieces)],
                                      env)
                v = keyvals(text)
                v["job_s"] = wall
                return v, rss
            self.pair(row, k, m)

    def miss(self, k):
        row = "unhinted miss (restore of files the cache does not hold)"
        d = os.path.join(self.work, "miss")
        if k == 0:
            self.add_row(row, [("restore_GBps", True)])
        if not os.path.isdir(d):
            os.makedirs(d)
            # written once without the library: the page cache holds them
            run(self.proxy_args(["--keep", "--interval-ms", "0"], d))

        def m(side):
            env = self.env(side, os.path.join(d, "ckpt_*.bin"), CKPTCACHE_ORDER="none",
                           CKPTCACHE_HOST_CACHE=self.a.host_cache)
            _, rss, text = run(self.proxy_args(["--read-only", "--keep"], d), env)
            return {"restore_GBps": self.proxy_values(text)["restore_GBps"]}, rss
        self.pair(row, k, m)

    def tools(self, k):
        src = os.path.join(self.work, "src.bin")
        tagged = os.path.join(self.ck, "t.bin")
        if not os.path.exists(src):
            with open("/dev/urandom", "rb") as r, open(src, "wb") as w:
                for _ in range(self.a.tool_mib):
                    w.write(r.read(1 << 20))
        paths = os.path.join(self.ck, "*.bin")
        copy = os.path.join(self.out, "t.bin")
        # name, command, whether it reads the tagged file, the file it makes
        cases = [("cp into a tagged path", ["cp", src, tagged], False, tagged),
                 ("cp of a tagged file", ["cp", tagged, copy], True, copy),
                 ("cat of a tagged file", ["sh", "-c", f'exec cat "{tagged}" >/dev/null'], True, None),
                 ("dd of a tagged file (bs=1M)", ["dd", f"if={tagged}", "of=/dev/null", "bs=1M", "status=none"],
                  True, None)]
        for name, cmd, reads, made in cases:
            row = f"{name} ({self.a.tool_mib} MiB)"
            if k == 0:
                self.add_row(row, [("time_s", False)])

            def m(side, name=name, cmd=cmd, reads=reads, made=made):
                if reads:
                    if not os.path.exists(tagged):
                        shutil.copyfile(src, tagged)
                else:
                    clean(self.ck)
                env = self.env(side, paths)
                total, rss = 0.0, 0
                for _ in range(self.a.tool_reps):
                    if not reads:
                        clean(self.ck)
                    clean(self.out)
                    wall, r, _ = run(cmd, env)
                    if made and not filecmp_same(src, made):
                        raise RunError(f"{name}: the copy differs from its source")
                    total += wall
                    rss = max(rss, r)
                return {"time_s": total}, rss
            self.pair(row, k, m)

    def fread(self, k):
        row = "tagged fread vs memcpy (same process)"
        if k == 0:
            self.add_row(row, [("GBps", True)], target=0.8)
            self.unpaired.add(row)
        if self.warming:
            return
        env = self.env("with", os.path.join(self.ck, "*.bin"), CKPTCACHE_PERSIST="never")
        clean(self.ck)
        _, rss, text = run([FREAD, os.path.join(self.ck, "f.bin"), str(self.a.fread_mib), "3"], env)
        v = keyvals(text)
        self.samples[(row, "GBps")]["without"].append(v["memcpy_GBps"])
        self.samples[(row, "GBps")]["with"].append(v["fread_GBps"])
        self.samples[(row, "GBps")]["ratio"].append(v["fread_GBps"] / v["memcpy_GBps"])
        self.rss[row]["with"].append(rss)
        self.cached[row].append(self.take_cached())
        self.raw.append([row, "memcpy_GBps", k, "without", f"{v['memcpy_GBps']:.6f}", rss])
        self.raw.append([row, "fread_GBps", k, "with", f"{v['fread_GBps']:.6f}", rss])


def filecmp_same(a, b):
    import filecmp
    return os.path.exists(b) and filecmp.cmp(a, b, shallow=False)


def med(v):
    return statistics.median(v) if v else float("nan")


# The most a run with the library may peak at: this times (the peak without
# it + the checkpoint bytes its memory tiers held at most).
MEM_SLACK = 1.10


def fmt(x, metric):
    if x != x:
        return "-"
    return f"{x:.3f}" if metric.endswith("_s") else f"{x:.2f}"


def mib(kib_list):
    return f"{med(kib_list) / 1024:.0f}" if kib_list else "-"


def steal_ms():
    """The CPU time the hypervisor took from this machine's CPUs so far
    (the steal column of /proc/stat, all CPUs), in ms; 0 where not told."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) * 1000 // os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" and len(fields) > 8 else 0
    except (OSError, ValueError):
        return 0


def by_order(ratios):
    """The median ratio of the pairs run without the library first (even
    pairs) and of those run with it first (odd pairs)."""
    first_without, first_with = ratios[0::2], ratios[1::2]
    if not first_without or not first_with:
        return "-"
    return f"{med(first_without):.2f} / {med(first_with):.2f}"


def steal_cell(b, row, side):
    """The median ms of steal per run of the row on one side, and how many
    of its runs had any."""
    v = b.steal.get(row, {}).get(side, [])
    return f"{med(v):.0f} ({sum(1 for x in v if x > 0)}/{len(v)})" if v else "-"


def table(b, cmdline, started, load):
    lines = ["| workload | measure | pairs | without | with | ratio (median) | ratio min..max | by order | target | "
             "peak RSS MiB without | with | cached MiB | steal ms without | with |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    fails = []
    # memory: the peak with the library within MEM_SLACK of the peak without
    # it plus what the library held in memory, pair by pair (a run's peak
    # against its own pair's: the library may cache 0 bytes in one run and
    # hundreds of MiB in the next, so medians taken apart compare one run's
    # peak with another's cache); the median over the pairs
    mem_fails = set()
    for row in b.rss:
        wo, w, c = b.rss[row]["without"], b.rss[row]["with"], b.cached[row]
        if wo and w and c and len(wo) == len(w) == len(c):
            fixed = med(b.fixed_started) if b.fixed_started else 0
            over = [x / (y + z + fixed) for x, y, z in zip(w, wo, c) if y + z + fixed > 0]
            if over and med(over) > MEM_SLACK:
                mem_fails.add(row)
                fails.append(f"FAIL {row}: peak RSS with the library {med(over):.3f} x (the peak without it + "
                             f"what it cached + the library's own), median of the pairs ({', '.join(f'{x:.2f}' for x in over)}) > "
                             f"{MEM_SLACK}; medians {med(w) / 1024:.0f} MiB with, {med(wo) / 1024:.0f} MiB "
                             f"without, {med(c) / 1024:.0f} MiB cached")
    for (row, m, higher, target) in b.rows:
        s = b.samples[(row, m)]
        r = med(s["ratio"])
        verdict = "" if r >= target else " **FAIL**"
        if r < target:
            fails.append(f"FAIL {row}: {m} ratio {r:.2f} < {target} (pairs: "
                         + ", ".join(f"{x:.2f}" for x in s["ratio"]) + ")")
        unit = m.replace("_s", " (s)").replace("_GBps", " (GB/s)").replace("GBps", "GB/s")
        n = f"{len(s['ratio'])}" + (f" ({b.extended[(row, m)]:.2f} after {b.a.pairs})" if (row, m) in b.extended else "")
        lines.append(f"| {row} | {unit} | {n} | {fmt(med(s['without']), m)} | {fmt(med(s['with']), m)} | "
                     f"{r:.2f}{verdict} | {min(s['ratio']):.2f}..{max(s['ratio']):.2f} | {'-' if row in b.unpaired else by_order(s['ratio'])} | {target} | "
                     f"{mib(b.rss[row]['without'])} | {mib(b.rss[row]['with'])}"
                     f"{' **FAIL**' if row in mem_fails else ''} | "
                     f"{mib(b.cached[row])} | {steal_cell(b, row, 'without')} | {steal_cell(b, row, 'with')} |")
    head = [f"# ckptcache parity: with and without the library", "",
            "Produced by:", "", f"    {cmdline}", "",
            f"- commit {b.commit}",
            f"- host: {os.uname().nodename}, {os.cpu_count()} CPUs, kernel {os.uname().release}",
            f"- started {started}, load average at start {load}",
            *( [f"- library settings for every row: {' '.join(f'{k}={v}' for k, v in b.a.env.items())}"] if b.a.env else [] ),
            f"- {b.a.pairs} pairs per row (the order alternating), median and spread of the per-pair ratios; "
            f"a workload one of whose rows was undecided after them (its median ratio below the target while "
            f"some of its pairs reached it) ran {b.a.more_pairs} more pairs, once, and every pair counts: the "
            f"pairs column gives their number and, for the undecided row, its median after the first "
            f"{b.a.pairs} (on this machine a run's time swings with what the host does with its memory and "
            f"CPUs: the pickle and h5py rows, run alone in 11 pairs, measured 0.97 to 1.36 where runs of 5 "
            f"pairs had them at 0.87 to 0.94); "
            "by order: the median ratio of the pairs that ran without the library first / with it first (a "
            "row whose two differ several times over measures what one run leaves the next on this machine "
            "more than the library)",
            f"- short commands are timed in groups: a sample of the tar, du and find rows is {b.a.walk_reps} "
            f"runs of the command, one of the cp, cat and dd rows {b.a.tool_reps} runs (each run of cp checks "
            f"its copy), one of the small files rows {b.a.small_reps} runs of the program (each into a folder "
            "of its own)",
            "- each workload's pairs run one after another, after one untimed run of it without the library: "
            "this machine hands freed memory back to its host, and the first touch of a page costs 0.5 to 2 GB/s "
            "(26 GB/s touched again), so a run that followed another workload paid for memory that the run after it "
            "found at hand (the first run of a pair was up to 9x slower, whichever side it was)",
            (f"- every run of {', '.join(MEMORY_WORK)} waited {b.a.settle_s:g} s (--settle-s) and then "
             f"started just after {', '.join(f'{at_hand_for(b.a, w)} ({w})' for w in MEMORY_WORK)} MiB of "
             "memory were filled and freed (--at-hand-mib, on both sides, by tests/bench/peak_rss before it "
             "starts the program): this machine hands freed memory back to its host, and a run whose memory "
             "had been handed back paid the host for every page it touched (0.5 to 2 GB/s against 26 GB/s); "
             "the wait lets the host take back what the run before freed before the filling brings memory "
             "back, so that a run does not find its memory handed back while it runs (without the wait, "
             "without the library, dd of 512 MiB into a new file took 0.12 or 0.46 s, and h5py's save 0.16 "
             "or 0.39 s, from one run to the next; with it, 0.11 to 0.14 s and 0.16 to 0.20 s), and the "
             "filling runs outside the timed run and its peak RSS"
             if any(at_hand_for(b.a, w) for w in MEMORY_WORK) else
             f"- runs start without memory put at hand for them (--at-hand-mib 0); every run of "
             f"{', '.join(MEMORY_WORK)} waited {b.a.settle_s:g} s before it started (--settle-s)"),
            "- the small files' row writes each run's files into a directory of its own and removes them "
            "when the row is done: ext4 does not hand out an inode it freed a few seconds before, and "
            "creating files just after 3,000 were removed took 10x as long per file (openat in "
            "recently_deleted()), a cost that grew from run to run on both sides",
            "- the side without the library runs with the same environment: the same CKPTCACHE_ variables "
            "(inert without the library) and an LD_PRELOAD of the same length naming the C library (which "
            "every program loads): a program's heap layout follows its environment's size",
            "- the Python rows (numpy, pickle, h5py) pin glibc's malloc thresholds on both sides "
            f"({' '.join(f'{k}={v}' for k, v in PY_MALLOC.items())}): its dynamic mmap threshold made "
            "which 16 MiB arrays came from fresh pages follow the process's history (one more variable "
            "or a few small allocations: 35,000 or 47,000 page faults in one h5py load), and loads "
            "swung 2x either way with no library loaded at all",
            "- ratio: the library's speed over the speed without it (time without / time with, or "
            "GB/s with / without): 1.00 is parity, below 1 slower",
            "- fread row: fread of a tagged file (served by the cache) against memcpy of the same "
            "bytes in the same process; its target is 0.8",
            "- peak RSS: of the measured process (its largest child for the shell rows), median over the pairs, measured from a small process that starts it (tests/bench/peak_rss): a process started by the benchmark's own Python process counted that one's memory as its own peak",
            "- steal ms: the CPU time the host took from this machine's CPUs during a run (/proc/stat, all "
            "CPUs), median per run, and the runs that had any: on the 2-core build machine two busy loops "
            "of 1.5 s lost 0 to 120 ms this way (the whole machine stops for 10 to 40 ms at a time), one "
            "busy loop nothing; so a copy of the library's in the background (a flush) beside a program that "
            "keeps one CPU busy stops the program too there (h5py's load of 512 MiB cached: a read of 16 MiB "
            "that takes 3-4 ms took 20-45 ms in 9 of 16 runs with the library, 0 of 16 without), where a "
            "node whose cores are the job's own would not",
            "- cached MiB: the most checkpoint bytes one process held in the library's memory tiers at once "
            "(peak_used_bytes of its statistics), median over the pairs; a row fails on memory when the median "
            f"over the pairs of (its peak RSS with the library / (its peak without it + its cached MiB + the "
            f"library's own)) exceeds {MEM_SLACK}",
            f"- the library's own: what it adds to the peak of cp copying two 1-byte files into tagged paths "
            f"(the second starts the cache): its code, mapped whole once a program runs its paths, its "
            f"threads' stacks, its share of the node's table: {med(b.fixed_started) if b.fixed_started else 0:.0f} "
            f"KiB here (median of {len(b.fixed_started)} pairs: {', '.join(str(x) for x in b.fixed_started)} KiB); "
            f"what loading it adds to a program that does nothing with it (/bin/true): "
            f"{med(b.fixed) if b.fixed else 0:.0f} KiB (median of {len(b.fixed)} pairs: "
            f"{', '.join(str(x) for x in b.fixed)} KiB)",
            "- restore rows: on this machine the kernel's first copy into a buffer that only the program's "
            "own code has touched runs at 0.5 to 2.5 GB/s, and at 12-21 GB/s once the kernel has copied from "
            "it (scripts/bench/first_touch, no library involved). Without the library the program's write() "
            "calls pay that in its checkpoints; under it the library's copies run in the program's code, and "
            "the first restore read that the real file serves pays it: one read of 16 MiB took 10-35 ms "
            "instead of about 1 ms (CKPTCACHE_TRACE), 0.6-0.8x of the RTM proxy's 48 restores of 16 MiB in "
            "a pair that had it. The library now has the kernel touch such a buffer in the background after "
            "it copies a checkpoint out of it (CKPTCACHE_KERNEL_TOUCH, on here by its auto test): the "
            "longest read of a run fell to 4-8 ms",
            ""]
    return head + lines, fails


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=5, help="paired runs per row (default 5)")
    p.add_argument("--more-pairs", type=int, default=6,
                   help="pairs added, once, to a workload one of whose rows is undecided after --pairs: "
                        "its median ratio below the target while some of its pairs reached it; every pair "
                        "counts in the row's median (default 6, 0: none)")
    p.add_argument("--quick", action="store_true", help="smaller workloads (about a minute in all)")
    p.add_argument("--only", default="", help="comma-separated workloads: numpy,pickle,h5py,small,small_c,replace,walkers,"
                                              "tagged_walkers,proxy,bands,stdio,chars,records,miss,tools,fread (default: all)")
    p.add_argument("--count", type=int, default=48, help="RTM proxy checkpoints (default 48)")
    p.add_argument("--size", default="16M", help="RTM proxy checkpoint size (default 16M)")
    p.add_argument("--host-cache", default="256M", help="RTM proxy host tier (default 256M)")
    p.add_argument("--ssd-cache", default="512M", help="RTM proxy ssd tier, 0 for none (default 512M)")
    p.add_argument("--interval", type=int, default=10, help="RTM proxy computation between checkpoints, ms")
    p.add_argument("--np-count", type=int, default=100, help="numpy arrays (default 100)")
    p.add_argument("--np-mib", type=int, default=16, help="MiB per numpy array (default 16)")
    p.add_argument("--pickle-entries", type=int, default=2000000, help="entries of the pickled dict")
    p.add_argument("--h5-count", type=int, default=32, help="h5py datasets (default 32)")
    p.add_argument("--h5-mib", type=int, default=16, help="MiB per h5py dataset (default 16)")
    p.add_argument("--band-count", type=int, default=48, help="stencil bands (default 48)")
    p.add_argument("--band-mib", type=int, default=16, help="MiB per stencil band (default 16)")
    p.add_argument("--tree", default="/usr/share", help="the untagged tree tar, du and find walk")
    p.add_argument("--chars-mb", type=int, default=64, help="MB of text put and got a character at a time")
    p.add_argument("--records-mib", type=int, default=128, help="MiB read in 4-byte freads")
    p.add_argument("--records-write-mb", type=int, default=16,
                   help="MB of each of the 3 files written a 100-byte record at a time (default 16)")
    p.add_argument("--small-count", type=int, default=3000, help="small files (default 3000)")
    p.add_argument("--small-reps", type=int, default=3, help="runs of a small files program per sample (default 3)")
    p.add_argument("--replace-count", type=int, default=400,
                   help="checkpoints of the atomic replace row (default 400)")
    p.add_argument("--fresh-count", type=int, default=32, help="files restored into new memory (default 32)")
    p.add_argument("--fresh-mib", type=int, default=16, help="MiB of each (default 16)")
    p.add_argument("--random-count", type=int, default=4, help="files read by random preads (default 4)")
    p.add_argument("--random-mib", type=int, default=64, help="MiB of each (default 64)")
    p.add_argument("--tagged-dirs", type=int, default=40, help="folders of the tagged tree (default 40)")
    p.add_argument("--tagged-files", type=int, default=250, help="files per folder of the tagged tree "
                   "(default 250)")
    # (a walk of the tagged tree takes 15-25 ms, and on the 2-core build
    # machine single runs of one command moved by 20% either way: samples of
    # 3 runs put the tagged rows' medians at 0.91 to 0.99, samples of 10 in
    # the next invocation at 0.99 to 1.22; perf stat of 40 runs of du over
    # the tree: 20.9 +- 0.3 ms with the library, 21.4 +- 1.1 ms without)
    p.add_argument("--walk-reps", type=int, default=10, help="walks per sample (default 10)")
    p.add_argument("--tool-mib", type=int, default=512, help="MiB of the file cp, cat and dd copy")
    p.add_argument("--tool-reps", type=int, default=3, help="runs of cp, cat or dd per sample (default 3)")
    p.add_argument("--fread-mib", type=int, default=256, help="MiB of the fread benchmark's file")
    p.add_argument("--env", action="append", default=[], metavar="CKPTCACHE_NAME=VALUE",
                   help="a library setting for every row (both sides, as the others), e.g. "
                   "CKPTCACHE_KERNEL_TOUCH=off; repeatable")
    p.add_argument("--settle-s", type=float, default=1.0,
                   help="seconds each run of the workloads that move hundreds of MiB (%s) waits "
                        "before it starts (after the files of the run before are removed and before its "
                        "memory is put at hand): a virtual machine that hands freed memory back to its "
                        "host does so meanwhile, not while the run runs (default 1)" % ",".join(MEMORY_WORK))
    p.add_argument("--at-hand-mib", type=int, default=-1,
                   help="MiB of memory filled and freed just before each run of %s starts (on both "
                        "sides), so that it finds that much at hand: on a virtual machine that hands "
                        "freed memory back to its host, whether a run found its memory at hand or paid "
                        "the host for it swung a run 2-10x, on either side (default: about what a run "
                        "of the workload moves through memory, 1 to 4 GiB; at most half of the memory "
                        "available; 0: none)" % ",".join(MEMORY_WORK))
    p.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the files go")
    p.add_argument("--results", default=os.path.join(ROOT, "docs", "results"),
                   help="folder of parity.md and parity.csv (default docs/results)")
    a = p.parse_args()
    if a.quick:
        a.count, a.size, a.host_cache, a.ssd_cache = 24, "8M", "64M", "128M"
        a.np_count, a.np_mib, a.pickle_entries = 32, 8, 500000
        a.h5_count, a.h5_mib, a.band_count, a.band_mib = 16, 8, 24, 8
        a.walk_reps, a.tool_reps, a.tool_mib, a.fread_mib, a.small_reps = 1, 1, 128, 64, 1
        a.small_count, a.tagged_dirs, a.tagged_files, a.replace_count = 1000, 20, 100, 200
        a.fresh_count, a.random_mib = 8, 16
        a.chars_mb, a.records_mib, a.records_write_mb = 16, 32, 8
    if a.pairs < 1:
        p.error("--pairs must be at least 1")
    if a.more_pairs < 0:
        p.error("--more-pairs must be 0 or more")
    a.mem_available_mib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                a.mem_available_mib = int(line.split()[1]) // 1024
    env = {}
    for kv in a.env:
        k, eq, v = kv.partition("=")
        if not eq or not k.startswith("CKPTCACHE_"):
            p.error(f"--env {kv!r}: expected CKPTCACHE_NAME=VALUE")
        env[k] = v
    a.env = env
    work = ["numpy", "pickle", "h5py", "small", "small_c", "replace", "walkers", "tagged_walkers", "proxy", "bands", "fresh", "random",
            "stdio",
            "chars", "records", "miss", "tools", "fread"]
    only = [w for w in a.only.split(",") if w] or work
    for w in only:
        if w not in work:
            p.error(f"--only: unknown workload {w!r} (known: {','.join(work)})")
    for f in (LIB, PROXY, FREAD, BANDS, CHARS, FRESH, RANDOM, PEAK_RSS, SMALL_C):
        if not os.path.exists(f):
            p.error(f"{f} is missing: build first (scripts/bench/parity builds it)")
    cmdline = "scripts/bench/parity " + " ".join(sys.argv[1:])
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    b = Bench(a)
    try:
        b.commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True,
                                  text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        b.commit = "unknown (not a git checkout)"
    print(f"ckptcache parity: {a.pairs} pairs of {','.join(only)}; files in {b.work}", flush=True)
    t0 = time.time()
    try:
        b.fixed_cost()
        # Each workload's pairs run one after another, after one untimed
        # run of it: on a virtual machine that hands freed memory back to
        # its host, the first touch of memory costs 0.5 to 2 GB/s against
        # 26 GB/s for memory touched before, so a run that follows another
        # workload pays for pages that the same workload run just before
        # left at hand; every timed run follows a run of its own workload.
        for w in only:
            SETTLE["s"] = a.settle_s if w in MEMORY_WORK else 0.0
            AT_HAND["mib"] = at_hand_for(a, w)
            first = len(b.rows)  # the rows are added by the untimed run
            b.warming = True
            getattr(b, w)(0)
            b.warming = False
            for k in range(a.pairs):
                getattr(b, w)(k)
            undecided = b.undecided(b.rows[first:])
            if undecided and a.more_pairs:
                for row, m in undecided:
                    b.extended[(row, m)] = med(b.samples[(row, m)]["ratio"])
                for k in range(a.pairs, a.pairs + a.more_pairs):
                    getattr(b, w)(k)
            print(f"  {w}: {a.pairs + (a.more_pairs if undecided else 0)} pairs done "
                  f"({time.time() - t0:.0f} s)", flush=True)
    except RunError as e:
        print(f"FAIL a run failed: {e}", file=sys.stderr)
        return 3
    finally:
        shutil.rmtree(b.work, ignore_errors=True)
    lines, fails = table(b, cmdline, started, load)
    lines += ["", f"Load average at the end: {' '.join(open('/proc/loadavg').read().split()[:3])}; "
                  f"{time.time() - t0:.0f} s in all."]
    os.makedirs(a.results, exist_ok=True)
    with open(os.path.join(a.results, "parity.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
        for x in fails:
            f.write(f"\n{x}\n")
    with open(os.path.join(a.results, "parity.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["row", "measure", "pair", "side", "value", "peak_rss_kib"])
        w.writerows(b.raw)
    print("\n".join(lines))
    print(f"(written to {a.results}/parity.md and parity.csv)")
    for x in fails:
        print(x)
    print(f"{len(b.rows) - len(fails)} of {len(b.rows)} measures at or above their target")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
