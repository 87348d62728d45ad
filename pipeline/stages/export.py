"""The neural adjacency: every (h, r, t) whose predicted confidence is at least a threshold, as Arrow files
(design section 2). The engine reads it like an observed graph; facts not stored count as confidence 0.

The file format (and its reader, :func:`load_adjacency`) is :mod:`pipeline.formats.adjacency`. Layout:

    manifest.json        format, dataset, model_hash, threshold, n_entities, n_relations, per-relation files
    rel-0000.arrow ...   Arrow IPC file per relation: head int32, tail int32, score float32, sorted by
                         (head, tail); the schema metadata repeats format, dataset, model_hash, threshold,
                         relation, so a file separated from its manifest still says what it is.

Scores are computed in blocks of heads against all tails (on CPU or GPU), so no dense |E| x |E| matrix is
ever held. The cache is keyed by the model's content hash and the threshold: a rerun with the same model
and threshold reuses the files, a different model (even in the same run directory) never does.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import torch

from pipeline.core import atomic, config
from pipeline.core.errors import ArtifactError, PipelineError, option
from pipeline.core.progress import Output, output
from pipeline.core.provenance import provenance
from pipeline.executors.base import Executor, Task
from pipeline.formats.adjacency import (
    FORMAT,
    MANIFEST,
    SCHEMA,
    read_manifest,
    read_shard,
    relation_file,
    reusable,
    shard_file,
    shard_filesystem,
    write_manifest,
    write_shard,
)
from pipeline.models import box_bounds
from pipeline.stages.export_select import (
    BYTES_PER_FACT,
    SizeBudget,
    check_top_k,
    human_bytes,
    machine_budget,
    projected_bytes,
    select_block,
)
from pipeline.stages.options import ExportOptions

# Above this share of all (h, r, t) pairs the model calls most pairs true at the threshold: `pipeline export`
# says so in a warning (queries over it answer with nearly every entity). The guard that refuses an export
# is its size in bytes against the machine (export_select.machine_budget).
MAX_FRACTION = 1 / 3


def default_export_dir(dataset: str, model_hash: str, threshold: float, top_k: int | None = None) -> Path:
    """PIPELINE_HOME/exports/<dataset>-<hash prefix>-t<threshold>[-k<K>]: named by content, never by run name."""
    return config.home() / "exports" / (f"{dataset}-{model_hash[:16]}-t{threshold:g}" + (f"-k{top_k}" if top_k else ""))


def export_summary(man: dict[str, Any]) -> tuple[str, str | None]:
    """(the export's one-line summary, a warning or None) for a person: its size and share of all
    (h, r, t) pairs, and plainly when that share says the model calls most pairs true (facts over all pairs,
    not bytes over dense bytes: the Arrow headers alone outweigh a tiny graph's dense matrix)."""
    frac = man["nnz"] / max(1, man["n_entities"] ** 2 * man["n_relations"])
    line = (f"{man['path']}: {man['nnz']} facts, {man['bytes'] / 1e6:.1f} MB ({100 * frac:.2f}% of all (h, r, t) pairs)"
            + (" [cached]" if man["cached"] else f" in {man['seconds']:.1f} s"))
    warning = None
    if frac > MAX_FRACTION:  # fits the machine, but says little
        warning = (f"this export keeps {100 * frac:.1f}% of all (h, r, t) pairs: at threshold {man['threshold']} the "
                   "model calls most pairs true, and queries over it will answer with nearly every entity (a higher "
                   f"{option('threshold')} or a {option('top_k')} is more selective)")
    return line, warning


def export_adjacency(run_dir: str | Path, options: ExportOptions | None = None, /, **settings: Any) -> dict[str, Any]:
    """``pipeline export``: score every (h, r, t) of the run's model and keep those with confidence >=
    threshold, on the executor ``options`` names (opened and closed here). options: an
    :class:`~pipeline.stages.options.ExportOptions`, or its fields as keywords. Returns the manifest (with
    "path" and "cached": True when an existing export of the same model and threshold was reused)."""
    from pipeline.executors import make_executor

    o = options if options is not None else ExportOptions(**settings)
    with make_executor(o.executor, o.address, o.workers) as executor:
        return write_export(run_dir, o, executor)


def write_export(run_dir: str | Path, o: ExportOptions, executor: Executor | None = None) -> dict[str, Any]:
    """Score every (h, r, t) of the run's model and keep those with confidence >= ``o.threshold``: the body of
    :func:`export_adjacency`, on an ``executor`` already open (None: this process, streaming).

    run_dir: a run directory (pipeline.models.runs); the options (:class:`~pipeline.stages.options.ExportOptions`):
    out (default under PIPELINE_HOME, named by the model hash); the size guard: stop with an error, naming
    the sizes, when the export would take more bytes (12 per kept fact, extrapolated from the pairs scored so
    far) than ``max_bytes`` (default: a quarter of the memory available or half the free disk under ``out``,
    :func:`pipeline.stages.export_select.machine_budget`), off with ``allow_dense``; prune: for box models,
    skip the block pairs whose confidence bound is below the threshold (pipeline.models.box_bounds: the same
    facts; faster as far as the boxes are separated); top_k: keep only each (head, relation)'s K best tails
    that pass the threshold (:mod:`pipeline.stages.export_select`; box pruning applies to threshold-only
    exports). An executor that is not in-process (Ray) scores (relation, head block) shards as tasks
    written under ``shards`` (a folder or filesystem URI; default ``<out>.shards`` beside the export),
    reusing shards a killed run left; the same relation files result; shard_heads: heads per shard (whole
    scoring blocks; default one block; a box model's pruned export: one relation). overwrite: replace an
    export of another model, threshold or top-k at ``out`` (refused otherwise, naming what differs); an
    export of the same ones is reused, or written again where its files are damaged. prepare_seconds: once
    the export is in place (or found cached), build what the first ``pipeline answer`` on it would
    (:mod:`pipeline.stages.export_prepare`: the engine index, then the data set's multi-edge relation pairs
    for up to this many seconds; None: nothing); reported under "prepared". Returns the manifest (with
    "path" and "cached": True when an existing export of the same model and threshold was reused).
    """
    threshold, out, device, progress, block_rows = o.threshold, o.out, o.device, o.output, o.block_rows
    allow_dense, max_bytes, prune, top_k = o.allow_dense, o.max_bytes, o.prune, o.top_k
    shards, shard_heads, overwrite, prepare_seconds = o.shards, o.shard_heads, o.overwrite, o.prepare_seconds
    from pipeline.models import load_run, read_run

    if not (0.0 < threshold <= 1.0):
        raise PipelineError(
            f"{option('threshold', threshold)}: must be in (0, 1] (0 would store the dense matrix)"
        )
    check_top_k(top_k)
    atomic.check_folder(out, "out")  # before the model is loaded and scored
    run = read_run(run_dir)
    dev = config.select_device(device)
    model = load_run(run.path, device=dev)
    model_hash = model.content_hash()
    out = Path(out) if out is not None else default_export_dir(run.dataset, model_hash, threshold, top_k)
    budget = None if allow_dense else (
        SizeBudget(int(max_bytes), f"the {human_bytes(max_bytes)} allowed") if max_bytes is not None else machine_budget(out)
    )
    cached = reusable(out, model_hash, threshold, top_k)
    if cached is not None:
        size = cached["nnz"] * BYTES_PER_FACT
        if budget is not None and size > budget.bytes:  # made with the guard off: not handed out without it
            raise PipelineError(
                f"{out}: this export holds {cached['nnz']:,} facts ({human_bytes(size)}), more than its budget "
                f"of {human_bytes(budget.bytes)} ({budget.why}); choose a higher {option('threshold')} or a "
                f"{option('top_k')}, or {option('allow_dense', True)} to use it anyway"
            )
        return {**cached, "path": str(out), "cached": True, **_prepare(out, run.dataset, prepare_seconds, progress)}
    if out.exists() and not out.is_dir():
        raise ArtifactError(f"{out}: exists and is not a directory; choose another {option('out')}")
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).exists():
        raise ArtifactError(f"{out}: exists and is not an export directory; choose another {option('out')}")
    if not overwrite:
        check_replaceable(out, model_hash, threshold, top_k, run.path)

    n = model.n_entities
    tails = torch.arange(n, device=dev)
    rows = block_rows or model.block_rows(n)
    all_pairs = n * n * model.n_relations
    total = scored = 0
    meta_common = {
        "format": FORMAT,
        "dataset": run.dataset,
        "model_hash": model_hash,
        "threshold": repr(float(threshold)),
        "n_entities": str(n),
        "n_relations": str(model.n_relations),
        "model": model.name,
        "top_k": str(top_k) if top_k else "",
    }
    tmp = atomic.temp_dir(out)  # also removes what a killed export left behind
    guard = _Guard(budget, all_pairs, threshold, run.dataset) if budget is not None else None
    relations = []
    pruner = (
        box_bounds.PruneStats(heads_total=n * model.n_relations)
        if prune and top_k is None and box_bounds.supports(model)
        else None
    )
    sharded = executor is not None and (not executor.in_process or shards is not None)
    t0 = time.perf_counter()
    try:
        if sharded:
            assert executor is not None
            where = shards if shards is not None else out.with_name(out.name + ".shards")
            plan = ShardPlan(meta_common, rows, threshold, top_k, pruner is not None, shard_heads, device)
            relations, pruned_counts = _export_sharded(executor, model, tmp, plan, where, guard, progress)
            if pruner is not None:
                for k, v in pruned_counts.items():
                    setattr(pruner, k, v)
        else:
            # closed on every path: a bar left open is redrawn by the next one (a stale bar in a later cell)
            with output(progress).bar(total=model.n_relations * n, desc="export", unit="head", unit_scale=True) as bar:
                for r in range(model.n_relations):
                    path = tmp / relation_file(r)
                    schema = SCHEMA.with_metadata({**meta_common, "relation": str(r)})
                    nnz = 0
                    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
                        start = 0
                        if pruner is not None:  # box model: exact pruned scoring replaces the dense loop below
                            cols = _pruned_relation(
                                model, r, threshold, pruner, lambda k, r=r: _pruned_step(bar, k, pruner, n, guard, r),
                            )
                            if cols is not None:
                                writer.write_batch(pa.record_batch([pa.array(c) for c in cols], schema=schema))
                                nnz = len(cols[0])
                            total, scored, start = total + nnz, scored + n * n, n
                            if guard is not None:
                                guard.check(total, scored, n * n, r)
                        for n_heads, cols in score_heads(model, r, start, n, rows, threshold, top_k, tails):
                            if cols is not None:
                                writer.write_batch(pa.record_batch([pa.array(c) for c in cols], schema=schema))
                                nnz += len(cols[0])
                                total += len(cols[0])
                            scored += n_heads * n
                            if guard is not None:
                                guard.check(total, scored, n_heads * n, r)
                            bar.update(n_heads)
                    relations.append(
                        {"relation": r, "file": relation_file(r), "nnz": int(nnz), "bytes": path.stat().st_size}
                    )
        seconds = time.perf_counter() - t0
        manifest = {
            **{k: v for k, v in meta_common.items() if k not in ("threshold", "n_entities", "n_relations", "top_k")},
            "top_k": top_k,
            "threshold": float(threshold),
            "n_entities": n,
            "n_relations": model.n_relations,
            "run_dir": str(run.path),
            # the data set version the model was trained on (its content key): an export is
            # refused against another version (pipeline.core.versions); None for runs made before
            "dataset_version": run.metadata.get("dataset_version"),
            "device": dev,
            "seconds": seconds,
            "relations": relations,
            "nnz": int(sum(x["nnz"] for x in relations)),
            "bytes": int(sum(x["bytes"] for x in relations)),
            "dense_float32_bytes": 4 * n * n * model.n_relations,
            "provenance": provenance({"threshold": float(threshold), "device": dev}, inputs={"run": str(run.path)}),
            **({"executor": executor.describe()} if sharded and executor is not None else {}),
            **({"pruning": pruner.as_dict()} if pruner is not None else {}),
        }
        write_manifest(tmp, manifest)
        if out.exists():
            shutil.rmtree(out)  # an export of another model or threshold: replaced, never mixed
        os.replace(tmp, out)
        if sharded:
            _remove_shards(where, shards is None)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {**manifest, "path": str(out), "cached": False, **_prepare(out, run.dataset, prepare_seconds, progress)}


def _prepare(out: Path, dataset: str, seconds: float | None, progress: bool | Output) -> dict[str, Any]:
    """{"prepared": ...} of export_prepare.prepare_answering (nothing when seconds is None). Never fails
    the export: the export is complete without it (answering would build the same files)."""
    if seconds is None:
        return {}
    from pipeline.stages.export_prepare import prepare_answering

    try:
        done = prepare_answering(out, dataset, seconds=seconds)
    except (OSError, ValueError, RuntimeError) as exc:
        done = {"skipped": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if "skipped" not in done:  # a terminal's line (a notebook's summary says enough)
        output(progress).step_line(
            f"prepared for answering: index {done['index_s']:.1f} s, {done['pairs']} relation pairs "
            f"{done['pairs_s']:.1f} s ({done['pairs_left']} left), {done['bytes'] / 2**20:,.1f} MiB in {done['folder']}"
        )
    return {"prepared": done}


def check_replaceable(out: Path, model_hash: str, threshold: float, top_k: int | None, run_path: Path) -> None:
    """An export folder that holds an export of another model, threshold or top-k (or one whose manifest
    cannot be read) is not replaced unless asked: ArtifactError naming what differs and the option. An
    export of the same model and settings whose files are damaged may be written again."""
    if not (out / MANIFEST).exists():
        return
    try:
        held = read_manifest(out)
    except ArtifactError as exc:
        raise ArtifactError(f"{exc}; {option('overwrite', True)} replaces it, or choose another {option('out')}") from None
    differ = []
    if held.get("model_hash") != model_hash:
        differ.append(f"another model (run {held.get('run_dir', '?')}, model hash {str(held.get('model_hash'))[:12]}…; "
                      f"this one {run_path}, {model_hash[:12]}…)")
    if float(held.get("threshold", -1)) != float(threshold):
        differ.append(f"threshold {held.get('threshold')} (this one {threshold})")
    if held.get("top_k") != top_k:
        differ.append(f"top_k {held.get('top_k')} (this one {top_k})")
    if differ:
        raise ArtifactError(
            f"{out} holds an export of {', '.join(differ)}: {option('overwrite', True)} replaces it, or choose "
            f"another {option('out')}"
        )


def _pruned_relation(
    model: Any, r: int, threshold: float, stats: box_bounds.PruneStats, on_block: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A box model's relation r by exact pruned scoring, as one batch's columns (None: nothing kept)."""
    h_, t_, s_ = box_bounds.score_relation(model, r, threshold, stats=stats, on_block=on_block)
    if not len(h_):
        return None
    return (h_.to(torch.int32).cpu().numpy(), t_.to(torch.int32).cpu().numpy(), s_.to(torch.float32).cpu().numpy())


# ------------------------------------------------------------------------------------- sharded export
@dataclass(frozen=True)
class ShardSpec:
    """One task of a sharded export: relation r, heads start..stop-1, scored in blocks of ``rows``
    (``pruned``: a box model's whole relation by pruned scoring), written to ``path`` on ``fs``."""

    r: int
    start: int
    stop: int
    rows: int
    threshold: float
    top_k: int | None
    pruned: bool
    fs: Any
    path: str
    meta: dict[str, str]
    device: str | None



def score_shard(model: Any, spec: ShardSpec) -> dict[str, Any]:
    """A task: score one shard and write it (pure apart from that one file). Returns {nnz, bytes, prune}."""
    dev = config.select_device(spec.device)  # a worker with a GPU scores there; the model is sent on CPU
    model = model.to(dev)
    n = model.n_entities
    with torch.no_grad():
        if spec.pruned:
            stats = box_bounds.PruneStats(heads_total=n)
            cols = _pruned_relation(model, spec.r, spec.threshold, stats)
            batches = [cols] if cols is not None else []
            prune = {k: getattr(stats, k) for k in _PRUNE_COUNTS}
        else:
            tails = torch.arange(n, device=dev)
            heads = score_heads(model, spec.r, spec.start, spec.stop, spec.rows, spec.threshold, spec.top_k, tails)
            batches = [cols for _, cols in heads if cols is not None]
            prune = {}
    meta = {**spec.meta, **({"prune": json.dumps(prune)} if prune else {})}
    size = write_shard(spec.fs, spec.path, meta, batches)
    return {"nnz": sum(len(b[0]) for b in batches), "bytes": size, "prune": prune}


_PRUNE_COUNTS = ("block_pairs", "blocks_pruned", "row_pairs", "rows_pruned", "pairs_scored", "pairs_total", "facts",
                 "pairs_cut", "pairs_exact", "pair_dims")


@dataclass(frozen=True)
class ShardPlan:
    """How a sharded export scores: the files' common metadata, heads per scoring block, the threshold and
    top-k, whether box pruning applies, heads per shard (None: one block) and the scoring device."""

    meta_common: dict[str, str]
    rows: int
    threshold: float
    top_k: int | None
    pruned: bool
    shard_heads: int | None
    device: str | None


def _shard_specs(model: Any, plan: ShardPlan, fs: Any, base: str) -> list[ShardSpec]:
    """Every shard of the export in (relation, head) order; boundaries on whole scoring blocks, so each
    shard's batches are the single-process export's batches of those heads."""
    meta_common, rows, threshold, top_k, pruned = plan.meta_common, plan.rows, plan.threshold, plan.top_k, plan.pruned
    shard_heads, device = plan.shard_heads, plan.device
    n = model.n_entities
    step = n if pruned else max(1, (shard_heads or rows) // rows) * rows
    specs = []
    for r in range(model.n_relations):
        for start in range(0, n, step):
            stop = min(n, start + step)
            meta = {**meta_common, "relation": str(r), "head_start": str(start), "head_stop": str(stop)}
            specs.append(
                ShardSpec(r, start, stop, rows, threshold, top_k, pruned, fs, f"{base}/{shard_file(r, start, stop)}", meta, device)
            )
    return specs


def _export_sharded(
    executor: Executor, model: Any, tmp: Path, plan: ShardPlan, where: str | Path, guard: _Guard | None,
    progress: bool | Output,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Score the shards through ``executor`` (reusing complete ones), then concatenate them in head order
    into tmp's relation files. Returns (the manifest's relation entries, summed pruning counts). The
    size guard (None = off) is judged on the driver over every shard finished so far."""
    fs, base = shard_filesystem(where)
    fs.create_dir(base, recursive=True)
    n = model.n_entities
    specs = _shard_specs(model, plan, fs, base)
    total = scored = 0
    prune_sum = dict.fromkeys(_PRUNE_COUNTS, 0)

    def account(spec: ShardSpec, nnz: int, prune: dict[str, int]) -> None:
        nonlocal total, scored
        total += nnz
        scored += (spec.stop - spec.start) * n
        for k, v in prune.items():
            prune_sum[k] += int(v)
        if guard is not None:
            guard.check(total, scored, (spec.stop - spec.start) * n, spec.r)

    todo = []
    for spec in specs:  # resume: a complete shard of this very export is not scored again
        found = read_shard(fs, spec.path, spec.meta)
        if found is None:
            todo.append(spec)
        else:
            account(spec, sum(b.num_rows for b in found[0]), json.loads(found[1].get("prune", "{}")))
    tasks = [
        Task(f"shard {shard_file(s.r, s.start, s.stop)} (relation {s.r}, heads {s.start}..{s.stop - 1})", s, s.stop - s.start)
        for s in todo
    ]
    with closing(executor.map(score_shard, tasks, model.to("cpu"), desc="export", unit="head", progress=progress)) as done:
        for i, res in done:
            account(todo[i], res["nnz"], res["prune"])
    relations = []
    for r in range(model.n_relations):
        path = tmp / relation_file(r)
        schema = SCHEMA.with_metadata({**plan.meta_common, "relation": str(r)})
        nnz = 0
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for spec in (s for s in specs if s.r == r):
                found = read_shard(fs, spec.path, spec.meta)
                if found is None:
                    raise ArtifactError(f"shard {spec.path}: missing or unreadable after it was written; export again")
                for batch in found[0]:
                    writer.write_batch(pa.record_batch(batch.columns, schema=schema))
                    nnz += batch.num_rows
        relations.append({"relation": r, "file": relation_file(r), "nnz": int(nnz), "bytes": path.stat().st_size})
    return relations, prune_sum


def _remove_shards(where: str | Path, whole_folder: bool) -> None:
    """After the export is in place: its shards are no longer needed (a default shard folder goes whole;
    in a folder the user named, only the shard files)."""
    fs, base = shard_filesystem(where)
    if whole_folder:
        fs.delete_dir(base)
        return
    for info in fs.get_file_info(pafs.FileSelector(base, allow_not_found=True)):
        if info.base_name.startswith("rel-") and ".arrow" in info.base_name:
            fs.delete_file(info.path)


def score_heads(
    model: Any,
    r: int,
    start: int,
    stop: int,
    rows: int,
    threshold: float,
    top_k: int | None,
    tails: torch.Tensor,
) -> Iterator[tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray] | None]]:
    """Score relation r's heads start..stop-1 against ``tails`` in blocks of ``rows`` heads; yield per block
    (heads scored, (head int32, tail int32, score float32) of the kept pairs sorted by (head, tail), or None
    when the block keeps nothing). The one scoring loop of the local export and of every shard, so both
    write the same batches; the block shrinks on out-of-memory instead of crashing."""
    dev = tails.device
    while start < stop:
        heads = torch.arange(start, min(stop, start + rows), device=dev)
        try:
            scores = model.score_block(heads, r, tails)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if rows == 1 or not _is_oom(exc):
                raise
            rows = max(1, rows // 2)
            continue
        hi, ti, sc = select_block(scores, threshold, top_k)
        cols = None
        if len(hi):
            cols = (
                (hi + start).to(torch.int32).cpu().numpy(),
                ti.to(torch.int32).cpu().numpy(),
                sc.to(torch.float32).cpu().numpy(),
            )
        yield len(heads), cols
        start += len(heads)


@dataclass
class _Guard:
    """The size guard of one export: refuses, naming the sizes, once the export would outgrow its budget
    (:func:`pipeline.stages.export_select.projected_bytes`, judged after every block)."""

    budget: SizeBudget
    all_pairs: int
    threshold: float
    dataset: str

    def check(self, kept: int, scored: int, step_pairs: int, r: int) -> None:
        size = projected_bytes(kept, scored, step_pairs, self.all_pairs)
        if size <= self.budget.bytes:
            return
        raise PipelineError(
            f"threshold {self.threshold} keeps {kept / max(1, scored):.1%} of the (h, r, t) pairs scored so far "
            f"(through relation {relation_label(self.dataset, r)}): the export would take about "
            f"{human_bytes(size)} ({size // BYTES_PER_FACT:,} facts x {BYTES_PER_FACT} bytes), more than its budget of "
            f"{human_bytes(self.budget.bytes)} ({self.budget.why}); choose a higher {option('threshold')} or a "
            f"{option('top_k')}, or {option('allow_dense', True)} to export it anyway"
        )


def relation_label(dataset: str, r: int) -> str:
    """Relation r of a data set by its name (``'co_attends'``), as messages name it; ``#r`` where the
    data set's files cannot be read."""
    try:
        from loaders import load

        return repr(load(dataset).relation_names()[r])
    except Exception:  # noqa: BLE001 - a message must not fail on the way out; the id still says which
        return f"#{r}"


def _pruned_step(bar: Any, heads: int, stats: box_bounds.PruneStats, n: int, guard: _Guard | None, r: int) -> None:
    """Progress of the pruned export, and the size guard judged as early as in the dense loop."""
    bar.update(heads)
    bar.set_postfix_str(f"blocks pruned {stats.pruned_share:.1%}, pairs cut {stats.cut_share:.1%}", refresh=False)
    seen = stats.heads_done * n  # pairs decided so far (pruned or scored); bar.n stays 0 when disabled
    if guard is not None and seen >= stats.heads_total * n // 50:
        guard.check(stats.facts, seen, seen, r)


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text or "can't allocate" in text


