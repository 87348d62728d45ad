"""Load of a data set from the local mirror into validated tables: wall seconds and peak memory.
Each data set loads in a fresh subprocess so its peak RSS is its own.

    PIPELINE_DATA=../shared/data python benchmarks/bench_load.py [--datasets cn15k,ppi5k] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys

CHILD = """
import json, resource, sys, time
import numpy, pandas  # imported before the baseline, so only the load itself is measured
from loaders import load
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
kg = load(sys.argv[1])
load_s = time.perf_counter() - t0
t1 = time.perf_counter()
graphs = {g: len(kg.graph(g)) for g in ("train", "valid", "test")}
graphs_s = time.perf_counter() - t1
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rows": len(kg.rows), "graphs": graphs, "load_s": load_s, "graphs_s": graphs_s,
                  "peak_mib": peak / 1024, "delta_mib": (peak - base) / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="cn15k,ppi5k")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for name in args.datasets.split(","):
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, name], capture_output=True, text=True, check=False
            )
            if out.returncode != 0:
                sys.exit(f"{name}: {out.stderr.strip().splitlines()[-1]}")
            runs.append(json.loads(out.stdout))
        best = min(runs, key=lambda r: r["load_s"])
        rows.append(
            {
                "dataset": name,
                "rows": best["rows"],
                "test facts": best["graphs"]["test"],
                f"load s (best of {args.repeat})": f"{best['load_s']:.2f}",
                "3 graphs s": f"{best['graphs_s']:.2f}",
                "peak RSS MiB": f"{max(r['peak_mib'] for r in runs):.0f}",
                "load +MiB": f"{max(r['delta_mib'] for r in runs):.0f}",
            }
        )
    print(f"# loaders.load from the local mirror, {platform.node()}, python {platform.python_version()}")
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print(" | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)))


if __name__ == "__main__":
    main()
