"""Answering a query set with SRC on a graph (design sections 2 and 5), and the answers file format.

Answers Parquet, one row per (query, entity) for the top-k predicted entities AND every ground-truth answer:
  query_id str · type str · entity int64 · utility float32 (predicted, -inf = fails) ·
  rank int64 (among ALL entities, 1 = best, ties by entity id, -inf last) ·
  truth_utility float64 (NaN where the entity is not a ground-truth answer) ·
  truth_rank int32 (1..n = position among the ground-truth answers, best first; 0 = not an answer)
File metadata (key ``pipeline``, JSON): format, dataset, method, backbone, calibration, query_set, split,
n_queries, k, adjacency and, where calibrated, the calibration parameters used.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from pipeline.errors import ArtifactError
from pipeline.metrics import rank_entities

FORMAT = "soft-query-answers/1"
META_KEY = b"pipeline"
TOP_K = 100

SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("type", pa.string()),
        ("entity", pa.int64()),
        ("utility", pa.float32()),
        ("rank", pa.int64()),
        ("truth_utility", pa.float64()),
        ("truth_rank", pa.int32()),
    ]
)
REQUIRED_META = ("dataset", "method", "query_set")


@dataclass
class Answers:
    """A loaded answers file: ``frame`` with the columns above, ``meta`` the file metadata."""

    frame: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def method(self) -> str:
        """The table key of this answer set, e.g. ``ukge_logi SRC(D+L)``."""
        backbone = self.meta.get("backbone")
        return f"{backbone} {self.meta['method']}" if backbone else str(self.meta["method"])


# ----------------------------------------------------------------------------------------------- file I/O


def write_answers(frame: pd.DataFrame, path: str | Path, meta: dict[str, Any]) -> Path:
    """Write an answers frame atomically (a crashed run never leaves a file that looks complete)."""
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise ValueError(f"answers metadata lacks {missing}")
    schema = SCHEMA.with_metadata(
        {META_KEY: json.dumps({"format": FORMAT, **meta}, sort_keys=True, default=str)}
    )
    table = pa.Table.from_pandas(frame[[f.name for f in SCHEMA]], schema=schema, preserve_index=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return path


def read_answers(path: str | Path) -> Answers:
    """Read one answers file; ArtifactError names the file and what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such answers file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"{path}: not a readable Parquet answers file ({exc})") from exc
    raw = (table.schema.metadata or {}).get(META_KEY)
    meta = json.loads(raw) if raw else {}
    if meta.get("format") != FORMAT:
        raise ArtifactError(
            f"{path}: format {meta.get('format')!r}, expected {FORMAT!r} (not an answers file)"
        )
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise ArtifactError(f"{path}: missing column(s) {', '.join(missing)}")
    return Answers(table.to_pandas(), meta, path)


