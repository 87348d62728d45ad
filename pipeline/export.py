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

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch
from tqdm import tqdm

from pipeline import atomic, config
from pipeline.errors import ArtifactError, PipelineError
from pipeline.export_select import check_top_k, select_block
from pipeline.formats.adjacency import (
    FORMAT,
    MANIFEST,
    SCHEMA,
    relation_file,
    reusable,
    write_manifest,
)
from pipeline.models import box_bounds
from pipeline.provenance import provenance


def default_export_dir(dataset: str, model_hash: str, threshold: float, top_k: int | None = None) -> Path:
    """PIPELINE_HOME/exports/<dataset>-<hash prefix>-t<threshold>[-k<K>]: named by content, never by run name."""
    return config.home() / "exports" / (f"{dataset}-{model_hash[:16]}-t{threshold:g}" + (f"-k{top_k}" if top_k else ""))


def export_adjacency(
    run_dir: str | Path,
    threshold: float = 0.1,
    out: str | Path | None = None,
    device: str | None = None,
    progress: bool = True,
    block_rows: int | None = None,
    max_fraction: float = 1 / 3,
    dense_floor_pairs: int = 1 << 22,
    prune: bool = True,
    top_k: int | None = None,
) -> dict[str, Any]:
    """Score every (h, r, t) of the run's model and keep those with confidence >= threshold.

    run_dir: a run directory (pipeline.models.runs); threshold in (0, 1]; out: export directory (default
    under PIPELINE_HOME, named by the model hash); max_fraction: stop with an error when more than this
    fraction of all |R| |E|^2 pairs pass the threshold (a sparse export would be larger than the dense
    matrix; raise the threshold instead), judged only when the graph has more than dense_floor_pairs
    (h, r, t) pairs: a small graph's whole matrix is cheap, so it is never refused; prune: for box models,
    skip the block pairs whose confidence bound is below the threshold (pipeline.models.box_bounds: the same
    facts; faster as far as the boxes are separated). Returns the manifest (with "path" and "cached": True
    when an existing export of the same model and threshold was reused).
    top_k: keep only each (head, relation)'s K best tails that pass the threshold
    (:mod:`pipeline.export_select`); box pruning applies to threshold-only exports.
    """
    from pipeline.models import load_run, read_run

    if not (0.0 < threshold <= 1.0):
        raise PipelineError(
            f"--threshold must be in (0, 1], got {threshold} (0 would store the dense matrix)"
        )
    check_top_k(top_k)
    run = read_run(run_dir)
    dev = config.select_device(device)
    model = load_run(run.path, device=dev)
    model_hash = model.content_hash()
    out = Path(out) if out is not None else default_export_dir(run.dataset, model_hash, threshold, top_k)
    cached = reusable(out, model_hash, threshold, top_k)
    if cached is not None:
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
    guarded = all_pairs > dense_floor_pairs  # the density guard is relative to the graph: tiny ones always pass
    relations = []
    pruner = (
        box_bounds.PruneStats(heads_total=n * model.n_relations)
        if prune and top_k is None and box_bounds.supports(model)
        else None
    )
    t0 = time.perf_counter()
    try:
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
                    h_, t_, s_ = box_bounds.score_relation(
                        model, r, threshold, stats=pruner,
                        on_block=lambda k, r=r: _pruned_step(bar, k, pruner, n, max_fraction if guarded else 1.0, threshold, r),
                    )
                    if len(h_):
                        writer.write_batch(
                            pa.record_batch(
                                [pa.array(x.to(dt).cpu().numpy()) for x, dt in
                                 ((h_, torch.int32), (t_, torch.int32), (s_, torch.float32))],
                                schema=schema,
                            )
                        )
                    nnz, total, scored, start = len(h_), total + len(h_), scored + n * n, n
                    if guarded and total > max_facts:
                        raise PipelineError(
                            f"threshold {threshold} keeps {total} facts after relation {r}, more than "
                            f"{max_fraction:.0%} of all pairs; choose a higher --threshold"
                        )
                while start < n:
                    heads = torch.arange(start, min(n, start + rows), device=dev)
                    try:
                        scores = model.score_block(heads, r, tails)
                    except (torch.OutOfMemoryError, RuntimeError) as exc:
                        if rows == 1 or not _is_oom(exc):
                            raise
                        rows = max(1, rows // 2)  # shrink the block instead of crashing
                        continue
                    hi, ti, sc = select_block(scores, threshold, top_k)
                    if len(hi):
                        writer.write_batch(
                            pa.record_batch(
                                [
                                    pa.array((hi + start).to(torch.int32).cpu().numpy()),
                                    pa.array(ti.to(torch.int32).cpu().numpy()),
                                    pa.array(sc.to(torch.float32).cpu().numpy()),
                                ],
                                schema=schema,
                            )
                        )
                    nnz += len(hi)
                    total += len(hi)
                    scored += len(heads) * n
                    # judge early (after a block and 2% of all pairs) so an unselective model fails in
                    # seconds, and always before the stored facts outgrow the dense matrix
                    early = scored >= min(all_pairs, max(len(heads) * n, all_pairs // 50))
                    if guarded and (total > max_facts or (early and total > max_fraction * scored)):
                        raise PipelineError(
                            f"threshold {threshold} keeps {total / scored:.1%} of the (h, r, t) pairs scored so "
                            f"far (limit {max_fraction:.0%}, relation {r}): the model is not selective at this "
                            "threshold and the export would outgrow the dense matrix; choose a higher --threshold"
                        )
                    bar.update(len(heads))
                    start += len(heads)
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
            "device": dev,
            "seconds": seconds,
            "relations": relations,
            "nnz": int(sum(x["nnz"] for x in relations)),
            "bytes": int(sum(x["bytes"] for x in relations)),
            "dense_float32_bytes": 4 * n * n * model.n_relations,
            "provenance": provenance({"threshold": float(threshold), "device": dev}, inputs={"run": str(run.path)}),
            **({"pruning": pruner.as_dict()} if pruner is not None else {}),
        }
        write_manifest(tmp, manifest)
        if out.exists():
            shutil.rmtree(out)  # an export of another model or threshold: replaced, never mixed
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {**manifest, "path": str(out), "cached": False}


def _pruned_step(
    bar: tqdm, heads: int, stats: box_bounds.PruneStats, n: int, max_fraction: float, threshold: float, r: int
) -> None:
    """Progress of the pruned export, and the dense guard judged as early as in the dense loop."""
    bar.update(heads)
    bar.set_postfix_str(f"blocks pruned {stats.pruned_share:.1%}", refresh=False)
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


