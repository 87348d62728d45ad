"""Screen trained backbones for the main table: confidence errors beside the mean predictor's, the share of
(h, r, t) pairs each export threshold would keep, and SRC's selection score on the valid queries at every
delta of D's grid (delta 0 is SRC itself). Selection on valid only: the test set is never read here.

    PIPELINE_DATA=../shared/data nice -n 5 python benchmarks/backbone_search.py RUN_DIR [RUN_DIR ...] \\
        --valid QUERIES/..._valid_....parquet --thresholds 0.1 0.2 --exports .dev/exports --out .dev/search.json

For each run: its results.json's valid/test MSE (positives, and CN15k's sampled test negatives) and the mean
predictor's valid MSE; the share of pairs scoring >= T over ``--heads`` random heads x all tails x all
relations (a projected export size, so an export that would not fit is never started); then, for each
threshold whose projected export is under ``--max-facts``, the export (reused when present) and the valid
selection score (the mean over tau, rho, MAP, NDCG of their type averages x100, as calibration D and L
select) with its four averages per delta. Appends one JSON object per (run, threshold) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def pass_shares(model: Any, thresholds: list[float], heads: int, seed: int) -> dict[float, float]:
    """The share of all (h, r, t) pairs whose predicted confidence is >= each threshold, estimated on
    ``heads`` random heads against every tail of every relation."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    hs = torch.as_tensor(rng.choice(model.n_entities, size=min(heads, model.n_entities), replace=False))
    tails = torch.arange(model.n_entities)
    counts = dict.fromkeys(thresholds, 0)
    total = 0
    with torch.no_grad():
        for r in range(model.n_relations):
            p = model.score_block(hs, r, tails)
            total += p.numel()
            for t in thresholds:
                counts[t] += int((p >= t).sum())
    return {t: counts[t] / total for t in thresholds}


def backbone_row(run_dir: Path) -> dict[str, Any]:
    """The run's confidence errors (positives, negatives) beside the mean predictor's valid MSE."""
    from pipeline.models import read_run

    res = read_run(run_dir).results
    return {
        "run": str(run_dir),
        "model": res["model"] + ("+psl" if res.get("psl") else ""),
        "best_epoch": res["best_epoch"],
        "epochs_run": res["epochs_run"],
        "valid_mse": res["valid"]["mse"],
        "valid_neg_mse": res["valid_negatives"]["mse"],
        "mean_valid_mse": res["mean_predictor"]["valid_mse"],
        "test_mse_pos": res["test"]["mse"],
        "test_mse_neg": res.get("test_negatives", {}).get("mse"),
        "train_seconds": res["train_seconds"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--valid", required=True, type=Path, help="the valid query set (parquet)")
    ap.add_argument("--thresholds", nargs="+", type=float, default=[0.1])
    ap.add_argument("--top-k", type=int, default=None, help="export each (head, relation)'s K best tails only")
    ap.add_argument("--exports", type=Path, required=True, help="folder of the exports (reused when present)")
    ap.add_argument("--max-facts", type=float, default=1.2e8, help="skip a threshold projected above this")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True, help="JSON lines appended, one per (run, threshold)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from loaders import load
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.src.calibrations import DELTA_GRID
    from pipeline.methods.src.method import SRC
    from pipeline.models import load_run
    from pipeline.stages.export import export_adjacency
    from pipeline.stages.selection import ValidScorer, selection_of

    valid = read_query_set(args.valid)
    dataset = valid.meta["dataset"]
    kg = load(dataset)
    scorer = ValidScorer(valid)
    n_pairs = kg.n_relations * kg.n_entities**2
    for run_dir in args.runs:
        row = backbone_row(run_dir)
        model = load_run(run_dir, device="cpu")
        shares = pass_shares(model, args.thresholds, args.heads, args.seed)
        del model
        print(f"{run_dir.name}: valid MSE {row['valid_mse']:.4f} (mean {row['mean_valid_mse']:.4f}), valid neg "
              f"{row['valid_neg_mse']:.4f}, test pos {row['test_mse_pos']:.4f}, test neg {row['test_mse_neg']}",
              flush=True)
        for thr in args.thresholds:
            projected = shares[thr] * n_pairs
            entry = {**row, "threshold": thr, "top_k": args.top_k, "share": shares[thr], "projected_facts": projected}
            if projected > args.max_facts and args.top_k is None:
                print(f"  T={thr:g}: {100 * shares[thr]:.2f}% of pairs pass ({projected:.3g} facts): skipped", flush=True)
                entry["skipped"] = True
            else:
                name = f"{run_dir.name}-t{thr:g}" + (f"-k{args.top_k}" if args.top_k else "")
                t0 = time.perf_counter()
                man = export_adjacency(run_dir, threshold=thr, out=args.exports / name, top_k=args.top_k,
                                       progress=False)
                export_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                src = SRC.load(man["path"], dataset, device="cpu", kg=kg)
                summaries = scorer.summaries([src.with_delta(d) for d in DELTA_GRID])
                score_s = time.perf_counter() - t0
                del src
                by_delta = {
                    f"{d:g}": {"score": selection_of(s), **{m: s[m]["avg"] for m in ("tau", "rho", "map", "ndcg")}}
                    for d, s in zip(DELTA_GRID, summaries, strict=True)
                }
                entry.update(nnz=man["nnz"], export_seconds=export_s, cached=man["cached"], valid_seconds=score_s,
                             valid=by_delta)
                best = max(by_delta, key=lambda d: (by_delta[d]["score"], -float(d)))
                print(f"  T={thr:g}: {man['nnz']:,} facts ({export_s:.0f} s{' cached' if man['cached'] else ''}); "
                      f"valid SRC {by_delta['0']['score']:.2f} "
                      f"({'/'.join(f'{by_delta[chr(48)][m]:.1f}' for m in ('tau', 'rho', 'map', 'ndcg'))}), "
                      f"D best delta {best}: {by_delta[best]['score']:.2f} "
                      f"({'/'.join(f'{by_delta[best][m]:.1f}' for m in ('tau', 'rho', 'map', 'ndcg'))}); "
                      f"{score_s:.0f} s", flush=True)
            with args.out.open("a") as f:
                f.write(json.dumps(entry) + "\n")


if __name__ == "__main__":
    main()