def find_answer_files(path: str | Path) -> list[Path]:
    """An answers file, or every answers file (``*.parquet`` with answers metadata) of a directory."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ArtifactError(f"{path}: no such answers file or directory")
    found = []
    for p in sorted(path.glob("*.parquet")):
        raw = (pq.read_schema(p).metadata or {}).get(META_KEY)
        if raw and json.loads(raw).get("format") == FORMAT:
            found.append(p)
    if not found:
        raise ArtifactError(f"{path}: holds no answers file (*.parquet written by `pipeline answer`)")
    return found


# ------------------------------------------------------------------------------------------- answer rows


def answer_rows(
    query_ids: list[str],
    types: list[str],
    utility: torch.Tensor,
    truth: list[tuple[np.ndarray, np.ndarray]],
    k: int = TOP_K,
) -> pd.DataFrame:
    """The answers rows of a batch of queries.

    utility: (B, n_entities) float predicted utilities (-inf = fails), any device.
    truth: per query, (entities (n,) int64, utilities (n,) float64) of the ground-truth answers, best first.
    Returns one row per (query, entity) for the k best-ranked entities and every ground-truth answer."""
    ranks = rank_entities(utility)
    k = min(k, utility.shape[-1])
    top = torch.topk(-ranks, k, dim=-1).indices.cpu().numpy()  # the k smallest ranks, best first
    u_cpu = utility.float().cpu().numpy()
    r_cpu = ranks.cpu().numpy()
    parts = []
    for b, (qid, qtype) in enumerate(zip(query_ids, types, strict=True)):
        t_ent, t_util = (np.asarray(x) for x in truth[b])
        t_ent = t_ent.astype(np.int64)
        extra = np.setdiff1d(t_ent, top[b], assume_unique=False)
        ents = np.concatenate([top[b], extra])
        truth_rank = np.zeros(len(ents), dtype=np.int32)
        truth_util = np.full(len(ents), np.nan)
        pos = {int(e): i for i, e in enumerate(ents)}
        for j, (e, v) in enumerate(zip(t_ent, t_util, strict=True)):
            truth_rank[pos[int(e)]] = j + 1
            truth_util[pos[int(e)]] = v
        parts.append(
            pd.DataFrame(
                {
                    "query_id": qid,
                    "type": qtype,
                    "entity": ents,
                    "utility": u_cpu[b, ents].astype(np.float32),
                    "rank": r_cpu[b, ents].astype(np.int64),
                    "truth_utility": truth_util,
                    "truth_rank": truth_rank,
                }
            )
        )
    if not parts:
        return pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
    return pd.concat(parts, ignore_index=True)


# ------------------------------------------------------------------------------------------- answering


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
    queries: Any,
    graph: Any,
    delta: float = 0.0,
    batch_size: int = 256,
    k: int = TOP_K,
    progress: bool = True,
) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """Answer every query of a query set (pipeline.sampling.QuerySet) with SRC on graph.

    graph: GraphTensors or engine Adjacency (observed or predicted, any device); delta: calibration D
    (alpha - delta on every atom). Queries are batched by type (one shape per batch). Returns the answers
    rows (see the module docstring) and per type {queries, seconds, queries_per_s}."""
    from tqdm import tqdm

    from pipeline.calibration import lower_alphas
    from pipeline.engine import as_adjacency, evaluate_batch

    adj = as_adjacency(graph)
    frame = queries.frame
    parsed = queries.queries()
    truth = _truth(frame)
    ids, types = frame["id"].astype(str).tolist(), frame["type"].astype(str).tolist()
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(types):
        groups.setdefault(t, []).append(i)
    parts, stats = [], {}
    bar = tqdm(total=len(frame), desc="answer", unit="query", disable=not progress, dynamic_ncols=True)
    for qtype, idx in groups.items():
        seconds = 0.0
        for s in range(0, len(idx), batch_size):
            chunk = idx[s : s + batch_size]
            batch = [lower_alphas(parsed[i], delta) for i in chunk]
            _sync(adj.device)
            t0 = time.perf_counter()
            with torch.no_grad():
                util = evaluate_batch(batch, adj)
            _sync(adj.device)
            seconds += time.perf_counter() - t0
            parts.append(
                answer_rows([ids[i] for i in chunk], [qtype] * len(chunk), util, [truth[i] for i in chunk], k)
            )
            bar.update(len(chunk))
        stats[qtype] = {
            "queries": len(idx),
            "seconds": seconds,
            "queries_per_s": len(idx) / seconds if seconds else 0.0,
        }
    bar.close()
    rows = (
        pd.concat(parts, ignore_index=True)
        if parts
        else answer_rows([], [], torch.zeros(0, adj.n_entities), [], k)
    )
    return rows, stats


def selection_score(frame: pd.DataFrame) -> float:
    """The single number calibration selects on: the mean over metrics of their type-averaged values x100."""
    from pipeline.evaluate import query_metrics, summarise

    summary = summarise(query_metrics(frame))
    vals = [v["avg"] for v in summary.values() if not np.isnan(v["avg"])]
    return float(np.mean(vals)) if vals else -np.inf


def run_answer(
    queries_path: str | Path,
    adjacency_dir: str | Path,
    calibration: str = "none",
    out_dir: str | Path | None = None,
    valid_queries: str | Path | None = None,
    train_queries: str | Path | None = None,
    run_dir: str | Path | None = None,
    device: str | None = None,
    seed: int = 0,
    l_epochs: int = 20,
    progress: bool = True,
    kg: Any = None,
) -> dict[str, Any]:
    """`pipeline answer`: answer a query set with SRC on an exported neural adjacency, optionally calibrated.

    D needs valid_queries (delta chosen there); L needs train_queries (fitted there, with alpha = 0) and
    selects on valid_queries when given; the backbone (for L's features) is the export's run unless run_dir
    names another copy. Fitted calibrations are saved beside the run, under RUN_DIR/calibration/, keyed by
    content (model hash, threshold, query sets, settings) and reused. kg: the loaded data set (loaders.KGData)
    whose train graph gives L its targets (default: loaded by the query set's data set name). Returns a report with the answers
    path, the calibration used and the answering throughput per type."""
    from pipeline import config
    from pipeline.calibration import (
        DELTA_GRID,
        L_VERSION,
        LConfig,
        cache_key,
        calibrated_adjacency,
        check_calibration,
        choose_delta,
        feature_tables,
        fit_affine,
        load_affine,
        method_name,
        queryset_checksum,
        save_affine,
    )
    from pipeline.engine import as_adjacency, evaluate_batch
    from pipeline.errors import PipelineError
    from pipeline.export import load_adjacency
    from pipeline.sampling import read_query_set

    check_calibration(calibration)
    dev = config.select_device(device)
    qs = read_query_set(queries_path)
    dataset = qs.meta["dataset"]
    graph, manifest = load_adjacency(adjacency_dir, dataset=dataset, device=dev)
    adj = as_adjacency(graph)
    method = method_name(calibration)
    valid = read_query_set(valid_queries) if valid_queries else None
    for other, name in ((valid, "--valid-queries"),):
        if other is not None and other.meta["dataset"] != dataset:
            raise PipelineError(
                f"{name} {other.path}: a query set of '{other.meta['dataset']}', not '{dataset}'"
            )
    if "D" in calibration and valid is None:
        raise PipelineError(
            f"--calibration {calibration} chooses delta on a valid query set: give --valid-queries"
        )
    run_path = Path(run_dir or manifest.get("run_dir", ""))
    key_parts: dict[str, Any] = {
        "model_hash": manifest["model_hash"],
        "threshold": manifest["threshold"],
        "valid": queryset_checksum(valid.frame) if valid is not None else None,
    }
    calib_dir = run_path / "calibration"
    info: dict[str, Any] = {"calibration": calibration}

    if "L" in calibration:
        if train_queries is None:
            raise PipelineError(
                f"--calibration {calibration} trains L on a train query set: give --train-queries"
            )
        if not (run_path / "config.json").exists():
            raise PipelineError(
                f"calibration L needs the backbone's run directory; {run_path} is not one (use --run)"
            )
        from pipeline.models import load_run

        train = read_query_set(train_queries)
        if train.meta["dataset"] != dataset:
            raise PipelineError(
                f"--train-queries {train.path}: a query set of '{train.meta['dataset']}', not '{dataset}'"
            )
        model = load_run(run_path, device=dev)
        if model.content_hash() != manifest["model_hash"]:
            raise PipelineError(
                f"{run_path}: its model is not the one exported to {adjacency_dir} (content hash differs)"
            )
        lcfg = LConfig(epochs=l_epochs, seed=seed)
        # L alone is selected on the valid score at delta 0; under D+L on the best valid score over the
        # delta grid (L and delta are chosen together: an L that lowers confidences is only useful with a
        # delta that lowers the thresholds with them). Two selections, two saved calibrations.
        l_select = "max-over-delta-grid" if "D" in calibration else "delta-0"
        key_parts.update(
            train=queryset_checksum(train.frame),
            l_config=lcfg.__dict__,
            l_select=l_select,
            l_version=L_VERSION,
        )
        l_key = cache_key(
            {
                k: key_parts[k]
                for k in ("model_hash", "threshold", "valid", "train", "l_config", "l_select", "l_version")
            }
        )
        tables = feature_tables(model, adj.device)
        calib = load_affine(calib_dir / f"L-{l_key}", tables[0].shape[1], tables[1].shape[1], adj.device)
        if calib is None:
            from loaders import load
            from pipeline.kg import observed_graph

            truth = as_adjacency(observed_graph(kg if kg is not None else load(dataset), "train", device=dev))
            deltas = DELTA_GRID if "D" in calibration else (0.0,)

            def valid_score(a: Any) -> float:
                assert valid is not None
                return max(selection_score(answer_query_set(valid, a, d, progress=False)[0]) for d in deltas)

            calib, history = fit_affine(
                model,
                adj,
                train.queries(),
                truth,
                evaluate_batch,
                valid_score if valid is not None else None,
                lcfg,
                progress,
            )
            save_affine(
                calib, calib_dir / f"L-{l_key}", {"key": l_key, "inputs": key_parts, "history": history}
            )
        with torch.no_grad():
            adj = calibrated_adjacency(adj, calib, tables)
        info["l_key"] = l_key
        info["l_dir"] = str(calib_dir / f"L-{l_key}")

    delta = 0.0
    if "D" in calibration:
        d_key = cache_key({**key_parts, "l_key": info.get("l_key"), "grid": DELTA_GRID})
        d_file = calib_dir / f"D-{d_key}.json"
        if d_file.exists():
            delta = float(json.loads(d_file.read_text())["delta"])
        else:
            delta, scores = choose_delta(
                lambda d: selection_score(answer_query_set(valid, adj, d, progress=False)[0]),
                progress=progress,
            )
            if run_path.name:
                calib_dir.mkdir(parents=True, exist_ok=True)
                d_file.write_text(
                    json.dumps({"delta": delta, "scores": scores, "inputs": key_parts}, indent=2) + "\n"
                )
        info["delta"] = delta

    t0 = time.perf_counter()
    frame, stats = answer_query_set(qs, adj, delta, progress=progress)
    seconds = time.perf_counter() - t0
    out = Path(out_dir) if out_dir else Path(qs.path).parent / "answers"
    path = out / f"{Path(qs.path).stem}.{manifest.get('model', 'model')}.{method}.parquet"
    meta = {
        "dataset": dataset,
        "method": method,
        "backbone": manifest.get("model"),
        "query_set": str(qs.path),
        "split": qs.meta.get("split"),
        "alpha": qs.meta.get("alpha"),
        "beta": qs.meta.get("beta"),
        "n_queries": len(qs),
        "k": TOP_K,
        "adjacency": str(adjacency_dir),
        "model_hash": manifest["model_hash"],
        "threshold": manifest["threshold"],
        "device": str(adj.device),
        "throughput": stats,
        **info,
    }
    write_answers(frame, path, meta)
    return {"path": str(path), "method": method, "seconds": seconds, **info, "throughput": stats}
