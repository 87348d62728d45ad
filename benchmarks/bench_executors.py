"""Local vs Ray executors on the two heavy stages: wall seconds, identical output checked, load average.

    # a whole export through pipeline.stages.export.export_adjacency, local then Ray with 1 and 2 workers
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_executors.py export RUN_DIR --threshold 0.1 \
        --workers 1 2 --out /tmp/bench-exec
    # a slice of relations (when the whole export does not fit the time): the same shard tasks, scored
    # through the executor, concatenated; compared with the single-process scoring loop of those relations
    python benchmarks/bench_executors.py export RUN_DIR --threshold 0.2 --top-k 10 --relations 0:6 --workers 1 2
    # answering a query set on an export (SRC, no calibration)
    python benchmarks/bench_executors.py answer QUERIES --adjacency EXPORT_DIR --workers 1 2

Each Ray row starts its own local cluster (``ray.init(num_cpus=workers)``); "start s" is that start-up,
"wall s" the stage on the running cluster (worker processes, their imports, the model or export sent or
loaded per worker, the tasks, the driver's merge); for local answering "start s" is the driver's load of
the export (a Ray driver only reads the manifest: each actor loads the export). Speedup = local wall / Ray wall. Prints a markdown
table and, with --json FILE, the rows.
"""

from __future__ import annotations

import argparse
import filecmp
import gc
import json
import os
import platform
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _ray(workers: int) -> tuple[Any, float]:
    from pipeline.executors import RayExecutor

    t0 = time.perf_counter()
    ex = RayExecutor(workers=workers)
    ex._cluster()
    return ex, time.perf_counter() - t0


