"""Answering throughput: queries/s per query type for SRC with calibration off and on.

    PIPELINE_DATA=../shared/data python benchmarks/bench_answer.py QUERIES --adjacency EXPORT_DIR \
        [--l-dir RUN_DIR/calibration/L-<key>] [--delta 0.1] [--repeat 2] [--device cpu] [--threads 1]

QUERIES is a query set (`pipeline sample`), EXPORT_DIR a neural adjacency (`pipeline export`). Variants:
``none``; ``D`` (every alpha lowered by --delta); with --l-dir (a calibration L saved by `pipeline answer
--calibration L`), ``L`` and ``D+L`` (L applied once to the index, then the same engine). The time counted
is the engine's evaluation of every batch (one type per batch, as `pipeline answer` runs it), the best of
--repeat runs; building answer rows and files is not counted. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from pipeline.core.config import select_device
from pipeline.engine import as_adjacency
from pipeline.formats.adjacency import load_adjacency
from pipeline.formats.queryset import read_query_set
from pipeline.methods import SRC
from pipeline.methods.src.affine import calibrated_adjacency, feature_tables, load_affine
from pipeline.softquery.types import ordered_types
from pipeline.stages.answer import answer_query_set


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("queries")
    ap.add_argument("--adjacency", required=True)
    ap.add_argument("--l-dir", default=None, help="a saved calibration L (directory holding L.pt)")
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--device", default=None)
    ap.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (1 is steadier on a shared CPU)"
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    dev = select_device(args.device)
    qs = read_query_set(args.queries)
    graph, manifest = load_adjacency(args.adjacency, dataset=qs.meta["dataset"], device=dev)
    plain = as_adjacency(graph)
    variants = {"none": (plain, 0.0), "D": (plain, args.delta)}
    if args.l_dir:
        from pipeline.models import load_run

        model = load_run(manifest["run_dir"], device=dev)
        tables = feature_tables(model, dev)
        calib = load_affine(Path(args.l_dir), tables[0].shape[1], tables[1].shape[1], dev)
        if calib is None:
            raise SystemExit(f"{args.l_dir}: no L.pt")
        with torch.no_grad():
            t0 = time.perf_counter()
            cal = calibrated_adjacency(plain, calib, tables)
            print(f"applying L to {graph.nnz:,} facts (both orientations): {time.perf_counter() - t0:.3f} s")
        variants |= {"L": (cal, 0.0), "D+L": (cal, args.delta)}

    table: dict[str, dict[str, float]] = {}
    for name, (adj, delta) in variants.items():
        best: dict[str, float] = {}
        for _ in range(args.repeat):
            _, stats = answer_query_set(qs, SRC.over(adj, qs.meta["dataset"], delta), progress=False)
            for t, s in stats.items():
                best[t] = max(best.get(t, 0.0), s["queries_per_s"])
        table[name] = best

    types = ordered_types(set(qs.frame["type"]))
    counts = qs.frame["type"].value_counts().to_dict()
    print(
        f"\n{manifest['dataset']}, {manifest['model']} export (threshold {manifest['threshold']}, {graph.nnz:,} facts), "
        f"{len(qs)} queries from {Path(args.queries).name}; device {dev}; {platform.processor() or platform.machine()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; best of {args.repeat}\n"
    )
    print("| variant | " + " | ".join(f"{t} ({counts[t]})" for t in types) + " |")
    print("|---|" + "---:|" * len(types))
    for name, best in table.items():
        print(f"| {name} | " + " | ".join(f"{best.get(t, 0.0):.1f}" for t in types) + " |")
    print("\n(queries/s per type)")
    print(json.dumps({"device": dev, "table": table}))


if __name__ == "__main__":
    main()
