"""How far can ANY monotone recalibration of a backbone's confidences go towards a model of confidences
that stays selective? An oracle bound, fitted on the valid facts themselves (so optimistic).

    PIPELINE_DATA=../shared/data nice -n 5 python benchmarks/monotone_bound.py RUN_DIR [RUN_DIR ...]

For each run, the predicted confidences p of the valid positives (target c), of one corruption per valid
fact (head or tail replaced at random, target 0: the training's "valid negatives") and of ``--random``
uniform (h, r, t) triples. For each weight lambda of the negatives, the non-decreasing map g minimising
``mean_pos (g(p) - c)^2 + lambda * mean_neg g(p)^2`` (isotonic regression, pool-adjacent-violators, one
map for every relation) is fitted, and the table gives: the valid positives' MSE after g (to hold against
the mean predictor's), the corruptions' MSE after g, and the share of uniform triples with g(p) >= 0.1
and >= 0.5 (the share of all pairs an export at that threshold would keep). A map preserves every
ranking inside a relation; what it cannot do is separate facts the model scores alike, so the table is
the best trade-off this model's scores allow between predicting the valid facts' confidences and a
selective export. With ``--per-relation`` every relation gets its own map (fitted on its own valid facts
and their corruptions, the weights as above; a relation without valid facts maps to 0): the bound over
per-relation recalibrations, which can use each relation's own level of confidence.

With ``--ranks``, also each valid fact's filtered rank of its tail among all entities for its (h, r) (train
and valid facts other than itself filtered out, ties counted half): how often the model places the fact
among the few tails a selective export could keep (hits@k, mean reciprocal rank).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def isotonic_map(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weighted least-squares non-decreasing map of scores s to targets y: (knots, values), to apply
    with :func:`apply_map` (right-continuous steps between knots)."""
    from scipy.optimize import isotonic_regression

    order = np.argsort(s, kind="stable")
    fit = isotonic_regression(y[order], weights=w[order], increasing=True).x
    return s[order], fit


def apply_map(knots: np.ndarray, values: np.ndarray, p: np.ndarray) -> np.ndarray:
    i = np.searchsorted(knots, p, side="right") - 1
    return np.where(i < 0, values[0], values[np.clip(i, 0, len(values) - 1)])


