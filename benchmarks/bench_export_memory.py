"""Peak resident memory of answering on a neural export: after loading the export, after
indexing it for the engine, after answering a query set, with seconds per stage.

    PIPELINE_DATA=../shared/data python benchmarks/bench_export_memory.py QUERIES --adjacency EXPORT_DIR \
        [--per-type N] [--passes 1] [--threads 1] [--seed 0]

Peak RSS is the process's high-water mark (getrusage), so each figure includes every stage before it;
memory, unlike time, does not depend on the machine's load. Answering follows `pipeline answer`: the
queries of each type in batches of 256 on one index. Run it once per engine version (a checkout of the
old code runs the same file) to compare before/after. Prints a markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.engine import Adjacency, search_batch  # noqa: E402
from pipeline.formats.adjacency import load_adjacency  # noqa: E402
from pipeline.formats.queryset import read_query_set  # noqa: E402
from pipeline.softquery.types import ordered_types  # noqa: E402

BATCH = 256


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("queries")
    ap.add_argument("--adjacency", required=True)
    ap.add_argument("--per-type", type=int, default=100, help="queries per type answered (first N)")
    ap.add_argument("--passes", type=int, default=1, help="answer the queries this many times on one index")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    qs = read_query_set(args.queries)
    parsed = qs.queries()
    types = ordered_types(set(qs.frame["type"]))
    by_type = {
        t: [parsed[i] for i in np.nonzero((qs.frame["type"] == t).to_numpy())[0][: args.per_type]]
        for t in types
    }
    rows = [("start", 0.0, peak_mib())]
    t0 = time.perf_counter()
    graph, manifest = load_adjacency(args.adjacency, dataset=qs.meta["dataset"])
    rows.append(("load export", time.perf_counter() - t0, peak_mib()))
    t0 = time.perf_counter()
    adj = Adjacency.from_graph(graph)
    rows.append(("index", time.perf_counter() - t0, peak_mib()))
    per_type: dict[str, dict[str, float]] = {}
    for k in range(args.passes):  # a second pass over the same index reuses the memo (unions of pairs)
        t0 = time.perf_counter()
        with torch.no_grad():
            for t, q in by_type.items():
                t1 = time.perf_counter()
                for i in range(0, len(q), BATCH):
                    search_batch(q[i : i + BATCH], adj)
                per_type.setdefault(t, {})[f"seconds_{k + 1}"] = time.perf_counter() - t1
                per_type[t]["peak_mib"] = peak_mib()
        n_answered = sum(len(q) for q in by_type.values())
        rows.append((f"answer {n_answered} queries (pass {k + 1})", time.perf_counter() - t0, peak_mib()))

    print(
        f"{manifest['dataset']} export (threshold {manifest['threshold']}, {graph.nnz:,} facts, "
        f"{graph.head.dtype} ids), {n_answered} queries of {Path(args.queries).name}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s)\n"
    )
    print("| stage | seconds | peak RSS MiB |\n|---|---:|---:|")
    for name, sec, mib in rows:
        print(f"| {name} | {sec:.1f} | {mib:,.0f} |")
    passes = range(1, args.passes + 1)
    print("\n| type | " + " | ".join(f"seconds, pass {k}" for k in passes) + " | peak RSS MiB after |")
    print("|---|" + "---:|" * (args.passes + 1))
    for t, v in per_type.items():
        secs = " | ".join(f"{v[f'seconds_{k}']:.2f}" for k in passes)
        print(f"| {t} | {secs} | {v['peak_mib']:,.0f} |")
    print(json.dumps({"stages": rows, "per_type": per_type, "facts": graph.nnz}))


if __name__ == "__main__":
    main()
