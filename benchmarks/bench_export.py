"""Export the neural adjacency of trained runs and print seconds, stored facts and size vs dense float32.

    PIPELINE_DATA=../shared/data nice -n 10 python benchmarks/bench_export.py RUN_DIR [RUN_DIR ...] \
        --thresholds 0.05 0.1 --out /tmp/exports

Each export goes to OUT/<run name>-t<T> (recomputed: an existing export there is removed first, so the
seconds are a cold export); the load time is that of pipeline.stages.export.load_adjacency.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--thresholds", nargs="+", type=float, default=[0.05, 0.1])
    ap.add_argument("--out", type=Path, default=Path("/tmp/pipeline-bench-exports"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--per-relation", action="store_true", help="also print stored facts per relation")
    args = ap.parse_args(argv)

    from pipeline.formats.adjacency import load_adjacency
    from pipeline.models import read_run
    from pipeline.stages.export import export_adjacency

    rows, per_rel = [], []
    for run_dir in args.runs:
        run = read_run(run_dir)
        name = run.config["model"] + ("+psl" if run.config.get("psl") else "")
        for thr in args.thresholds:
            out = args.out / f"{run_dir.name}-t{thr:g}"
            shutil.rmtree(out, ignore_errors=True)
            try:
                man = export_adjacency(run_dir, threshold=thr, out=out, device=args.device)
            except Exception as exc:  # e.g. the dense guard: report it as a row
                rows.append({"dataset": run.dataset, "model": name, "T": thr, "error": str(exc)[:80]})
                continue
            t0 = time.perf_counter()
            graph, _ = load_adjacency(out)
            load_s = time.perf_counter() - t0
            nnz = [r["nnz"] for r in man["relations"]]
            rows.append(
                {
                    "dataset": run.dataset,
                    "model": name,
                    "T": thr,
                    "device": man["device"],
                    "export s": f"{man['seconds']:.1f}",
                    "load s": f"{load_s:.2f}",
                    "facts": man["nnz"],
                    "facts/rel min-median-max": f"{min(nnz)}-{sorted(nnz)[len(nnz) // 2]}-{max(nnz)}",
                    "MB": f"{man['bytes'] / 1e6:.1f}",
                    "dense MB": f"{man['dense_float32_bytes'] / 1e6:.0f}",
                    "% of dense": f"{100 * man['bytes'] / man['dense_float32_bytes']:.2f}",
                }
            )
            per_rel += [
                {
                    "dataset": run.dataset,
                    "model": name,
                    "T": thr,
                    "relation": r["relation"],
                    "facts": r["nnz"],
                }
                for r in man["relations"]
            ]
            assert graph.nnz == man["nnz"]
    print_rows(rows)
    if args.per_relation:
        print()
        print_rows(per_rel)
    return 0


def print_rows(rows: list[dict]) -> None:
    cols = list(dict.fromkeys(c for r in rows for c in r))
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols]
    print("| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")).ljust(w) for c, w in zip(cols, widths, strict=True)) + " |")


if __name__ == "__main__":
    sys.exit(main())
