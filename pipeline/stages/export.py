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
from tqdm import tqdm

from pipeline.core import atomic, config
from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.core.provenance import provenance
from pipeline.executors.base import Executor, Task
from pipeline.formats.adjacency import (
    FORMAT,
    MANIFEST,
    SCHEMA,
    read_shard,
    relation_file,
    reusable,
    shard_file,
    shard_filesystem,
    write_manifest,
    write_shard,
)
from pipeline.models import box_bounds
from pipeline.stages.export_select import check_top_k, select_block

# The density guard: an export that keeps more than this share of all (h, r, t) pairs is refused (on every
# graph size) unless the caller allows it plainly (max_fraction=1.0, `pipeline export --allow-dense`).
MAX_FRACTION = 1 / 3


def default_export_dir(dataset: str, model_hash: str, threshold: float, top_k: int | None = None) -> Path:
    """PIPELINE_HOME/exports/<dataset>-<hash prefix>-t<threshold>[-k<K>]: named by content, never by run name."""
    return config.home() / "exports" / (f"{dataset}-{model_hash[:16]}-t{threshold:g}" + (f"-k{top_k}" if top_k else ""))


def export_adjacency(
    run_dir: str | Path,
    threshold: float = 0.1,
    out: str | Path | None = None,
    *,
    device: str | None = None,
    progress: bool = True,
    block_rows: int | None = None,
    max_fraction: float = MAX_FRACTION,
    prune: bool = True,
    top_k: int | None = None,
    executor: Executor | None = None,
    shards: str | Path | None = None,
    shard_heads: int | None = None,
) -> dict[str, Any]:
    """Score every (h, r, t) of the run's model and keep those with confidence >= threshold.

    run_dir: a run directory (pipeline.models.runs); threshold in (0, 1]; out: export directory (default
    under PIPELINE_HOME, named by the model hash); max_fraction: stop with an error when more than this
    fraction of all |R| |E|^2 pairs pass the threshold (a sparse export would be larger than the dense
    matrix, and a model that keeps most pairs says little: raise the threshold instead), on every graph
    size (1.0 turns the guard off: `pipeline export --allow-dense`); prune: for box models,
    skip the block pairs whose confidence bound is below the threshold (pipeline.models.box_bounds: the same
    facts; faster as far as the boxes are separated). Returns the manifest (with "path" and "cached": True
    when an existing export of the same model and threshold was reused).
    top_k: keep only each (head, relation)'s K best tails that pass the threshold
    (:mod:`pipeline.stages.export_select`); box pruning applies to threshold-only exports.
    executor: where the scoring runs (:mod:`pipeline.executors`; default: this process, streaming). An
    executor that is not in-process (Ray) scores (relation, head block) shards as tasks written under
    ``shards`` (a folder or filesystem URI; default ``<out>.shards`` beside the export), reusing shards a
    killed run left; the same relation files result. shard_heads: heads per shard (rounded to whole scoring
    blocks so shards hold the same batches; default one block; a box model's pruned export: one relation).
    """
    from pipeline.models import load_run, read_run

    if not (0.0 < threshold <= 1.0):
        raise PipelineError(
            f"--threshold must be in (0, 1], got {threshold} (0 would store the dense matrix)"
        )
    check_top_k(top_k)
    atomic.check_folder(out, "--out")  # before the model is loaded and scored
    run = read_run(run_dir)
    dev = config.select_device(device)
    model = load_run(run.path, device=dev)
    model_hash = model.content_hash()
    out = Path(out) if out is not None else default_export_dir(run.dataset, model_hash, threshold, top_k)
    cached = reusable(out, model_hash, threshold, top_k)
    if cached is not None:
        kept = cached["nnz"] / max(1, cached["n_entities"] ** 2 * cached["n_relations"])
        if kept > max_fraction:  # made with the guard off: not handed out without it
            raise PipelineError(
                f"{out}: this export keeps {kept:.1%} of all (h, r, t) pairs, more than the density guard's "
                f"{max_fraction:.0%}; choose a higher --threshold, or --allow-dense to use it anyway"
            )
        return {**cached, "path": str(out), "cached": True}
    if out.exists() and not out.is_dir():
        raise ArtifactError(f"{out}: exists and is not a directory; choose another --out")
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).exists():
        raise ArtifactError(f"{out}: exists and is not an export directory; choose another --out")

    n = model.n_entities
    tails = torch.arange(n, device=dev)
    rows = block_rows or model.block_rows(n)
    all_pairs = n * n * model.n_relations
    max_facts = int(max_fraction * all_pairs)
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
    # the guard holds on every graph size: a small graph once slipped through with 100% of its pairs kept
    guarded = max_fraction < 1.0
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
            relations, pruned_counts = _export_sharded(executor, model, tmp, meta_common=meta_common, rows=rows, threshold=threshold, top_k=top_k, pruned=pruner is not None, where=where, shard_heads=shard_heads, max_fraction=max_fraction if guarded else None, device=device, progress=progress)
            if pruner is not None:
                for k, v in pruned_counts.items():
                    setattr(pruner, k, v)
        else:
            bar = tqdm(
                total=model.n_relations * n,
                desc="export",
                unit="head",
                unit_scale=True,
                disable=not progress,
                dynamic_ncols=True,
            )
            for r in range(model.n_relations):
                path = tmp / relation_file(r)
                schema = SCHEMA.with_metadata({**meta_common, "relation": str(r)})
                nnz = 0
                with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
                    start = 0
                    if pruner is not None:  # box model: exact pruned scoring replaces the dense loop below
                        cols = _pruned_relation(
                            model, r, threshold, pruner,
                            lambda k, r=r: _pruned_step(bar, k, pruner, n, max_fraction if guarded else 1.0, threshold, r),
                        )
                        if cols is not None:
                            writer.write_batch(pa.record_batch([pa.array(c) for c in cols], schema=schema))
                            nnz = len(cols[0])
                        total, scored, start = total + nnz, scored + n * n, n
                        if guarded and total > max_facts:
                            raise PipelineError(
                                f"threshold {threshold} keeps {total} facts after relation {r}, more than "
                                f"{max_fraction:.0%} of all pairs; choose a higher --threshold"
                            )
                    for n_heads, cols in score_heads(model, r, start, n, rows, threshold, top_k, tails):
                        if cols is not None:
                            writer.write_batch(pa.record_batch([pa.array(c) for c in cols], schema=schema))
                            nnz += len(cols[0])
                            total += len(cols[0])
                        scored += n_heads * n
                        if guarded:
                            _guard(total, scored, n_heads * n, all_pairs, max_fraction, threshold, r)
                        bar.update(n_heads)
                relations.append(
                    {"relation": r, "file": relation_file(r), "nnz": int(nnz), "bytes": path.stat().st_size}
                )
            bar.close()
        seconds = time.perf_counter() - t0
        manifest = {
            **{k: v for k, v in meta_common.items() if k not in ("threshold", "n_entities", "n_relations", "top_k")},
            "top_k": top_k,
            "threshold": float(threshold),
            "n_entities": n,
            "n_relations": model.n_relations,
            "run_dir": str(run.path),
            # the data set version the model was trained on (its content key, issue 45): an export is
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
    return {**manifest, "path": str(out), "cached": False}


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


def _shard_specs(
    model: Any, meta_common: dict[str, str], *, rows: int, threshold: float, top_k: int | None, pruned: bool,
    fs: Any, base: str, shard_heads: int | None, device: str | None,
) -> list[ShardSpec]:
    """Every shard of the export in (relation, head) order; boundaries on whole scoring blocks, so each
    shard's batches are the single-process export's batches of those heads."""
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
    executor: Executor,
    model: Any,
    tmp: Path,
    *,
    meta_common: dict[str, str],
    rows: int,
    threshold: float,
    top_k: int | None,
    pruned: bool,
    where: str | Path,
    shard_heads: int | None,
    max_fraction: float | None,
    device: str | None,
    progress: bool,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Score the shards through ``executor`` (reusing complete ones), then concatenate them in head order
    into tmp's relation files. Returns (the manifest's relation entries, summed pruning counts). The
    density guard (max_fraction; None = off) is judged on the driver over every shard finished so far."""
    fs, base = shard_filesystem(where)
    fs.create_dir(base, recursive=True)
    n = model.n_entities
    all_pairs = n * n * model.n_relations
    specs = _shard_specs(model, meta_common, rows=rows, threshold=threshold, top_k=top_k, pruned=pruned, fs=fs, base=base, shard_heads=shard_heads, device=device)
    total = scored = 0
    prune_sum = dict.fromkeys(_PRUNE_COUNTS, 0)

    def account(spec: ShardSpec, nnz: int, prune: dict[str, int]) -> None:
        nonlocal total, scored
        total += nnz
        scored += (spec.stop - spec.start) * n
        for k, v in prune.items():
            prune_sum[k] += int(v)
        if max_fraction is not None:
            _guard(total, scored, (spec.stop - spec.start) * n, all_pairs, max_fraction, threshold, spec.r)

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
        schema = SCHEMA.with_metadata({**meta_common, "relation": str(r)})
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


def _guard(total: int, scored: int, step_pairs: int, all_pairs: int, max_fraction: float, threshold: float, r: int) -> None:
    """The density guard, global over the whole export: judge early (after a block and 2% of all pairs) so
    an unselective model fails in seconds, and always before the stored facts outgrow the dense matrix."""
    early = scored >= min(all_pairs, max(step_pairs, all_pairs // 50))
    if total > int(max_fraction * all_pairs) or (early and total > max_fraction * scored):
        raise PipelineError(
            f"threshold {threshold} keeps {total / scored:.1%} of the (h, r, t) pairs scored so "
            f"far (limit {max_fraction:.0%}, relation {r}): the model is not selective at this "
            "threshold and the export would outgrow the dense matrix; choose a higher --threshold"
        )


def _pruned_step(
    bar: tqdm, heads: int, stats: box_bounds.PruneStats, n: int, max_fraction: float, threshold: float, r: int
) -> None:
    """Progress of the pruned export, and the dense guard judged as early as in the dense loop."""
    bar.update(heads)
    bar.set_postfix_str(f"blocks pruned {stats.pruned_share:.1%}, pairs cut {stats.cut_share:.1%}", refresh=False)
    seen = stats.heads_done * n  # pairs decided so far (pruned or scored); bar.n stays 0 when disabled
    if seen >= stats.heads_total * n // 50 and stats.facts > max_fraction * seen:
        raise PipelineError(
            f"threshold {threshold} keeps {stats.facts / seen:.1%} of the (h, r, t) pairs scored so far "
            f"(limit {max_fraction:.0%}, relation {r}): the model is not selective at this threshold and "
            "the export would outgrow the dense matrix; choose a higher --threshold"
        )


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text or "can't allocate" in text


