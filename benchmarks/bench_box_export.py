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
    from pipeline.formats.adjacency import load_adjacency
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


def pass_share(run_dir: Path, threshold: float, n_pairs: int = 200_000, seed: int = 0) -> float:
    """Share of uniformly random (h, r, t) the model scores >= threshold (its selectivity: no bound can
    prune the pairs that really pass)."""
    from pipeline.models import load_run

    model = load_run(run_dir)
    g = torch.Generator().manual_seed(seed)
    h, t = (torch.randint(model.n_entities, (n_pairs,), generator=g) for _ in range(2))
    r = torch.randint(model.n_relations, (n_pairs,), generator=g)
    with torch.no_grad():
        return float((model(h, r, t) >= threshold).float().mean())


def slice_rows(run_dir: Path, threshold: float, spec: str) -> dict:
    """Pruned vs brute-force scoring of R relations x H heads (evenly spaced ids) against all tails: wall
    times, pruning counts and agreement (the full export in small)."""
    from pipeline.models import box_bounds, load_run

    model = load_run(run_dir)
    n = model.n_entities
    n_rel, n_heads = (int(x) for x in spec.split("x"))
    heads = torch.as_tensor(np.unique(np.linspace(0, n - 1, n_heads).astype(np.int64)))
    stats = box_bounds.PruneStats()
    t_pruned = t_brute = 0.0
    only_one = near = 0
    max_diff = 0.0
    for r in range(min(n_rel, model.n_relations)):
        t0 = time.perf_counter()
        h, t, s = box_bounds.score_relation(model, r, threshold, heads=heads, stats=stats)
        t1 = time.perf_counter()
        p = model.score_block(heads, r, torch.arange(n))
        hi, ti = (p >= threshold).nonzero(as_tuple=True)
        t_brute += time.perf_counter() - t1
        t_pruned += t1 - t0
        got = dict(zip((h * n + t).tolist(), s.tolist(), strict=True))
        ref = dict(zip((heads[hi] * n + ti).tolist(), p[hi, ti].tolist(), strict=True))
        diff = got.keys() ^ ref.keys()
        only_one += len(diff)
        near += sum(abs((got | ref)[k] - threshold) <= 1e-6 for k in diff)
        max_diff = max([max_diff] + [abs(got[k] - ref[k]) for k in got.keys() & ref.keys()])
    d = stats.as_dict()
    return {
        "slice": spec, "T": threshold, "pruned s": f"{t_pruned:.1f}", "brute s": f"{t_brute:.1f}",
        "block pairs pruned": f"{100 * d['pruned_share']:.1f}%",
        "rows pruned (stage 2)": f"{100 * d['rows_pruned'] / max(1, d['row_pairs']):.1f}%",
        "pairs scored": f"{100 * d['scored_share']:.2f}%",
        "pairs cut (stage 3)": f"{100 * d['cut_share']:.1f}%",
        "scored in full": f"{100 * d['exact_share']:.2f}%", "facts": d["facts"],
        "facts % of pairs": f"{100 * d['facts'] / max(1, d['pairs_total']):.2f}",
        "only in one": only_one, "of them within 1e-6 of T": near, "max |diff|": f"{max_diff:.1e}",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--box", nargs="*", type=Path, default=[])
    ap.add_argument("--ukge", nargs="*", type=Path, default=[])
    ap.add_argument("--threshold", type=float, default=0.1)
    ap.add_argument("--out", type=Path, default=Path("/tmp/pipeline-box-exports"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--verify", default=None, help="RxH: brute-force check of R relations x H heads")
    ap.add_argument("--slice", default=None, help="RxH: time pruned vs brute force on a slice, no export")
    ap.add_argument("--thresholds", nargs="*", type=float, default=None, help="with --slice: several T")
    ap.add_argument("--relations", type=int, default=None, help="UKGE measurement: the first R relations")
    ap.add_argument("--leaf", type=int, default=32, help="block size of the UKGE measurement")
    args = ap.parse_args(argv)

    from pipeline.models import dot_bounds, load_run, read_run
    from pipeline.stages.export import export_adjacency

    for run_dir in args.box:
        run = read_run(run_dir)
        if args.slice:
            for thr in args.thresholds or [args.threshold]:
                print(f"{run_dir.name}: {100 * pass_share(run_dir, thr):.2f}% of random pairs >= {thr}; "
                      + " | ".join(f"{k}: {v}" for k, v in slice_rows(run_dir, thr, args.slice).items()),
                      flush=True)
            continue
        print(f"{run_dir.name}: {100 * pass_share(run_dir, args.threshold):.2f}% of random pairs score >= "
              f"{args.threshold}", flush=True)
        out = args.out / f"{run_dir.name}-t{args.threshold:g}"
        shutil.rmtree(out, ignore_errors=True)
        try:
            man = export_adjacency(run_dir, threshold=args.threshold, out=out, device=args.device)
        except Exception as exc:  # e.g. the dense guard: report it as a row
            print(f"{run_dir.name}: {exc}")
            continue
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
            "pairs cut (stage 3)": f"{100 * p['cut_share']:.1f}%",
            "scored in full": f"{100 * p['exact_share']:.2f}%",
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
        rels = list(range(args.relations)) if args.relations else None
        tot = dot_bounds.measure(model, args.threshold, leaf=args.leaf, relations=rels)
        s = dot_bounds.summary(tot)
        print(f"ukge {run_dir.name} T={args.threshold} relations {len(rels or range(model.n_relations))} "
              f"({time.perf_counter() - t0:.0f} s): "
              + " | ".join(f"{k}: {100 * v:.2f}%" for k, v in s.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
