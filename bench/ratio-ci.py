#!/usr/bin/env python3
"""How sure is a side-by-side ratio? Pairs each fleet run with the same
repetition's reference run (default goraw) in one or more
bench/side-by-side.sh result files, and prints per K: the pairs, the median
of the per-pair ratios with a bootstrap 95% interval of that median, the
ratio of the medians, and the share of pairs at or over a target.

    python3 bench/ratio-ci.py /tmp/fleet-bench/sbs-35.jsonl [more.jsonl ...]
    REF=go TARGET=0.7 python3 bench/ratio-ci.py FILE
"""
import json
import os
import random
import statistics
import sys

ref = os.environ.get("REF", "goraw")
anchor = os.environ.get("ANCHOR", "fleet")
target = float(os.environ.get("TARGET", "0.8"))

runs = {}  # (k, file, rep) -> {anchor: fps}
for path in sys.argv[1:]:
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            lab = dict(kv.split("=", 1) for kv in r["label"].split(","))
            if r.get("timed_out") or r.get("clients_complete") != r.get("clients"):
                continue
            runs.setdefault((int(lab["k"]), path, lab["rep"]), {})[lab["anchor"]] = r["frames_per_s"]

rng = random.Random(1)
for k in sorted({key[0] for key in runs}):
    pairs = [v for key, v in runs.items() if key[0] == k and ref in v and anchor in v]
    if not pairs:
        continue
    ratios = sorted(v[anchor] / v[ref] for v in pairs)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(10000))
    lo, hi = meds[int(0.025 * len(meds))], meds[int(0.975 * len(meds)) - 1]
    rom = statistics.median(v[anchor] for v in pairs) / statistics.median(v[ref] for v in pairs)
    met = sum(r >= target for r in ratios)
    print(f"K={k}: {anchor}/{ref} n={len(ratios)} median {statistics.median(ratios):.3f} "
          f"[95% {lo:.3f}-{hi:.3f}] ratio of medians {rom:.3f} pairs >= {target}: {met}/{len(ratios)} "
          f"range {ratios[0]:.2f}-{ratios[-1]:.2f}")