def bench_export(args: argparse.Namespace) -> list[dict[str, Any]]:
    from pipeline.stages.export import export_adjacency, write_export
    from pipeline.stages.options import ExportOptions

    rows: list[dict[str, Any]] = []
    if args.relations:
        return bench_export_slice(args)
    ref = args.out / "local"
    shutil.rmtree(ref, ignore_errors=True)
    load0 = _load()
    t0 = time.perf_counter()
    man = export_adjacency(args.run, threshold=args.threshold, out=ref, top_k=args.top_k, progress=False)
    local = time.perf_counter() - t0
    base = {"stage": "export", "input": f"{args.run.name} T={args.threshold:g}" + (f" k={args.top_k}" if args.top_k else ""),
            "tasks": "", "facts": man["nnz"]}
    rows.append({**base, "executor": "local", "workers": 1, "start s": 0.0, "wall s": local, "identical": "ref",
                 "speedup": 1.0, "load before/after": f"{load0} / {_load()}"})
    for w in args.workers:
        out = args.out / f"ray{w}"
        shutil.rmtree(out, ignore_errors=True)
        load0 = _load()
        ex, start = _ray(w)
        try:
            t0 = time.perf_counter()
            m = write_export(args.run, ExportOptions(threshold=args.threshold, out=out, top_k=args.top_k, progress=False), ex)
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        same = all(filecmp.cmp(ref / r["file"], out / r["file"], shallow=False) for r in man["relations"])
        n_tasks = len(m["relations"]) * -(-m["n_entities"] // _rows(args.run))
        rows.append({**base, "executor": "ray", "workers": w, "start s": start, "wall s": wall, "tasks": n_tasks,
                     "identical": "bytes" if same else "DIFFERENT", "speedup": local / wall,
                     "load before/after": f"{load0} / {_load()}"})
        shutil.rmtree(out, ignore_errors=True)
    return rows


def _rows(run: Path) -> int:
    from pipeline.models import load_run

    model = load_run(run, device="cpu")
    return model.block_rows(model.n_entities)


def bench_export_slice(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Relations a..b-1 only: the single-process loop (score_heads) against the executor's shard tasks."""
    import numpy as np
    import torch

    from pipeline.executors import Task
    from pipeline.formats.adjacency import FORMAT, read_shard, shard_filesystem
    from pipeline.models import load_run
    from pipeline.stages.export import _shard_specs, score_heads, score_shard

    a, b = (int(x) for x in args.relations.split(":"))
    model = load_run(args.run, device="cpu")
    n, rows_per_block = model.n_entities, model.block_rows(model.n_entities)
    meta = {"format": FORMAT, "dataset": "bench", "model_hash": model.content_hash(), "threshold": repr(args.threshold),
            "n_entities": str(n), "n_relations": str(model.n_relations), "model": model.name,
            "top_k": str(args.top_k) if args.top_k else ""}
    load0 = _load()
    t0 = time.perf_counter()
    tails = torch.arange(n)
    ref = []
    with torch.no_grad():
        for r in range(a, b):
            for _, cols in score_heads(model, r, 0, n, rows_per_block, args.threshold, args.top_k, tails):
                if cols is not None:
                    ref.append(cols)
    local = time.perf_counter() - t0
    ref_cat = [np.concatenate([c[i] for c in ref]) for i in range(3)]
    base = {"stage": "export", "input": f"{args.run.name} T={args.threshold:g}" + (f" k={args.top_k}" if args.top_k else "")
            + f" relations {a}..{b - 1}", "facts": len(ref_cat[0])}
    rows = [{**base, "executor": "local", "workers": 1, "tasks": "", "start s": 0.0, "wall s": local, "identical": "ref",
             "speedup": 1.0, "load before/after": f"{load0} / {_load()}"}]
    for w in args.workers:
        shards = args.out / f"shards-ray{w}"
        shutil.rmtree(shards, ignore_errors=True)
        fs, base_path = shard_filesystem(shards)
        fs.create_dir(base_path, recursive=True)
        specs = [s for s in _shard_specs(model, meta, rows=rows_per_block, threshold=args.threshold, top_k=args.top_k, pruned=False, fs=fs, base=base_path, shard_heads=None, device=None)
                 if a <= s.r < b]
        tasks = [Task(s.path, s, s.stop - s.start) for s in specs]
        load0 = _load()
        ex, start = _ray(w)
        try:
            t0 = time.perf_counter()
            list(ex.map(score_shard, tasks, model, progress=False))
            got = []
            for s in specs:  # the driver's concatenation, in head order
                batches, _ = read_shard(fs, s.path, s.meta)
                got += [tuple(x.to_numpy() for x in batch.columns) for batch in batches]
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        got_cat = [np.concatenate([c[i] for c in got]) for i in range(3)]
        same = all(np.array_equal(x, y) for x, y in zip(ref_cat, got_cat, strict=True))
        rows.append({**base, "executor": "ray", "workers": w, "tasks": len(tasks), "start s": start, "wall s": wall,
                     "identical": "arrays" if same else "DIFFERENT", "speedup": local / wall,
                     "load before/after": f"{load0} / {_load()}"})
        shutil.rmtree(shards, ignore_errors=True)
    scores = (b - a) * n * n
    for r in rows:
        r["s per 1e9 scores"] = r["wall s"] / scores * 1e9
    return rows


def bench_answer(args: argparse.Namespace) -> list[dict[str, Any]]:
    import pandas as pd

    from pipeline.formats.queryset import read_query_set
    from pipeline.methods import SRC
    from pipeline.stages.answer import answer_query_set

    qs = read_query_set(args.queries)
    t0 = time.perf_counter()
    method = SRC.load(args.adjacency, qs.meta["dataset"])
    build = time.perf_counter() - t0
    counts = qs.frame["type"].value_counts()
    base = {"stage": "answer", "input": f"{Path(args.queries).name} ({len(qs)} queries, {len(counts)} types, "
            f"{counts.min()}-{counts.max()} per type) on {Path(args.adjacency).name}", "facts": method.manifest.get("nnz", "")}
    load0 = _load()
    t0 = time.perf_counter()
    ref, _ = answer_query_set(qs, method, progress=False)
    local = time.perf_counter() - t0
    rows = [{**base, "executor": "local", "workers": 1, "tasks": "", "start s": build, "wall s": local, "identical": "ref",
             "speedup": 1.0, "load before/after": f"{load0} / {_load()}"}]
    del method  # the driver's copy of the export: a Ray driver holds none
    gc.collect()
    for w in args.workers:
        load0 = _load()
        ex, start = _ray(w)
        try:
            t0 = time.perf_counter()
            # as `pipeline answer --executor ray` does: the driver only checks the manifest, actors load
            lazy = SRC.load(args.adjacency, qs.meta["dataset"], load=False)
            got, _ = answer_query_set(qs, lazy, progress=False, executor=ex)
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        try:
            pd.testing.assert_frame_equal(ref, got)
            same = "rows"
        except AssertionError:
            same = "DIFFERENT"
        rows.append({**base, "executor": "ray", "workers": w, "tasks": len(counts), "start s": start, "wall s": wall,
                     "identical": same, "speedup": local / wall, "load before/after": f"{load0} / {_load()}"})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    cols = ["stage", "input", "executor", "workers", "tasks", "start s", "wall s", "speedup", "identical", "load before/after"]
    if any("s per 1e9 scores" in r for r in rows):
        cols.insert(7, "s per 1e9 scores")
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else str(v)  # noqa: E731
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="stage", required=True)
    e = sub.add_parser("export")
    e.add_argument("run", type=Path)
    e.add_argument("--threshold", type=float, default=0.1)
    e.add_argument("--top-k", type=int, default=None)
    e.add_argument("--relations", default=None, help="A:B, relations A..B-1 only")
    e.add_argument("--out", type=Path, default=Path("/tmp/bench-executors"))
    q = sub.add_parser("answer")
    q.add_argument("queries", type=Path)
    q.add_argument("--adjacency", type=Path, required=True)
    for p in (e, q):
        p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
        p.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # the Ray workers run one torch thread each (Ray sets OMP_NUM_THREADS=1)
    if args.stage == "export":
        args.out.mkdir(parents=True, exist_ok=True)
        rows = bench_export(args)
    else:
        rows = bench_answer(args)
    print(f"# {platform.node()} {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"driver peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
