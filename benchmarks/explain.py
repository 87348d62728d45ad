"""Explanations: the cost of the witnesses of a query's top answers against answering it again."""

from __future__ import annotations

import statistics
import time

import numpy as np

from benchmarks.harness import Goal, Result, Table, benchmark, progress
from benchmarks.queries import random_queries

TYPES = ("1p", "2p", "2i", "2in", "2il", "2m", "2u", "3in", "ip", "im", "inp", "up")


def best_of(fn, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


@benchmark(
    "explain",
    title="Explanations: the witnesses of the top answers",
    goals=[
        Goal(
            "ratio",
            "explaining the top 10 against answering again (median per type, the worst type)",
            "<=",
            1,
            "x",
        )
    ],
    quick={"per_type": 3},
)
def explain(
    *,
    dataset: str = "ppi5k",
    graph: str = "test",
    per_type: int = 20,
    top: int = 10,
    seed: int = 0,
    types: tuple[str, ...] = TYPES,
) -> Result:
    """Per query type, ``--per-type`` queries drawn as the engine benchmark draws them, kept when they have an
    answer: ``answer`` = solve + top answers (the work of ``pipeline query``), ``explain`` = the witnesses of
    its top ``--top`` answers; each the best of 3 runs on one torch thread, the index built once before
    timing (as ``pipeline query`` does). Ratio = explain / answer per query; median and max over the type's
    queries. Needs PIPELINE_DATA."""
    import torch

    from loaders import load
    from pipeline.core.kg import observed_graph
    from pipeline.engine import Adjacency, solve, top_answers
    from pipeline.engine.witness import find_witnesses

    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    kg = load(dataset)
    adj = Adjacency.from_graph(observed_graph(kg, graph))
    rows = []
    with progress(len(types), "explain", "type") as bar:
        for name in types:
            kept, tries = [], 0
            while len(kept) < per_type and tries < 50 * per_type:
                (q,) = random_queries(kg, name, 1, rng)
                tries += 1
                ids, _ = top_answers(solve([q], adj).utility[0], k=top)
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
                    [
                        name,
                        len(kept),
                        statistics.median(t_ans) * 1e3,
                        statistics.median(t_exp) * 1e3,
                        statistics.median(ratios),
                        max(ratios),
                    ]
                )
            bar.update(1)
    cols = [
        "type",
        "queries",
        "answer ms (median)",
        f"explain top-{top} ms (median)",
        "ratio median",
        "ratio max",
    ]
    return Result(
        [Table(cols, rows, formats={c: ".2f" for c in cols[2:]})],
        {"ratio": max(r[4] for r in rows) if rows else None},
        [f"{dataset}, the observed {graph} graph, seed {seed}."],
    )
