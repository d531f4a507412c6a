#!/usr/bin/python3
"""Checks CKPTCACHE_STATS files for the end-to-end tests.

usage: stats.py [--files N] FILE... -- CONDITION...

Every FILE is one process's JSON summary; the values of all files are added
up. A CONDITION is KEY OP NUMBER without spaces, e.g. host.hits>0,
home.put_ops==0, objects.consumed>=12, dist.unhinted==0, files==1:
  TIER.FIELD        a field of the tier named TIER (host, ssd, home)
  objects.FIELD     a field of "objects"
  dist.LABEL        a bucket of "prefetch_distance_at_read"
  SECTION.FIELD     a number of any other section (capture.captured, gpu.releases),
                    or of a section in it (step_aside.small.cache_samples)
  files             the number of statistics files
  FIELD             any other top-level number
  KEY+KEY...        the sum of several, e.g. host.prefetch_ops+host.prefetch_cached>0
Prints every failed condition with the actual value and exits 1 if any
failed (2 on unreadable input); prints the values checked otherwise.
"""
import json
import operator
import re
import sys

OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq,
       "!=": operator.ne, ">": operator.gt, "<": operator.lt}
COND = re.compile(r"^([A-Za-z0-9_.+-]+?)(>=|<=|==|!=|>|<)(-?[0-9.]+)$")


def flatten(doc):
    out = {}
    for tier in doc.get("tiers", []):
        for k, v in tier.items():
            if isinstance(v, (int, float)):
                out[tier["name"] + "." + k] = v
    for k, v in doc.get("objects", {}).items():
        out["objects." + k] = v
    for k, v in doc.get("prefetch_distance_at_read", {}).items():
        out["dist." + k] = v
    for k, v in doc.items():
        if isinstance(v, (int, float)):
            out[k] = v
        elif isinstance(v, dict) and k not in ("objects", "prefetch_distance_at_read"):
            for kk, vv in v.items():
                if isinstance(vv, (int, float)):
                    out[k + "." + kk] = int(vv) if isinstance(vv, bool) else vv
                elif isinstance(vv, dict):
                    for k3, v3 in vv.items():
                        if isinstance(v3, (int, float)):
                            out[k + "." + kk + "." + k3] = int(v3) if isinstance(v3, bool) else v3
    return out


def main(argv):
    if "--" not in argv:
        print("stats.py: usage: stats.py FILE... -- CONDITION...", file=sys.stderr)
        return 2
    sep = argv.index("--")
    files, conds = argv[:sep], argv[sep + 1:]
    total = {"files": len(files)}
    for f in files:
        try:
            with open(f) as fh:
                doc = json.load(fh)
        except (OSError, ValueError) as e:
            print(f"stats.py: {f}: {e}", file=sys.stderr)
            return 2
        for k, v in flatten(doc).items():
            total[k] = total.get(k, 0) + v
    failed = []
    shown = []
    for c in conds:
        m = COND.match(c)
        if not m:
            print(f"stats.py: bad condition '{c}'", file=sys.stderr)
            return 2
        key, op, want = m.group(1), m.group(2), float(m.group(3))
        missing = [k for k in key.split("+") if k not in total]
        if missing:
            failed.append(f"{'+'.join(missing)} missing (needed {key}{op}{m.group(3)}; files: {len(files)})")
            continue
        value = sum(total[k] for k in key.split("+"))
        shown.append(f"{key}={value:g}")
        if not OPS[op](value, want):
            failed.append(f"{key}={value:g} (expected {op}{m.group(3)})")
    if failed:
        print("stats: " + "; ".join(failed))
        return 1
    print("stats: " + " ".join(shown))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