def tail_ranks(model, kg) -> np.ndarray:
    """The filtered rank of each valid fact's tail among every entity, for its (h, r)."""
    import torch

    known = kg.graph("train")[["h", "r", "t"]]
    valid = kg.split_facts("val")
    seen: dict[tuple[int, int], list[int]] = {}
    for h, r, t in np.concatenate([known.to_numpy(), valid[["h", "r", "t"]].to_numpy()]):
        seen.setdefault((int(h), int(r)), []).append(int(t))
    ranks = np.empty(len(valid))
    rows = valid[["h", "r", "t"]].to_numpy()
    tails = torch.arange(kg.n_entities)
    with torch.no_grad():
        for i, (h, r, t) in enumerate(rows):
            p = model.score_block(torch.tensor([int(h)]), int(r), tails)[0].double().numpy()
            target = p[t]
            other = np.array([x for x in seen[(int(h), int(r))] if x != t], dtype=np.int64)
            p[other] = -np.inf  # filtered: the other known tails of (h, r) are not competitors
            ranks[i] = 1 + np.sum(p > target) + 0.5 * (np.sum(p == target) - 1)
    return ranks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--random", type=int, default=2_000_000, help="uniform (h, r, t) triples scored")
    ap.add_argument("--lambdas", nargs="+", type=float, default=[0.0, 0.03, 0.1, 0.3, 1.0, 3.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--ranks", action="store_true", help="also the valid facts' filtered tail ranks")
    ap.add_argument("--per-relation", action="store_true", help="one map per relation instead of one for all")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from loaders import load
    from pipeline.models import load_run, read_run
    from pipeline.models.training import sampled_negatives

    rows = []
    for run_dir in args.runs:
        dataset = read_run(run_dir).dataset
        kg = load(dataset)
        model = load_run(run_dir, device="cpu")
        valid = kg.split_facts("val")
        neg = sampled_negatives(valid, kg.n_entities, args.seed)
        rng = np.random.default_rng(args.seed)
        uni = [torch.as_tensor(rng.integers(0, n, args.random)) for n in (kg.n_entities, kg.n_relations, kg.n_entities)]
        as_t = lambda df, c: torch.as_tensor(df[c].to_numpy(np.int64).copy())  # noqa: E731
        p_pos = model.score(as_t(valid, "h"), as_t(valid, "r"), as_t(valid, "t")).double().numpy()
        p_neg = model.score(as_t(neg, "h"), as_t(neg, "r"), as_t(neg, "t")).double().numpy()
        p_uni = model.score(*uni).double().numpy()
        c = valid["conf"].to_numpy(np.float64)
        mean_c = float(kg.graph("train")["conf"].mean())
        raw = {"lambda": "as trained", "pos_mse": float(np.mean((p_pos - c) ** 2)), "neg_mse": float(np.mean(p_neg**2)),
               "share_0.1": float(np.mean(p_uni >= 0.1)), "share_0.5": float(np.mean(p_uni >= 0.5))}
        print(f"\n{run_dir.name} ({dataset}): mean predictor valid MSE {np.mean((c - mean_c) ** 2):.4f}, "
              f"neg MSE {mean_c**2:.4f}")
        print(f"  valid positives' p quantiles 10/25/50/75/90%: "
              f"{' '.join(f'{q:.3f}' for q in np.quantile(p_pos, [0.1, 0.25, 0.5, 0.75, 0.9]))}; uniform triples: "
              f"{' '.join(f'{q:.3f}' for q in np.quantile(p_uni, [0.5, 0.9, 0.99, 0.999]))} (50/90/99/99.9%)")
        print("  | negatives' weight | valid pos MSE | valid neg MSE | share >= 0.1 | share >= 0.5 |")
        print(f"  | as trained | {raw['pos_mse']:.4f} | {raw['neg_mse']:.4f} | {100 * raw['share_0.1']:.2f}% | "
              f"{100 * raw['share_0.5']:.3f}% |")
        fits = [raw]
        s = np.concatenate([p_pos, p_neg])
        y = np.concatenate([c, np.zeros_like(p_neg)])
        rel = np.concatenate([valid["r"].to_numpy(), neg["r"].to_numpy()])
        rel_uni = uni[1].numpy()
        groups = range(kg.n_relations) if args.per_relation else [None]
        for lam in args.lambdas:
            # a weight of 0 is a vanishing one (the fit needs positive weights)
            w = np.concatenate([np.full(len(p_pos), 1.0 / len(p_pos)), np.full(len(p_neg), max(lam, 1e-9) / len(p_neg))])
            g_all, g_uni = np.zeros_like(s), np.zeros_like(p_uni)
            for r in groups:
                at = np.ones(len(s), bool) if r is None else rel == r
                at_uni = np.ones(len(p_uni), bool) if r is None else rel_uni == r
                if not at.any():
                    continue  # no valid fact of this relation: its map is 0
                knots, values = isotonic_map(s[at], y[at], w[at])
                g_all[at] = apply_map(knots, values, s[at])
                g_uni[at_uni] = apply_map(knots, values, p_uni[at_uni])
            g_pos, g_neg = g_all[: len(p_pos)], g_all[len(p_pos):]
            fit = {"lambda": lam, "pos_mse": float(np.mean((g_pos - c) ** 2)), "neg_mse": float(np.mean(g_neg**2)),
                   "share_0.1": float(np.mean(g_uni >= 0.1)), "share_0.5": float(np.mean(g_uni >= 0.5))}
            fits.append(fit)
            print(f"  | {lam:g} | {fit['pos_mse']:.4f} | {fit['neg_mse']:.4f} | {100 * fit['share_0.1']:.2f}% | "
                  f"{100 * fit['share_0.5']:.3f}% |")
        entry = {"run": str(run_dir), "mean_valid_mse": float(np.mean((c - mean_c) ** 2)), "fits": fits}
        if args.ranks:
            rk = tail_ranks(model, kg)
            entry["ranks"] = {"mrr": float(np.mean(1 / rk)), **{f"hits@{k}": float(np.mean(rk <= k)) for k in (1, 10, 100, 1000)},
                              "median": float(np.median(rk))}
            print("  valid tails, filtered: " + ", ".join(f"{k} {v:.3f}" for k, v in entry["ranks"].items()))
        rows.append(entry)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
