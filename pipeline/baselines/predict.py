"""Answering a query set with a trained query-embedding baseline, in SRC's answers format.

The utility of every entity for a query is the model's score (logit): the ranking is all the metrics read,
so `pipeline evaluate` treats these files exactly like SRC's. Rows come from
:func:`pipeline.answer.answer_rows` and go to disk through :func:`pipeline.answer.write_answers`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from pipeline.baselines.models import QueryEmbeddingModel
from pipeline.baselines.plan import group_by_plan


def ground_truth(frame: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, (answer ids, utilities) on the split's graph, best first."""
    return [
        (np.asarray(a, dtype=np.int64), np.asarray(u, dtype=np.float64))
        for a, u in zip(frame["answers_hard"], frame["utilities_hard"], strict=True)
    ]


def answer_frame(
    model: QueryEmbeddingModel, queries: Any, batch_size: int = 128, progress: bool = False
) -> pd.DataFrame:
    """The answers rows of a QuerySet (see pipeline.answer) under model's scores over all entities."""
    from tqdm import tqdm

    from pipeline.answer import TOP_K, answer_rows

    frame = queries.frame
    ids, types = frame["id"].astype(str).tolist(), frame["type"].astype(str).tolist()
    truth = ground_truth(frame)
    device = next(model.parameters()).device
    parts = []
    bar = tqdm(total=len(frame), desc="answer", unit="query", disable=not progress, dynamic_ncols=True)
    model.eval()
    with torch.no_grad():
        for plan, (pos, params) in group_by_plan(queries.queries(), ids).items():
            p = params.to(device)
            for s in range(0, len(pos), batch_size):
                sel = pos[s : s + batch_size]
                rows = slice(s, s + len(sel))
                sub = type(p)(p.anchor[rows], p.relation[rows], p.alpha[rows], p.beta[rows])
                util = model.logits(plan, sub)
                parts.append(
                    answer_rows(
                        [ids[i] for i in sel], [types[i] for i in sel], util, [truth[i] for i in sel], TOP_K
                    )
                )
                bar.update(len(sel))
    bar.close()
    if not parts:
        return answer_rows([], [], torch.zeros(0, model.n_entities), [], TOP_K)
    # file order = query set order, whatever the plan grouping was
    order = {q: i for i, q in enumerate(ids)}
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values("query_id", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)


def run_answer_qe(
    queries_path: str | Path,
    run_dir: str | Path,
    out_dir: str | Path | None = None,
    device: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """`pipeline answer QUERIES --model RUN_DIR`: answer a query set with a trained LogicE+NE/ConE+NE run."""
    from pipeline import config
    from pipeline.answer import TOP_K, write_answers
    from pipeline.baselines.runs import load_qe_run
    from pipeline.errors import ArtifactError
    from pipeline.sampling import read_query_set

    dev = config.select_device(device)
    qs = read_query_set(queries_path)
    model, run_cfg = load_qe_run(run_dir, device=dev)
    dataset = qs.meta["dataset"]
    if run_cfg["dataset"] != dataset:
        raise ArtifactError(f"{run_dir}: a {run_cfg['dataset']} run cannot answer a query set of '{dataset}'")
    t0 = time.perf_counter()
    frame = answer_frame(model, qs, progress=progress)
    seconds = time.perf_counter() - t0
    out = Path(out_dir) if out_dir else Path(qs.path).parent / "answers"
    path = out / f"{Path(qs.path).stem}.{model.name}.parquet"
    meta = {
        "dataset": dataset,
        "method": model.method,
        "backbone": None,
        "query_set": str(qs.path),
        "split": qs.meta.get("split"),
        "alpha": qs.meta.get("alpha"),
        "beta": qs.meta.get("beta"),
        "n_queries": len(qs),
        "k": TOP_K,
        "run_dir": str(run_dir),
        "model": model.name,
        "device": str(dev),
    }
    write_answers(frame, path, meta)
    return {"path": str(path), "method": model.method, "seconds": seconds, "queries": len(qs)}
