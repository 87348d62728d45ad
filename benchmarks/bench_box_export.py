"""The pruned export of box models (pipeline.models.box_bounds): time, pruning, facts, exactness; and what
the dot-product bounds of pipeline.models.dot_bounds would prune for UKGE runs.

    PIPELINE_DATA=../shared/data OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_box_export.py \
        --box RUN_DIR --threshold 0.1 --out /tmp/box-exports --verify 3x2000 [--ukge RUN_DIR]

--box: a BEUrRE run, exported cold to OUT/<run name>-t<T> (an existing export there is removed first).
--verify RxH: brute force (model.score_block against all tails) for the first R relations x H heads (H
evenly spaced ids, or `all`), compared with the export's facts of those heads: pairs only in one of them,
and the largest score difference over the pairs in both.
--ukge: a UKGE run; prints the share of block pairs / rows the interval and Cauchy-Schwarz bounds prune.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch


def verify(run_dir: Path, export_dir: Path, threshold: float, spec: str) -> dict:
    from pipeline.export import load_adjacency
    from pipeline.models import load_run

    model = load_run(run_dir)
    graph, _ = load_adjacency(export_dir)
    n = model.n_entities
    n_rel, n_heads = spec.split("x")
    heads = np.arange(n) if n_heads == "all" else np.unique(np.linspace(0, n - 1, int(n_heads)).astype(np.int64))
    only_one, max_diff, checked, near = 0, 0.0, 0, 0
    tails = torch.arange(n)
    for r in range(min(int(n_rel), model.n_relations)):
        gh, gt, gs = (x.numpy() for x in graph.relation(r))
        sel = np.isin(gh, heads)
        got = dict(zip((gh[sel] * n + gt[sel]).tolist(), gs[sel].tolist(), strict=True))
        ref = {}
        for a in range(0, len(heads), 64):
            hb = torch.as_tensor(heads[a : a + 64])
            p = model.score_block(hb, r, tails)
            hi, ti = (p >= threshold).nonzero(as_tuple=True)
            ref.update(zip((hb[hi] * n + ti).tolist(), p[hi, ti].tolist(), strict=True))
        both = got.keys() & ref.keys()
        diff = got.keys() ^ ref.keys()
        only_one += len(diff)
        near += sum(abs((got | ref)[k] - threshold) <= 1e-6 for k in diff)
        max_diff = max([max_diff] + [abs(got[k] - ref[k]) for k in both])
        checked += len(heads) * n
    return {"pairs checked": checked, "only in one": only_one, "of them within 1e-6 of T": near,
            "max |score diff|": f"{max_diff:.2e}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--box", nargs="*", type=Path, default=[])
    ap.add_argument("--ukge", nargs="*", type=Path, default=[])
    ap.add_argument("--threshold", type=float, default=0.1)
    ap.add_argument("--out", type=Path, default=Path("/tmp/pipeline-box-exports"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--verify", default=None, help="RxH: brute-force check of R relations x H heads")
    ap.add_argument("--leaf", type=int, default=32, help="block size of the UKGE measurement")
    args = ap.parse_args(argv)

    from pipeline.export import export_adjacency
    from pipeline.models import dot_bounds, load_run, read_run

    for run_dir in args.box:
        run = read_run(run_dir)
        out = args.out / f"{run_dir.name}-t{args.threshold:g}"
        shutil.rmtree(out, ignore_errors=True)
        man = export_adjacency(run_dir, args.threshold, out, device=args.device)
        p = man["pruning"]
        row = {
            "dataset": run.dataset,
            "model": run.config["model"],
            "T": args.threshold,
            "device": man["device"],
            "export s": f"{man['seconds']:.1f}",
            "block pairs pruned": f"{p['blocks_pruned']:,} / {p['block_pairs']:,} ({100 * p['pruned_share']:.1f}%)",
            "rows pruned (stage 2)": f"{100 * p['rows_pruned'] / max(1, p['row_pairs']):.1f}%",
            "pairs scored": f"{100 * p['scored_share']:.2f}%",
            "facts": f"{man['nnz']:,}",
            "% of dense": f"{100 * man['bytes'] / man['dense_float32_bytes']:.2f}",
        }
        print(" | ".join(f"{k}: {v}" for k, v in row.items()))
        if args.verify:
            t0 = time.perf_counter()
            res = verify(run_dir, out, args.threshold, args.verify)
            print(f"verify {args.verify} ({time.perf_counter() - t0:.0f} s): "
                  + " | ".join(f"{k}: {v}" for k, v in res.items()))
        sys.stdout.flush()
    for run_dir in args.ukge:
        model = load_run(run_dir)
        t0 = time.perf_counter()
        tot = dot_bounds.measure(model, args.threshold, leaf=args.leaf)
        s = dot_bounds.summary(tot)
        print(f"ukge {run_dir.name} T={args.threshold} ({time.perf_counter() - t0:.0f} s): "
              + " | ".join(f"{k}: {100 * v:.2f}%" for k, v in s.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
