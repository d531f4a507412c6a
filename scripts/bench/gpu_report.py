#!/usr/bin/env python3
"""gpu_report.py: the report of scripts/bench/gpu.

Owns: reading OUT/gpu-bench.csv, OUT/gpu-limits.csv, OUT/gpu-bench.meta,
OUT/gpu-bench.plan and the runs' statistics (OUT/runs/*.stats.json), and
writing OUT/gpu-bench.md (the limits, one row per run with its ratios against
the nolib and uvm baselines of the same invocation and its throughput as a
fraction of the measured device-to-device copy, the verdict on each target,
the command line) and OUT/gpu-bench.png (checkpoint and restore GB/s per run
as grouped horizontal bars: with matplotlib when it can be imported, else
with a PNG writer and a 5x7 bitmap font of its own, standard library only).

usage: gpu_report.py [--linear] [--fallback] [--no-plot] OUT
"""

import argparse
import csv
import json
import math
import os
import struct
import sys
import zlib

# The targets: device capture checkpoints at >= 50% of the D2D copy while
# the GPU arena has room; the restore with all hints at 30 ms at >= 50% of
# it; checkpoint + restore >= 20x the program alone and >= 3x UVM on the
# irregular (random) order with all hints.
TARGET_A_D2D = 0.5
TARGET_B_D2D = 0.5
TARGET_C_NOLIB = 20.0
TARGET_C_UVM = 3.0


