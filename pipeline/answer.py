"""The answering stage: a query set in, an answers file out, for any method (:mod:`pipeline.methods`).

Queries are batched by type (one shape per batch) and each batch goes through ``method.utilities``; the
rows kept per query (top 100 and every ground-truth answer) and the file are :mod:`pipeline.formats.answers`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from pipeline.atomic import check_folder
from pipeline.errors import PipelineError
from pipeline.formats.answers import TOP_K, rows_from_utilities, write_answers
from pipeline.formats.queryset import QuerySet, checksum
from pipeline.methods.base import Method

if TYPE_CHECKING:
    from pipeline.executors import Executor

# which split each role of a query set must come from (anything else leaks the test set into selection)
ROLE_SPLITS = {"--valid-queries": "valid", "--train-queries": "train"}


def check_role(qs: QuerySet | None, option: str, dataset: str, force: bool = False) -> None:
    """A query set given as ``option`` must be of ``dataset`` and of the split that role needs (valid for
    selection, train for fitting); ``force`` accepts another split (it is recorded in the answers file)."""
    if qs is None:
        return
    if qs.meta["dataset"] != dataset:
        raise PipelineError(f"{option} {qs.path}: a query set of '{qs.meta['dataset']}', not '{dataset}'")
    want, got = ROLE_SPLITS[option], qs.meta.get("split")
    if got != want and not force:
        raise PipelineError(
            f"{option} {qs.path}: a query set of the {got} split, not {want}; choosing on it would leak "
            f"{got} queries into the result (pass --allow-split-mismatch to do it anyway; it is recorded)"
        )


def query_set_record(qs: QuerySet) -> dict[str, Any]:
    """How an answers file names a query set it used: path, split and content checksum."""
    return {"path": str(qs.path), "split": qs.meta.get("split"), "checksum": checksum(qs.frame)}


def _truth(frame: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray]]:
    """Ground truth per query (design section 1: the answers on the split's graph, best first)."""
    return [
        (np.asarray(a, dtype=np.int64), np.asarray(u, dtype=np.float64))
        for a, u in zip(frame["answers_hard"], frame["utilities_hard"], strict=True)
    ]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def answer_query_set(
    queries: QuerySet,
    method: Method,
    batch_size: int = 256,
    k: int = TOP_K,
    progress: bool = True,
    executor: Executor | None = None,
) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """Answer every query of a query set with ``method``, batched by type.

    Returns the answers rows (:mod:`pipeline.formats.answers`) and per type {queries, seconds, queries_per_s}
    (seconds of ``method.utilities`` only, summed over the workers). executor: where the batches run
    (default: this process); a remote one builds the method once per actor from ``method.portable()``
    (SRC: memory-maps the export) and the rows are merged in batch order, so the file is the same."""
    from pipeline.executors import ActorState, LocalExecutor, Task

    frame = queries.frame
    parsed = queries.queries()
    truth = _truth(frame)
    ids, types = frame["id"].astype(str).tolist(), frame["type"].astype(str).tolist()
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(types):
        groups.setdefault(t, []).append(i)
    tasks = []
    workers = executor.workers or 1 if executor is not None else 1
    for qtype, idx in groups.items():
        # a batch cut in two costs more per query (a relation's stream serves fewer rows), so types are cut
        # only where there are more workers than types; then each into one part per worker (the types'
        # costs differ 300x: the slowest type's parts, not the count of tasks, set the wall time)
        size = batch_size if workers <= len(groups) else min(batch_size, -(-len(idx) // workers))
        for s in range(0, len(idx), size):
            chunk = idx[s : s + size]
            batch = AnswerBatch(qtype, [ids[i] for i in chunk], [parsed[i] for i in chunk], [truth[i] for i in chunk], k)
            tasks.append(Task(f"batch {len(tasks)} ({qtype}, queries {chunk[0]}..{chunk[-1]})", batch, len(chunk)))
    build, args = method.portable()
    state = ActorState(build, args, local=method)
    parts: list[pd.DataFrame | None] = [None] * len(tasks)
    stats = {qtype: {"queries": len(idx), "seconds": 0.0} for qtype, idx in groups.items()}
    run = (executor or LocalExecutor()).map_on_actors(
        answer_batch, tasks, state, desc="answer", unit="query", progress=progress
    )
    spans: dict[str, list[float]] = {}
    for i, (rows, seconds, span) in run:
        parts[i] = rows
        stats[tasks[i].args.qtype]["seconds"] += seconds
        got = spans.setdefault(tasks[i].args.qtype, [*span])
        got[0], got[1] = min(got[0], span[0]), max(got[1], span[1])
    for qtype, s in stats.items():
        s["queries_per_s"] = s["queries"] / s["seconds"] if s["seconds"] else 0.0
        if workers > 1:  # the type's wall-clock span over all workers (first start to last end)
            wall = spans[qtype][1] - spans[qtype][0]
            s["wall_queries_per_s"] = s["queries"] / wall if wall > 0 else 0.0
    if not parts:
        return rows_from_utilities([], [], torch.zeros(0, method.n_entities), [], k), stats
    return pd.concat(parts, ignore_index=True), stats


@dataclass(frozen=True)
class AnswerBatch:
    """One task of the answering stage: queries of one type with their ids and ground truth."""

    qtype: str
    ids: list[str]
    queries: list[Any]
    truth: list[tuple[np.ndarray, np.ndarray]]
    k: int


def answer_batch(method: Method, batch: AnswerBatch) -> tuple[pd.DataFrame, float, tuple[float, float]]:
    """A task: the batch's answers rows, the seconds ``method.utilities`` took (the rows are made where
    the utilities are, so only the kept rows travel back, never a (B, |E|) matrix) and the task's
    (start, end) on the machine's wall clock (time.time: comparable across worker processes)."""
    start = time.time()
    _sync(method.device)
    t0 = time.perf_counter()
    util = method.utilities(batch.queries)
    _sync(method.device)
    seconds = time.perf_counter() - t0
    rows = rows_from_utilities(batch.ids, [batch.qtype] * len(batch.ids), util, batch.truth, batch.k)
    return rows, seconds, (start, time.time())


def selection_score(frame: pd.DataFrame) -> float:
    """The single number calibration selects on: the mean over metrics of their type-averaged values x100."""
    from pipeline.evaluate import query_metrics, summarise

    summary = summarise(query_metrics(frame))
    vals = [v["avg"] for v in summary.values() if not np.isnan(v["avg"])]
    return float(np.mean(vals)) if vals else -np.inf


def answers_path(qs: QuerySet, method: Method, out_dir: str | Path | None) -> Path:
    """Where ``pipeline answer`` writes: OUT/<query set stem>.<method label>.parquet (default OUT: an
    ``answers/`` folder beside the query set). ArtifactError when OUT is an existing file."""
    out = Path(out_dir) if out_dir else Path(str(qs.path)).parent / "answers"
    check_folder(out, "--out")
    return out / f"{Path(str(qs.path)).stem}.{method.label.replace(' ', '.')}.parquet"


def run_answer(
    qs: QuerySet,
    method: Method,
    out_dir: str | Path | None = None,
    used: dict[str, QuerySet | None] | None = None,
    progress: bool = True,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """`pipeline answer`: answer ``qs`` with a built ``method`` and write the answers file.

    used: the other query sets the method was built with ({"valid": ..., "train": ...}), recorded by
    path, split and checksum. executor: where the batches run (:func:`answer_query_set`). Returns {path, method, seconds, throughput, settings}."""
    if qs.meta["dataset"] != method.dataset:
        raise PipelineError(f"{qs.path}: a query set of '{qs.meta['dataset']}', but the method answers '{method.dataset}'")
    path = answers_path(qs, method, out_dir)
    t0 = time.perf_counter()
    frame, stats = answer_query_set(qs, method, progress=progress, executor=executor)
    seconds = time.perf_counter() - t0
    from pipeline.provenance import provenance

    settings = method.settings()
    meta = {
        "dataset": method.dataset,
        "method": method.label,
        "query_set": str(qs.path),
        "query_set_checksum": checksum(qs.frame),
        "split": qs.meta.get("split"),
        "alpha": qs.meta.get("alpha"),
        "beta": qs.meta.get("beta"),
        "n_queries": len(qs),
        "n_entities": method.n_entities,
        "k": TOP_K,
        "throughput": stats,
        "used": {role: query_set_record(q) for role, q in (used or {}).items() if q is not None},
        **settings,
        "provenance": provenance(settings, settings.get("seed")),
        **({"executor": executor.describe()} if executor is not None and not executor.in_process else {}),
    }
    write_answers(frame, path, meta)
    return {"path": str(path), "method": method.label, "seconds": seconds, "throughput": stats, **settings}
