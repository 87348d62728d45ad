"""Cost of explanations: time to find the witnesses of the top 10 answers of one query,
against the time to answer that query again, per query type, on one graph.

    PIPELINE_DATA=../shared/data python benchmarks/bench_explain.py [--dataset ppi5k] [--graph test]
        [--per-type 20] [--top 10] [--seed 0]

Queries as in bench_engine.py (relations and anchors drawn from the test graph's facts, hybrid alpha,
random beta), kept only when they have at least one answer. Per query: `answer` = solve + top answers
(the work of `pipeline query`), `explain` = explain() of its top `--top` answers; each the best of 3 runs
on one torch thread (the adjacency index is built once, before timing, as `pipeline query` builds it
once). Prints a markdown table: medians per type and the median and max of the per-query ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from loaders import load
from pipeline.core.kg import observed_graph
from pipeline.engine import Adjacency, solve, top_answers
from pipeline.engine.witness import find_witnesses
from pipeline.softquery import QUERY_TYPES


def _random_queries():
    """bench_engine's query generator (benchmarks/ is not a package: load it by path)."""
    path = Path(__file__).with_name("bench_engine.py")
    spec = importlib.util.spec_from_file_location("bench_engine", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod.random_queries


def best_of(fn, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ppi5k")
    ap.add_argument("--graph", default="test")
    ap.add_argument("--per-type", type=int, default=20)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    kg = load(args.dataset)
    adj = Adjacency.from_graph(observed_graph(kg, args.graph))
    random_queries = _random_queries()
    rows = []
    for name in tqdm(list(QUERY_TYPES), desc="types", unit="type", file=sys.stderr):
        kept, tries = [], 0
        while len(kept) < args.per_type and tries < 50 * args.per_type:
            (q,) = random_queries(kg, name, 1, rng)
            tries += 1
            ids, _ = top_answers(solve([q], adj).utility[0], k=args.top)
            if ids.numel():
                kept.append((q, ids.tolist()))
        t_ans, t_exp, ratios = [], [], []
        for q, ids in kept:
            a = best_of(lambda q=q: top_answers(solve([q], adj).utility[0], k=100))
            e = best_of(lambda q=q, ids=ids: find_witnesses(q, adj, ids))
            t_ans.append(a)
            t_exp.append(e)
            ratios.append(e / a)
        if kept:
            rows.append(
                (name, len(kept), statistics.median(t_ans) * 1e3, statistics.median(t_exp) * 1e3,
                 statistics.median(ratios), max(ratios))
            )
    print(f"{args.dataset}, observed {args.graph} graph, top {args.top} explained, seed {args.seed}; "
          f"machine: {platform.machine()} ({platform.processor() or 'cpu'}), torch {torch.__version__}, "
          f"1 thread, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    print()
    print("| type | queries | answer ms (median) | explain top-10 ms (median) | ratio median | ratio max |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, k, a, e, rm, rx in rows:
        print(f"| {name} | {k} | {a:.2f} | {e:.2f} | {rm:.2f} | {rx:.2f} |")


if __name__ == "__main__":
    main()
