"""Sampling query sets on the real data sets: walks in the store against ground truth in the engine."""

from __future__ import annotations

import os
import tempfile
import time

from benchmarks.harness import Goal, Result, Table, benchmark, progress


@benchmark(
    "sampling",
    title="Sampling query sets",
    goals=[Goal("seconds", "100 test queries per type (1,200 in all), the slower data set", "<=", 60, "s")],
    quick={"datasets": ("ppi5k",), "per_type": 5},
)
def sampling(
    *,
    datasets: tuple[str, ...] = ("ppi5k", "cn15k"),
    per_type: int = 100,
    split: str = "test",
    alpha: str = "hybrid",
    beta: str = "random",
    seed: int = 0,
    store: str | None = None,
) -> Result:
    """Per data set and query type: candidate walks (Cypher in the store) and ground truth (the engine, both
    graphs), the share of candidates kept as useful, the answer-count distribution. A private embedded
    FalkorDB under a temporary PIPELINE_HOME (stopped at the end) unless ``--store`` names one."""
    private = store is None
    saved = os.environ.get("PIPELINE_HOME")
    if private:
        os.environ["PIPELINE_HOME"] = tempfile.mkdtemp(prefix="bench-sampling-")
    from loaders import load
    from pipeline.sampling.levels import store_alpha_table
    from pipeline.sampling.sampler import sample_queries
    from pipeline.store import embedded, open_store
    from pipeline.store.ingest import ingest

    tables, totals, notes = [], [], []
    try:
        with open_store(store) as st, progress(len(datasets), "sampling", "data set") as bar:
            for name in datasets:
                kg = load(name)
                t0 = time.perf_counter()
                ingest(kg, st, progress=False)
                t_ingest = time.perf_counter() - t0
                table = store_alpha_table(st, kg.name, kg.n_relations)
                t0 = time.perf_counter()
                _, reports = sample_queries(
                    kg,
                    st,
                    split=split,
                    types=None,
                    per_type=per_type,
                    alpha_mode=alpha,
                    beta_mode=beta,
                    seed=seed,
                    alpha_table=table,
                )
                total = time.perf_counter() - t0
                totals.append(total)
                rows = []
                for r in reports:
                    s = r.summary()
                    n = max(r.kept, 1)
                    rows.append(
                        [
                            r.type,
                            r.kept,
                            r.attempts,
                            100 * r.useful_share,
                            1000 * r.store_seconds / n,
                            1000 * r.engine_seconds / n,
                            r.kept / max(r.store_seconds + r.engine_seconds, 1e-9),
                            s["answers_median"],
                            s["answers_p90"],
                            s["answers_max"],
                            100 * sum(c >= 100 for c in r.answer_counts) / n,
                        ]
                    )
                tables.append(
                    Table(
                        [
                            "type",
                            "kept",
                            "walks",
                            "useful %",
                            "store ms/q",
                            "engine ms/q",
                            "queries/s",
                            "answers median",
                            "p90",
                            "max",
                            ">=100 %",
                        ],
                        rows,
                        title=f"{name} ({kg.n_entities:,} entities; ingest {t_ingest:.1f} s, sampling "
                        f"{total:.1f} s for {sum(r.kept for r in reports):,} queries)",
                        formats={
                            "useful %": ".1f",
                            "store ms/q": ".2f",
                            "engine ms/q": ".2f",
                            "queries/s": ".0f",
                            ">=100 %": ".0f",
                        },
                    )
                )
                bar.update(1)
    finally:
        if private:
            embedded.stop()
            if saved is None:
                os.environ.pop("PIPELINE_HOME", None)
            else:
                os.environ["PIPELINE_HOME"] = saved
    notes.append(f"Split {split}, alpha {alpha}, beta {beta}, seed {seed}.")
    return Result(tables, {"seconds": max(totals) if per_type == 100 and totals else None}, notes)
