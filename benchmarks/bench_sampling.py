"""Sampling throughput per query type on the real data sets: walks (store-side Cypher time) vs ground
truth (engine time), the share of candidates kept as useful, and the answer-count distribution.

    nice -n 10 python benchmarks/bench_sampling.py --datasets ppi5k,cn15k --per-type 40

Starts a private embedded FalkorDB under a temporary PIPELINE_HOME (stopped at the end) unless --store
names one. Prints one Markdown table per data set; the numbers go into docs/sampling.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="ppi5k,cn15k")
    ap.add_argument("--per-type", type=int, default=40)
    ap.add_argument("--split", default="test", choices=["train", "valid", "test"])
    ap.add_argument("--alpha", default="zero")
    ap.add_argument("--beta", default="equal")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--store", default=None, help="a store URI; default: a private embedded server")
    args = ap.parse_args()

    private = args.store is None
    if private:
        os.environ["PIPELINE_HOME"] = tempfile.mkdtemp(prefix="bench_sampling_")
    from loaders import load
    from pipeline.sampling.levels import store_alpha_table
    from pipeline.sampling.sampler import sample_queries
    from pipeline.store import embedded, open_store
    from pipeline.store.ingest import ingest

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"split {args.split}, alpha {args.alpha}, beta {args.beta}, {args.per_type} per type, seed {args.seed}\n"
    )
    try:
        with open_store(args.store) as store:
            for name in args.datasets.split(","):
                kg = load(name)
                t0 = time.perf_counter()
                ingest(kg, store, progress=False)
                t_ingest = time.perf_counter() - t0
                table = store_alpha_table(store, kg.name, kg.n_relations)
                t0 = time.perf_counter()
                _, reports = sample_queries(kg, store, split=args.split, types=None, per_type=args.per_type, alpha_mode=args.alpha, beta_mode=args.beta, seed=args.seed, alpha_table=table)
                total = time.perf_counter() - t0
                print(
                    f"## {name}: {kg.n_entities} entities, ingest {t_ingest:.1f} s, sampling {total:.1f} s in all\n"
                )
                print(
                    "| type | kept | walks | useful % | store ms/q | engine ms/q | queries/s | answers median | p90 | max | >=100 % |"
                )
                print("|---|---|---|---|---|---|---|---|---|---|---|")
                for r in reports:
                    s = r.summary()
                    n = max(r.kept, 1)
                    qps = r.kept / max(r.store_seconds + r.engine_seconds, 1e-9)
                    ge100 = 100 * sum(c >= 100 for c in r.answer_counts) / n
                    print(
                        f"| {r.type} | {r.kept} | {r.attempts} | {100 * r.useful_share:.1f} | "
                        f"{1000 * r.store_seconds / n:.2f} | {1000 * r.engine_seconds / n:.2f} | {qps:.0f} | "
                        f"{s['answers_median']:g} | {s['answers_p90']:g} | {s['answers_max']} | {ge100:.0f} |"
                    )
                print()
    finally:
        if private:
            embedded.stop()


if __name__ == "__main__":
    main()