def num(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_kv(path):
    d = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep:
                    d[k] = v
    return d


def read_limits(path):
    return {r["name"]: num(r["GBps"]) for r in read_csv(path) if num(r.get("GBps")) is not None}


# ---- per run ----------------------------------------------------------------


def seconds(r):
    """(checkpoint s, restore s, bytes) of a run, or None."""
    b = num(r.get("bytes"))
    if b is None:
        n, s = num(r.get("count")), num(r.get("size"))
        b = n * s if n is not None and s is not None else None
    ck, rs = num(r.get("ckpt_s")), num(r.get("restore_s"))
    # from the throughputs when the program printed no seconds
    if ck is None and b and num(r.get("ckpt_GBps")):
        ck = b / (num(r["ckpt_GBps"]) * 1e9)
    if rs is None and b and num(r.get("restore_GBps")):
        rs = b / (num(r["restore_GBps"]) * 1e9)
    if ck is None or rs is None or not b or ck + rs <= 0:
        return None
    return ck, rs, b


def ok(r):
    return r.get("status") == "ok"


def same_case(a, b):
    return (a["order"] == b["order"] and a["interval_ms"] == b["interval_ms"] and a["sizes"] == b["sizes"]
            and not a["id"].endswith("_fit") and not b["id"].endswith("_fit"))


def baseline(rows, r, config):
    """The run of `config` with the same order, interval and sizes as r; for
    uvm the one whose hint level matches r's (all for all and single)."""
    cands = [b for b in rows if b["config"] == config and ok(b) and same_case(b, r)]
    if config == "uvm" and cands:
        want = "none" if r["hints"] == "none" else "all"
        pref = [b for b in cands if b["hints"] == want]
        cands = pref or cands
    return cands[0] if cands else None


def ratio(rows, r, config):
    """Checkpoint + restore time per byte of the baseline / that of r (> 1:
    r is faster), and the baseline's id."""
    if not ok(r):
        return None, None
    b = baseline(rows, r, config)
    if b is None:
        return None, None
    sr, sb = seconds(r), seconds(b)
    if not sr or not sb:
        return None, b["id"]
    return ((sb[0] + sb[1]) / sb[2]) / ((sr[0] + sr[1]) / sr[2]), b["id"]


def served(out, r):
    """Where the reads were served from, from the run's statistics."""
    p = r.get("stats") or ""
    if not p:
        return ""
    try:
        with open(os.path.join(out, p)) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return "stats unreadable"
    parts = []
    for t in d.get("tiers", []):
        if t.get("hits") or t.get("read_ops"):
            parts.append("%s %d" % (t.get("name", "?"), t.get("hits", 0)))
    w = d.get("reads_waited_for_prefetch")
    s = ", ".join(parts) or "none"
    if w:
        s += "; %d waited" % w
    return s


def f2(v, fmt="%.2f"):
    return fmt % v if v is not None else "-"


def fmt_size(b):
    b = num(b)
    if b is None:
        return "-"
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= m:
            v = b / m
            return ("%d%s" % (v, unit)) if v == int(v) else ("%.1f%s" % (v, unit))
    return "%dB" % b


# ---- the markdown -------------------------------------------------------------


def targets(rows, limits):
    """(label, verdict, text) per target; verdict PASS, FAIL or n/a."""
    d2d = limits.get("d2d")
    res = []

    fit = [r for r in rows if r["id"].endswith("_fit") and r["config"].startswith("device") and ok(r)]
    label = "(a) device capture checkpoint >= %d%% of D2D while the GPU arena has room" % (TARGET_A_D2D * 100)
    if not fit:
        res.append((label, "n/a", "no completed run of a history that fits in the GPU cache (id *_fit)"))
    elif not d2d:
        res.append((label, "n/a", "no D2D limit measured (gpu_limits)"))
    else:
        r = fit[0]
        v = num(r["ckpt_GBps"]) or 0.0
        res.append((label, "PASS" if v >= TARGET_A_D2D * d2d else "FAIL",
                    "%.1f GB/s = %.0f%% of D2D %.1f GB/s (%s: %s x %s)" % (v, 100 * v / d2d, d2d, r["id"],
                                                                         r["count"], fmt_size(r["size"]))))

    key = [r for r in rows if r["config"] == "device-score" and r["order"] == "random" and r["hints"] == "all"
           and r["interval_ms"] == "30" and r["sizes"] == "fixed" and not r["id"].endswith("_fit")
           and not r["id"].endswith("_delayed")]
    label = "(b) restore with all hints at 30 ms >= %d%% of D2D" % (TARGET_B_D2D * 100)
    if not key or not ok(key[0]):
        why = "the run device-score_random_all_30ms " + ("ended: " + key[0]["status"] if key else "did not run")
        res.append((label, "n/a", why))
    elif not d2d:
        res.append((label, "n/a", "no D2D limit measured (gpu_limits)"))
    else:
        r = key[0]
        v = num(r["restore_GBps"]) or 0.0
        res.append((label, "PASS" if v >= TARGET_B_D2D * d2d else "FAIL",
                    "%.1f GB/s = %.0f%% of D2D %.1f GB/s (%s)" % (v, 100 * v / d2d, d2d, r["id"])))

    label = "(c) checkpoint + restore >= %gx nolib and >= %gx uvm, irregular order, all hints" % (
        TARGET_C_NOLIB, TARGET_C_UVM)
    if not key or not ok(key[0]):
        res.append((label, "n/a", "the run device-score_random_all_30ms did not complete"))
    else:
        r = key[0]
        rn, bn = ratio(rows, r, "nolib")
        ru, bu = ratio(rows, r, "uvm")
        if rn is None or ru is None:
            missing = [c for c, v in (("nolib", rn), ("uvm", ru)) if v is None]
            res.append((label, "n/a", "no completed %s baseline at random order, 30 ms, fixed sizes (%s)" % (
                " and ".join(missing), r["id"])))
        else:
            good = rn >= TARGET_C_NOLIB and ru >= TARGET_C_UVM
            res.append((label, "PASS" if good else "FAIL",
                        "%.1fx %s, %.2fx %s (%s)" % (rn, bn, ru, bu, r["id"])))
    return res


def write_md(out, rows, limits, meta, plan, png_note):
    d2d = limits.get("d2d")
    L = []
    L.append("# ckptcache GPU benchmark")
    L.append("")
    if meta.get("command"):
        L.append("Produced by:")
        L.append("")
        L.append("    " + meta["command"])
        L.append("")
    info = [("host", meta.get("host")), ("date", meta.get("date")), ("GPU (name, driver, memory)", meta.get("gpu")),
            ("matrix", meta.get("matrix")),
            ("checkpoints", "%s x %s per run (history %s); the *_fit run: %s" % (
                meta.get("count", "?"), fmt_size(meta.get("size")), fmt_size(meta.get("history")),
                meta.get("fit_count", "?"))),
            ("trace", meta.get("trace") or meta.get("trace_note")),
            ("cache", "CKPTCACHE_GPU_CACHE=%s (device runs), CKPTCACHE_HOST_CACHE=%s, ssd %s, CKPTCACHE_PERSIST=%s" % (
                meta.get("gpu_cache", "?"), meta.get("host_cache", "?"), meta.get("ssd", "?"),
                meta.get("persist", "?"))),
            ("program", "staging %s, copy %s, %s steps per checkpoint, seed %s" % (
                meta.get("staging", "?"), meta.get("copy", "?"), meta.get("steps", "?"), meta.get("seed", "?"))),
            ("checkpoint folder", meta.get("ckpt_dir")),
            ("estimate", "%s s before the start%s" % (meta.get("estimate_s", "?"),
                                                      "; budget %s s" % meta["budget_s"]
                                                      if meta.get("budget_s", "0") != "0" else ""))]
    for k, v in info:
        if v:
            L.append("- %s: %s" % (k, v))
    L.append("")

    L.append("## Targets")
    L.append("")
    tg = targets(rows, limits)
    for label, verdict, text in tg:
        L.append("- **%s** %s: %s" % (verdict, label, text))
    L.append("")
    L.append("%d of %d targets PASS, %d FAIL, %d not measured." % (
        sum(v == "PASS" for _, v, _ in tg), len(tg), sum(v == "FAIL" for _, v, _ in tg),
        sum(v == "n/a" for _, v, _ in tg)))
    L.append("")

    L.append("## Physical limits (gpu_limits)")
    L.append("")
    if limits:
        L.append("| limit | GB/s |")
        L.append("|---|---:|")
        for k, v in limits.items():
            L.append("| %s | %.2f |" % (k, v))
    else:
        L.append("Not measured (no gpu_limits, or it failed: see gpu-limits.txt).")
    L.append("")

    L.append("## Runs")
    L.append("")
    L.append("GB/s: bytes checkpointed / seconds of timed checkpoint (restore) I/O as the program sees it, "
             "GB = 1e9 bytes. x nolib, x uvm: the (checkpoint + restore) time per byte of the baseline run "
             "with the same order, interval and sizes in this invocation, divided by this run's (> 1: faster). "
             "/D2D: the throughput as a fraction of the measured device-to-device copy. reads served: "
             "the program's reads that hit each tier (CKPTCACHE_STATS).")
    L.append("")
    hdr = ["run", "config", "order", "hints", "ms", "ckpts x size", "ckpt GB/s", "restore GB/s", "ckpt s",
           "restore s", "verified", "x nolib", "x uvm", "ckpt /D2D", "restore /D2D", "reads served", "status"]
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + "|".join("---:" if h in ("ms", "ckpt GB/s", "restore GB/s", "ckpt s", "restore s", "x nolib",
                                           "x uvm", "ckpt /D2D", "restore /D2D") else "---" for h in hdr) + "|")
    for r in rows:
        rn, _ = ratio(rows, r, "nolib")
        ru, _ = ratio(rows, r, "uvm")
        ck, rs = num(r.get("ckpt_GBps")), num(r.get("restore_GBps"))
        size = fmt_size(r.get("size"))
        if r.get("sizes", "fixed") != "fixed":
            size = "trace (mean %s)" % size
        st = r.get("status", "")
        if r.get("note"):
            st += " (" + r["note"].replace("|", "/") + ")"
        if r.get("lib_messages") not in (None, "", "0"):
            st += "; %s library message(s) in runs/%s.err" % (r["lib_messages"], r["id"])
        L.append("| " + " | ".join([
            r["id"], r["config"], r["order"], r["hints"], r["interval_ms"], "%s x %s" % (r["count"], size),
            f2(ck), f2(rs), f2(num(r.get("ckpt_s")), "%.3g"), f2(num(r.get("restore_s")), "%.3g"),
            r.get("verified") or "-", f2(rn), f2(ru),
            f2(ck / d2d if ck is not None and d2d and ok(r) else None, "%.3f"),
            f2(rs / d2d if rs is not None and d2d and ok(r) else None, "%.3f"),
            served(out, r) or "-", st]) + " |")
    L.append("")
    done = {r["id"] for r in rows}
    left = [p for p in plan if p not in done]
    if left:
        L.append("Not run (the invocation ended before them): " + ", ".join(left) + ".")
        L.append("")
    failed = [r for r in rows if r.get("status", "").startswith("FAIL")]
    if failed:
        L.append("Failed runs (stdout, stderr and the command in runs/ID.out, .err, .cmd): " +
                 ", ".join("%s (%s)" % (r["id"], r["status"]) for r in failed) + ".")
        L.append("")
    L.append("## Plot")
    L.append("")
    L.append(png_note)
    L.append("")
    tmp = os.path.join(out, "gpu-bench.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(L))
    os.replace(tmp, os.path.join(out, "gpu-bench.md"))
    return tg


# ---- the plot ------------------------------------------------------------------

CKPT_RGB = (31, 119, 180)
RESTORE_RGB = (255, 127, 14)
D2D_RGB = (214, 39, 40)
PCIE_RGB = (90, 90, 90)

# 5x7 glyphs, one string of 5 cells per row ('#' lit); lower case is drawn
# with the upper-case glyphs.
FONT = {
    "A": [".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"],
    "B": ["####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."],
    "C": [".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."],
    "D": ["####.", "#...#", "#...#", "#...#", "#...#", "#...#", "####."],
    "E": ["#####", "#....", "#....", "####.", "#....", "#....", "#####"],
    "F": ["#####", "#....", "#....", "####.", "#....", "#....", "#...."],
    "G": [".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"],
    "H": ["#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"],
    "I": [".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."],
    "J": ["..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."],
    "K": ["#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"],
    "L": ["#....", "#....", "#....", "#....", "#....", "#....", "#####"],
    "M": ["#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"],
    "N": ["#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"],
    "O": [".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."],
    "P": ["####.", "#...#", "#...#", "####.", "#....", "#....", "#...."],
    "Q": [".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"],
    "R": ["####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"],
    "S": [".####", "#....", "#....", ".###.", "....#", "....#", "####."],
    "T": ["#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."],
    "U": ["#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."],
    "V": ["#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."],
    "W": ["#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."],
    "X": ["#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"],
    "Y": ["#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."],
    "Z": ["#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"],
    "0": [".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."],
    "1": ["..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."],
    "2": [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"],
    "3": ["#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."],
    "4": ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."],
    "5": ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."],
    "6": ["..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."],
    "7": ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."],
    "8": [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."],
    "9": [".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."],
    " ": [".....", ".....", ".....", ".....", ".....", ".....", "....."],
    ".": [".....", ".....", ".....", ".....", ".....", ".##..", ".##.."],
    ",": [".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."],
    "-": [".....", ".....", ".....", "#####", ".....", ".....", "....."],
    "_": [".....", ".....", ".....", ".....", ".....", ".....", "#####"],
    "/": [".....", "....#", "...#.", "..#..", ".#...", "#....", "....."],
    ":": [".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."],
    "(": ["...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."],
    ")": [".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."],
    "%": ["##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"],
    "=": [".....", ".....", "#####", ".....", "#####", ".....", "....."],
    "+": [".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."],
    ">": [".#...", "..#..", "...#.", "....#", "...#.", "..#..", ".#..."],
    "<": ["...#.", "..#..", ".#...", "#....", ".#...", "..#..", "...#."],
    "*": [".....", "..#..", "#.#.#", ".###.", "#.#.#", "..#..", "....."],
    "'": ["..#..", "..#..", ".#...", ".....", ".....", ".....", "....."],
    "[": [".###.", ".#...", ".#...", ".#...", ".#...", ".#...", ".###."],
    "]": [".###.", "...#.", "...#.", "...#.", "...#.", "...#.", ".###."],
    "?": [".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."],
}


class Canvas:
    """An RGB image with rectangles, dashed lines and bitmap text, saved as
    PNG (8-bit RGB, filter 0, one zlib stream)."""

    def __init__(self, w, h, bg=(255, 255, 255)):
        self.w, self.h = w, h
        self.px = bytearray(bytes(bg) * (w * h))

    def rect(self, x0, y0, x1, y1, rgb):
        x0, x1 = max(0, int(x0)), min(self.w, int(x1))
        y0, y1 = max(0, int(y0)), min(self.h, int(y1))
        if x0 >= x1 or y0 >= y1:
            return
        row = bytes(rgb) * (x1 - x0)
        for y in range(y0, y1):
            i = (y * self.w + x0) * 3
            self.px[i:i + len(row)] = row

    def vline(self, x, y0, y1, rgb, dash=0):
        for y in range(int(y0), int(y1)):
            if not dash or (y - int(y0)) // dash % 2 == 0:
                self.rect(x, y, x + 1, y + 1, rgb)

    def hline(self, x0, x1, y, rgb):
        self.rect(x0, y, x1, y + 1, rgb)

    @staticmethod
    def text_width(s, scale):
        return len(s) * 6 * scale

    def text(self, x, y, s, scale=2, rgb=(0, 0, 0)):
        for ch in s:
            g = FONT.get(ch.upper(), FONT["?"])
            for r, bits in enumerate(g):
                for c, b in enumerate(bits):
                    if b == "#":
                        self.rect(x + c * scale, y + r * scale, x + (c + 1) * scale, y + (r + 1) * scale, rgb)
            x += 6 * scale

    def save(self, path):
        raw = bytearray()
        stride = self.w * 3
        for y in range(self.h):
            raw.append(0)
            raw += self.px[y * stride:(y + 1) * stride]

        def chunk(tag, data):
            return (struct.pack(">I", len(data)) + tag + data +
                    struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

        png = b"\x89PNG\r\n\x1a\n"
        png += chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
        png += chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        png += chunk(b"IEND", b"")
        with open(path, "wb") as f:
            f.write(png)


def plot_data(rows):
    return [(r["id"], num(r["ckpt_GBps"]) or 0.0, num(r["restore_GBps"]) or 0.0) for r in rows if ok(r)]


def tick_label(v):
    return ("%g" % v) if v == 0 or v >= 0.001 else ("%.0e" % v)


def plot_fallback(path, data, limits, title, subtitle, log):
    S = 2  # font scale
    lab_chars = min(40, max(len(d[0]) for d in data))
    left = 20 + lab_chars * 6 * S + 16
    plot_w, right = 760, 120
    top, bar_h, gap, inner = 110, 16, 14, 2
    plot_h = len(data) * (2 * bar_h + inner + gap) + gap
    bottom = 70
    W, H = left + plot_w + right, top + plot_h + bottom
    cv = Canvas(W, H)

    lines = [(limits.get("d2d"), "D2D", D2D_RGB), (limits.get("h2d_pinned"), "PINNED H2D", PCIE_RGB)]
    vals = [v for _, a, b in data for v in (a, b) if v > 0] + [v for v, _, _ in lines if v]
    vmax = max(vals) if vals else 1.0
    if log:
        vmin = min(vals) if vals else 0.1
        lo = 10 ** math.floor(math.log10(vmin / 2))  # the shortest bar stays visible
        hi = 10 ** math.ceil(math.log10(vmax))
        if hi <= lo:
            hi = lo * 10

        def X(v):
            if v <= lo:
                return left
            return left + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * plot_w
    else:
        lo, hi = 0.0, vmax * 1.1

        def X(v):
            return left + max(0.0, v) / hi * plot_w

    cv.text(20, 14, title, S)
    cv.text(20, 40, subtitle, S, (60, 60, 60))
    # legend
    lx = 20
    for name, rgb in (("CHECKPOINT", CKPT_RGB), ("RESTORE", RESTORE_RGB)):
        cv.rect(lx, 70, lx + 16, 86, rgb)
        cv.text(lx + 24, 71, name, S)
        lx += 24 + cv.text_width(name, S) + 30
    for v, name, rgb in lines:
        if v:
            cv.rect(lx, 77, lx + 24, 79, rgb)
            t = "%s %.0f GB/S" % (name, v)
            cv.text(lx + 30, 71, t, S, rgb)
            lx += 30 + cv.text_width(t, S) + 30

    # grid and ticks
    y0, y1 = top, top + plot_h
    if log:
        e = int(round(math.log10(lo)))
        while 10 ** e <= hi * 1.0001:
            d = 10 ** e
            for m in range(2, 10):
                if d * m < hi:
                    cv.vline(X(d * m), y0, y1, (235, 235, 235))
            x = X(d)
            cv.vline(x, y0, y1, (200, 200, 200))
            t = tick_label(d)
            cv.text(x - cv.text_width(t, S) / 2, y1 + 10, t, S)
            e += 1
    else:
        step = 10 ** math.floor(math.log10(hi / 5 if hi > 0 else 1))
        for mult in (1, 2, 5, 10):
            if hi / (step * mult) <= 8:
                step *= mult
                break
        v = 0.0
        while v <= hi:
            x = X(v)
            cv.vline(x, y0, y1, (215, 215, 215))
            t = tick_label(v)
            cv.text(x - cv.text_width(t, S) / 2, y1 + 10, t, S)
            v += step
    cv.text(left + plot_w / 2 - cv.text_width("GB/S", S) / 2, y1 + 36, "GB/S", S)

    # the limit lines, under the bars
    for v, name, rgb in lines:
        if v and lo < v <= hi:
            for dx in (0, 1):
                cv.vline(X(v) + dx, y0, y1, rgb, dash=6)
    # bars, each with its value on a white ground
    y = top + gap
    for label, a, b in data:
        if len(label) > lab_chars:
            label = label[:lab_chars - 2] + ".."
        cv.text(left - 16 - cv.text_width(label, S), y + bar_h - 6, label, S)
        for v, rgb in ((a, CKPT_RGB), (b, RESTORE_RGB)):
            x = X(v)
            cv.rect(left, y, x, y + bar_h, rgb)
            t = ("%.1f" % v) if v < 100 else ("%.0f" % v)
            cv.rect(x + 3, y, x + 9 + cv.text_width(t, S), y + bar_h, (255, 255, 255))
            cv.text(x + 6, y + 1, t, S, (40, 40, 40))
            y += bar_h + inner
        y += gap - inner
    cv.vline(left, y0, y1 + 1, (0, 0, 0))
    cv.hline(left, left + plot_w + 1, y1, (0, 0, 0))
    cv.save(path)


def plot_matplotlib(path, data, limits, title, subtitle, log):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(data)
    fig, ax = plt.subplots(figsize=(12, 2.2 + 0.45 * n))
    ys = list(range(n))
    h = 0.38
    ax.barh([y - h / 2 for y in ys], [max(a, 1e-9) for _, a, _ in data], h, label="checkpoint",
            color=[c / 255 for c in CKPT_RGB])
    ax.barh([y + h / 2 for y in ys], [max(b, 1e-9) for _, _, b in data], h, label="restore",
            color=[c / 255 for c in RESTORE_RGB])
    for y, (_, a, b) in zip(ys, data):
        for v, dy in ((a, -h / 2), (b, h / 2)):
            ax.text(v, y + dy, " %.1f" % v if v < 100 else " %.0f" % v, va="center", fontsize=7)
    for key, name, rgb in (("d2d", "D2D", D2D_RGB), ("h2d_pinned", "pinned H2D", PCIE_RGB)):
        if limits.get(key):
            ax.axvline(limits[key], color=[c / 255 for c in rgb], ls="--", lw=1.2,
                       label="%s %.0f GB/s" % (name, limits[key]))
    ax.set_yticks(ys)
    ax.set_yticklabels([d[0] for d in data], fontsize=8)
    ax.invert_yaxis()
    vmax = max([v for _, a, b in data for v in (a, b)] + [limits.get("d2d") or 0])
    if log:
        ax.set_xscale("log")
        ax.set_xlim(right=vmax * 3)
    else:
        ax.set_xlim(0, vmax * 1.15)
    ax.set_xlabel("GB/s (GB = 1e9 bytes)" + (", log scale" if log else ""))
    ax.set_title(title + "\n" + subtitle, fontsize=10)
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14 if n > 3 else -0.3), ncol=4, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def make_plot(out, rows, limits, meta, log, fallback):
    path = os.path.join(out, "gpu-bench.png")
    data = plot_data(rows)
    if not data:
        return "No completed run to plot yet."
    title = "ckptcache GPU benchmark: %s x %s per run" % (meta.get("count", "?"), fmt_size(meta.get("size")))
    gpu = (meta.get("gpu") or "").split(",")[0].strip()
    subtitle = "GB/s, GB = 1e9 bytes" + (", log scale" if log else "") + (" - " + gpu if gpu else "")
    how = "the built-in PNG writer"
    tmp = path + ".tmp.png"
    if not fallback:
        try:
            plot_matplotlib(tmp, data, limits, title, subtitle, log)
            how = "matplotlib"
        except ImportError:
            fallback = True
    if fallback:
        plot_fallback(tmp, data, limits, title, subtitle, log)
    os.replace(tmp, path)
    return "![checkpoint and restore GB/s per run](gpu-bench.png) (drawn with %s)" % how


def main():
    ap = argparse.ArgumentParser(description="the report of scripts/bench/gpu")
    ap.add_argument("out", help="the benchmark's output folder ($OUT)")
    ap.add_argument("--linear", action="store_true", help="a linear GB/s axis (default: log)")
    ap.add_argument("--fallback", action="store_true", help="draw with the built-in PNG writer, not matplotlib")
    ap.add_argument("--no-plot", action="store_true", help="the markdown only")
    a = ap.parse_args()
    out = a.out
    rows = read_csv(os.path.join(out, "gpu-bench.csv"))
    limits = read_limits(os.path.join(out, "gpu-limits.csv"))
    meta = read_kv(os.path.join(out, "gpu-bench.meta"))
    plan = []
    if os.path.exists(os.path.join(out, "gpu-bench.plan")):
        with open(os.path.join(out, "gpu-bench.plan")) as f:
            plan = [line.strip() for line in f if line.strip()]
    note = "Not drawn (--no-plot)."
    if not a.no_plot:
        note = make_plot(out, rows, limits, meta, not a.linear, a.fallback)
    tg = write_md(out, rows, limits, meta, plan, note)
    for label, verdict, text in tg:
        print("%s %s: %s" % (verdict, label, text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
