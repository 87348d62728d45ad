"""The answering stage: a query set in, an answers file out, for any method (:mod:`pipeline.methods`).

:func:`answer_queries` is its one entry: the CLI (``answer``, ``answer --from-store``), the Python API,
``reproduce`` (SRC and the baselines) and the studies call it. It builds the method from
:class:`~pipeline.methods.base.MethodOptions` (checked against the method's declared capabilities; the
calibration's selection score is made here and handed to the method, which never imports this stage),
answers, and optionally explains (``--explain K``) and writes back (``--write-back``).

Queries are batched by type (one shape per batch) and each batch goes through ``method.utilities``; the
rows kept per query (top 100 and every ground-truth answer) and the file are :mod:`pipeline.formats.answers`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd
import torch

from pipeline.core.atomic import check_folder
from pipeline.core.errors import PipelineError, option
from pipeline.core.options import check
from pipeline.core.versions import KEY as VERSION_KEY
from pipeline.core.versions import check_versions
from pipeline.engine import kernels
from pipeline.formats.answers import (
    PAPER_RANK,
    TOP_K,
    RankedRows,
    entities_to_rank,
    ranked_rows,
    rows_frame,
    rows_from_utilities,
    write_answers,
)
from pipeline.formats.queryset import QuerySet, checksum, read_query_set
from pipeline.methods.base import BuildInputs, Method
from pipeline.methods.options import MethodOptions
from pipeline.stages import answer_plan
from pipeline.stages.options import AnswerOptions

if TYPE_CHECKING:
    from pipeline.executors import Executor

# which split each role of a query set must come from (anything else leaks the test set into selection)
ROLE_SPLITS = {"valid_queries": "valid", "train_queries": "train"}


def check_role(qs: QuerySet | None, role: str, dataset: str, force: bool = False) -> None:
    """A query set given as option ``role`` (valid_queries, train_queries) must be of ``dataset`` and of the
    split that role needs (valid for selection, train for fitting); ``force`` accepts another split (it is
    recorded in the answers file)."""
    if qs is None:
        return
    if qs.meta["dataset"] != dataset:
        raise PipelineError(f"{option(role, qs.path)}: a query set of '{qs.meta['dataset']}', not '{dataset}'")
    want, got = ROLE_SPLITS[role], qs.meta.get("split")
    if got != want and not force:
        raise PipelineError(
            f"{option(role, qs.path)}: a query set of the {got} split, not {want}; choosing on it would leak "
            f"{got} queries into the result (pass {option('allow_split_mismatch', True)} to do it anyway; it is recorded)"
        )


def query_set_record(qs: QuerySet) -> dict[str, Any]:
    """How an answers file names a query set it used: path, split and content checksum."""
    return {"path": str(qs.path), "split": qs.meta.get("split"), "checksum": checksum(qs.frame)}


def _truth(frame: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """Ground truth per query (design section 1: the answers on the split's graph, best first), and the list
    the paper protocol reads (``answers_paper``; None for a query set without it)."""
    paper = frame["answers_paper"] if "answers_paper" in frame.columns else [None] * len(frame)
    return [
        (np.asarray(a, dtype=np.int64), np.asarray(u, dtype=np.float64),
         None if p is None else np.asarray(p, dtype=np.int64))
        for a, u, p in zip(frame["answers_hard"], frame["utilities_hard"], paper, strict=True)
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
    tasks, chunks = [], []
    workers = (executor.workers or 1) if executor is not None else 1
    sizes = method.relation_sizes() if workers > len(groups) else None
    for qtype, idx in groups.items():
        # a batch cut in two costs more per query (a relation's stream serves fewer rows), so types are cut
        # only where there are more workers than types; then each into one part per worker (the types'
        # costs differ 300x: the slowest type's parts, not the count of tasks, set the wall time), the
        # queries that share their streamed relations in one part (answer_plan.cut)
        if workers <= len(groups):
            parts_of_type = [idx]
        else:
            size = min(batch_size, -(-len(idx) // workers))
            parts_of_type = answer_plan.cut(idx, parsed, -(-len(idx) // size), sizes)
        # no batch above batch_size queries (the (B, |E|) states), whatever the cut
        cuts = [part[s : s + batch_size] for part in parts_of_type for s in range(0, len(part), batch_size)]
        for chunk in cuts:
            batch = AnswerBatch(qtype, [ids[i] for i in chunk], [parsed[i] for i in chunk], [truth[i] for i in chunk], k)
            tasks.append(Task(f"batch {len(tasks)} ({qtype}, {len(chunk)} queries from {chunk[0]})", batch, len(chunk)))
            chunks.append(chunk)
    build, args = method.portable()
    state = ActorState(build, args, local=method)
    parts: list[pd.DataFrame | None] = [None] * len(tasks)
    stats = {qtype: {"queries": len(idx), "seconds": 0.0} for qtype, idx in groups.items()}
    # the heaviest tasks first (longest processing time first): workers that take the light ones last
    # finish together, instead of one worker starting the set's slowest type when the others are done.
    # The rows are merged in task order, so the file does not depend on the order they ran in.
    order = sorted(range(len(tasks)), key=lambda j: -task_cost(tasks[j].args))
    if workers == 1 and (executor is None or executor.in_process) and kernels.loading():
        # one task at a time in this process while the compiled steps load beside it: the lightest first,
        # so that this thread answers them while the load ends instead of waiting for it at the heaviest
        # (the first batch, PPI5k's and CN15k's im, waited 0.1-0.3 s; docs/studies/where-a-fresh-process-spends-its-time.md)
        order.reverse()
    run = (executor or LocalExecutor()).map_on_actors(
        answer_batch, [tasks[j] for j in order], state, desc="answer", unit="query", progress=progress
    )
    spans: dict[str, list[float]] = {}
    # each query's place in the file (grouped by type, in order): where a cut part holds queries out of
    # that order (answer_plan), every row is put back at its query's place
    place = {q: j for j, q in enumerate(q for idx in groups.values() for q in idx)}
    where = [[place[q] for q in chunk] for chunk in chunks]
    flat = [w for chunk in where for w in chunk]
    permuted = any(b < a for a, b in zip(flat, flat[1:], strict=False))
    positions: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(tasks)
    for ran, (ranked, seconds, span) in run:
        i = order[ran]
        batch = tasks[i].args
        parts[i] = rows_frame(batch.ids, [batch.qtype] * len(batch.ids), batch.truth, ranked)
        if permuted:
            positions[i] = np.repeat(np.asarray(where[i], dtype=np.int64), ranked.counts)
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
    frame = pd.concat(parts, ignore_index=True)
    if PAPER_RANK in frame.columns:  # a batch of queries without the paper's list has no such column
        frame[PAPER_RANK] = frame[PAPER_RANK].fillna(0).astype(np.int32)
    if permuted:  # the rows in the order of the queries grouped by type, whatever parts the types were cut in
        frame = frame.take(np.argsort(np.concatenate(positions), kind="stable")).reset_index(drop=True)
    return frame, stats


def query_cost(query: Any) -> int:
    """A rough relative cost of answering one query of this shape (for ordering tasks, never for
    results): an atom between two variables streams its relation's facts for the batch (~10x an atom
    with an anchor), and two or more between the same two variables (a multi-edge) cost ~3x that again
    (their shared entries). Measured on CN15k's test set (engine seconds per 100 queries): 2m 1.24, im
    1.18, 2p 0.41, ip 0.32, up 0.29, inp 0.28, 3in 0.01."""
    streams = answer_plan.streamed(query)  # the atoms between two variables, by pair of variables
    atoms = sum(len(conj.atoms) for conj in getattr(query, "conjunctions", ()))
    linked = sum(len(rels) for rels in streams)
    cost = (atoms - linked) + 10 * linked + sum(30 * (len(rels) - 1) for rels in streams)
    return max(cost, 1)


def task_cost(batch: AnswerBatch) -> float:
    """A batch's rough cost: its queries' shapes (query_cost, the engine) plus the rows it returns (every
    ground-truth answer has one: a CN15k 3in batch makes 0.84M rows, ~0.5 s to build and send back)."""
    engine = query_cost(batch.queries[0]) * len(batch.queries) if batch.queries else 0
    rows = sum(len(entities_to_rank(t)) for t in batch.truth) + batch.k * len(batch.queries)
    return engine + rows / 2000


@dataclass(frozen=True)
class AnswerBatch:
    """One task of the answering stage: queries of one type with their ids and ground truth."""

    qtype: str
    ids: list[str]
    queries: list[Any]
    truth: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]
    k: int


def answer_batch(method: Method, batch: AnswerBatch) -> tuple[RankedRows, float, tuple[float, float]]:
    """A task: what the batch's answers rows need of its utilities (made where the utilities are, so
    only the kept rows' ranks travel back, never a (B, |E|) matrix; the stage adds the ids and truths:
    rows_frame), the seconds ``method.utilities`` took and the task's (start, end) on the machine's wall
    clock (time.time: comparable across worker processes)."""
    start = time.time()
    _sync(method.device)
    t0 = time.perf_counter()
    util = method.utilities(batch.queries)
    _sync(method.device)
    seconds = time.perf_counter() - t0
    ranked = ranked_rows(util, [entities_to_rank(t) for t in batch.truth], batch.k)
    return ranked, seconds, (start, time.time())


def selection_score(frame: pd.DataFrame) -> float:
    """The single number calibration selects on: the mean over metrics of their type-averaged values x100."""
    from pipeline.stages.evaluate import query_metrics, summarise

    summary = summarise(query_metrics(frame))
    vals = [v["avg"] for v in summary.values() if not np.isnan(v["avg"])]
    return float(np.mean(vals)) if vals else -np.inf


def answers_path(qs: QuerySet, method: Method, out_dir: str | Path | None) -> Path:
    """Where ``pipeline answer`` writes: OUT/<query set stem>.<method label>.parquet (default OUT: an
    ``answers/`` folder beside the query set). ArtifactError when OUT is an existing file."""
    out = Path(out_dir) if out_dir else Path(str(qs.path)).parent / "answers"
    check_folder(out, "out")
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
    from pipeline.core.provenance import provenance

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


# ------------------------------------------------------------------------------------------ the one entry


class AnswerReport(TypedDict, total=False):
    """What :func:`answer_queries` returns (and ``pipeline answer --json`` prints): the answers file's
    path, the method's label, seconds, throughput per type, the method's settings (delta, calibration...),
    plus ``witnesses`` (the witnesses file) and ``written_back`` ({answers, witnesses, atoms}) when asked."""

    path: str
    method: str
    seconds: float
    throughput: dict[str, dict[str, float]]
    witnesses: str
    written_back: dict[str, int]


def method_class(options: MethodOptions) -> type[Method]:
    """The method class ``options`` name (default: SRC, or the baseline that trained ``options.model``)."""
    from pipeline.methods.qe import QueryEmbedding
    from pipeline.methods.registry import METHODS

    if options.method is not None:
        return METHODS[options.method]
    return QueryEmbedding if options.model is not None else METHODS["src"]


def check_method_options(cls: type[Method], options: MethodOptions, explain: int = 0, any_shape: bool = False) -> None:
    """The option rules every method follows, read from its declared capabilities (PipelineError names the
    option and the methods that take it)."""
    from pipeline.methods.registry import METHODS

    caps = cls.capabilities
    name = getattr(cls, "name", "a query-embedding baseline")  # QueryEmbedding: the run's model, not read yet

    def takers(flag: str) -> str:
        names = [n for n in METHODS.names() if getattr(METHODS[n].capabilities, flag)]
        return ", ".join(names) or "no method"

    def source(c: Any) -> str:
        return f"{option(c.source)} {c.source_what}"

    if getattr(options, caps.source) is None:
        raise PipelineError(f"{option('method', name)} answers from {source(caps)}: give it "
                            f"({', '.join(f'{source(METHODS[n].capabilities)} for {n}' for n in METHODS.names())})")
    if options.calibration != "none" and not caps.calibration:
        raise PipelineError(f"{option('calibration')} applies to {takers('calibration')} only; {name} is not calibrated")
    if explain and not caps.explain:
        raise PipelineError(f"{option('explain')} applies to {takers('explain')} only: {name} has no witnesses")
    if options.union is not None and not caps.union:
        raise PipelineError(f"{option('union')} applies to {takers('union')} only ({name} answers disjunctions exactly)")
    if any_shape and not caps.any_shape:
        raise PipelineError(f"queries from the store may have any shape: use {takers('any_shape')} "
                            f"({name} answers the registered query types only)")


def valid_score(valid: QuerySet) -> Callable[[Method], float]:
    """The selection score of a built method on the valid queries (what calibration chooses with): the
    score of the answers file it would write (:func:`selection_score`), computed in one pass for many
    variants (:class:`pipeline.stages.selection.ValidScorer`, ``.many(methods)``)."""
    from pipeline.stages.selection import ValidScorer

    return ValidScorer(valid)


def _query_set(qs: QuerySet | str | Path | None, what: str = "queries") -> QuerySet | None:
    if qs is not None and not isinstance(qs, (QuerySet, str, Path)):
        raise PipelineError(f"{option(what)}: expected a query set or its file, got {type(qs).__name__}")
    return qs if qs is None or isinstance(qs, QuerySet) else read_query_set(qs)


def answer_queries(
    queries: QuerySet | str | Path, method: Method | MethodOptions, options: AnswerOptions | None = None
) -> AnswerReport:
    """Answer a query set with any method and write the answers file; optionally explain and write back.

    method: a built :class:`Method`, or :class:`MethodOptions` to build one (its option rules checked
    against the method's capabilities; calibration fitted on the valid/train sets of ``options``).
    The stage opens the executor ``options`` name (every core by default), answers on it and closes it.
    Returns the :class:`AnswerReport` (the answers file at report["path"])."""
    from pipeline.executors import answer_executor

    options = options if options is not None else AnswerOptions()
    if isinstance(method, MethodOptions):  # the query sets a calibration reads: refused where none reads them
        check(options, context={"calibration": ("calibration", method.calibration)})
    check_folder(options.out, "out")  # refused before any fitting starts
    if queries is None:
        raise PipelineError(f"{option('queries')}: give a query set or its file")
    qs = _query_set(queries)
    assert qs is not None
    dataset = qs.meta["dataset"]
    valid, train = _query_set(options.valid_queries, "valid_queries"), _query_set(options.train_queries, "train_queries")
    check_role(valid, "valid_queries", dataset, options.allow_split_mismatch)
    check_role(train, "train_queries", dataset, options.allow_split_mismatch)
    from contextlib import nullcontext

    given = not isinstance(options.executor, str)  # an open executor: its caller closes it
    opened = nullcontext(options.executor) if given else answer_executor(options.executor, options.address, options.workers)
    with opened as executor:
        if isinstance(method, MethodOptions):
            cls = method_class(method)
            check_method_options(cls, method, options.explain, any_shape=bool(qs.meta.get("store_set")))
            # remote actors each load the method's files; the driver needs them only to fit or to explain
            load = bool(options.explain) or executor.in_process or executor.shares_memory
            inputs = BuildInputs(dataset=dataset, valid=valid, train=train,
                                 score=valid_score(valid) if valid is not None else None,
                                 progress=options.output, load=load)
            built = cls.from_options(method, inputs)
        else:
            built = method
            if options.explain and not built.capabilities.explain:
                raise PipelineError(f"{option('explain')}: {built.name} has no witnesses")
        # every file read is of one version of the data set (the ids mean the same entities everywhere)
        check_versions(dataset, [
            (f"the query set {qs.path}", qs.meta.get(VERSION_KEY)),
            *([built.made_from()] if built.made_from() is not None else []),
            *((f"the {role} query set {q.path}", q.meta.get(VERSION_KEY)) for role, q in (("valid", valid), ("train", train))
              if q is not None),
            # the witnesses name entities by the data set as it is now
            *([(f"the data set '{dataset}' as it is now", _current_version(dataset))] if options.explain else []),
        ])
        if executor.in_process and options.keep_heap:  # answered here: reuse the heap it frees, as workers do
            from pipeline.core.heap import keep_freed_heap

            keep_freed_heap()
        report: AnswerReport = run_answer(qs, built, options.out, {"valid": valid, "train": train},
                                          options.output, executor)  # type: ignore[assignment]
    if options.explain:
        report["witnesses"] = explain_answers_file(report["path"], qs, built, options.explain, options.output)
    if options.write_back:
        from pipeline.stages.writeback import write_back_file

        report["written_back"] = write_back_file(report["path"], options.store)
    return report


def _current_version(dataset: str) -> str:
    from loaders import load
    from pipeline.store.ingest import content_key

    return content_key(load(dataset))


def explain_answers_file(path: str | Path, qs: QuerySet, method: Any, k: int, progress: bool = True) -> str:
    """``--explain K``, after an answers file is written: its rows gain the query text with names and each
    entity's name (optional columns of :mod:`pipeline.formats.answers`; the file is rewritten atomically
    with the same metadata), and the witnesses of every query's top-K answers (by the engine, over the
    same calibrated adjacency and the same lowered alphas as the answers) go to ``<stem>.witnesses.parquet``
    (:mod:`pipeline.formats.witnesses`). method: the method that wrote the file (SRC: adjacency, delta).
    Returns the witnesses file's path."""
    from loaders import load
    from pipeline.core.progress import output
    from pipeline.formats import answers as col
    from pipeline.formats.answers import read_answers, write_answers
    from pipeline.formats.witnesses import witnesses_path, write_witnesses
    from pipeline.softquery import Vocabulary, to_text

    vocab = Vocabulary.from_kg(load(method.dataset))
    ans = read_answers(path)
    queries = dict(zip(qs.frame["id"].astype(str), qs.queries(), strict=True))
    texts = {qid: to_text(q, vocab) for qid, q in queries.items()}
    frame = ans.frame
    frame[col.QUERY_TEXT] = frame[col.QUERY_ID].map(texts)
    frame[col.ENTITY_NAME] = [vocab.entities[int(e)] for e in frame[col.ENTITY]]
    write_answers(frame, path, ans.meta)
    rows: list[dict[str, Any]] = []
    # answers only (finite u > 0), best first: rows_of numbers the witnesses by this order
    top = frame[(frame[col.RANK] <= k) & (frame[col.UTILITY] > 0)].sort_values([col.QUERY_ID, col.RANK], kind="stable")
    by_query = {qid: g[col.ENTITY].tolist() for qid, g in top.groupby(col.QUERY_ID, sort=False)}
    with output(progress).bar(by_query.items(), desc="explain", unit="query") as bar:
        rows += _explain_rows(bar, queries, texts, method, vocab)
    meta = {"dataset": method.dataset, "method": method.label, "answers": str(path), "k": int(k)}
    return str(write_witnesses(rows, witnesses_path(path), meta))


def _explain_rows(bar: Any, queries: dict, texts: dict, method: Any, vocab: Any) -> list:
    """The witness rows of each (query id, entities) of ``bar``."""
    from pipeline.engine.witness import find_witnesses
    from pipeline.formats.witnesses import rows_of
    from pipeline.methods.src.delta import lower_alphas
    from pipeline.stages.witness_records import PREDICTED, witness_record

    rows: list = []
    for qid, ents in bar:
        q = lower_alphas(queries[qid], float(getattr(method, "delta", 0.0)))
        ws = find_witnesses(q, method.adjacency, [int(e) for e in ents])
        ends = [[(u.head, u.tail) for u in w.atoms] for w in ws]
        rows += rows_of(qid, texts[qid], [witness_record(w, q, vocab, PREDICTED) for w in ws], ends)
    return rows
