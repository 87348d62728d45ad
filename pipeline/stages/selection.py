"""The selection score calibration chooses with (D's delta, L's epoch), for many variants of a method in
one pass over the valid queries.

The score is :func:`pipeline.stages.answer.selection_score` of the answers file the variant would write:
the mean over metrics of their type-averaged values x100. Writing that file to score it (the top-100
rows of every query, a frame, then the per-query metric functions) cost ~14 s per pass over 1,200 PPI5k
valid queries, ~10 s of it in the metrics' per-query loop; D scored 5 deltas per pass, D+L 5 per L epoch.
Here the queries are parsed and grouped once (:class:`ValidScorer`), every variant's utilities come from
one engine pass where the method can batch them (:meth:`~pipeline.methods.base.Method.utilities_of`: SRC
answers its deltas as extra rows of the same batches), only the ground-truth answers' tie groups are
ranked (one sort per row), and the metrics of all queries come from :mod:`pipeline.core.metric_arrays`
(no loop over queries). The per-type averages are the same pandas means of the same per-query values in
the same order as the file's, so the score equals the file's (tau and rho bit for bit, MAP and NDCG to
~1e-15 before the tables' rounding to 4 decimals; ``tests/calibration/test_selection.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from pipeline.core.metric_arrays import metric_arrays

if TYPE_CHECKING:
    from pipeline.formats.queryset import QuerySet
    from pipeline.methods.base import Method


@dataclass(frozen=True)
class _Chunk:
    """One engine batch of the valid set (one type, at most batch_size queries): its queries, the padded
    (B, M) ground-truth entities and where each real one goes in the metrics' layout."""

    queries: list[Any]
    entities: torch.Tensor  # (B, M) int64, padded with 0
    valid: torch.Tensor  # (B, M) bool
    dest: np.ndarray  # (number of real entries,) positions in the layout


class ValidScorer:
    """The selection score of built methods on one valid query set: ``scorer(method)`` for one,
    :meth:`many` for several variants answered together. The queries are parsed, grouped by type (in
    batches of ``batch_size``, as :func:`~pipeline.stages.answer.answer_query_set` answers them) and their
    truths laid out once."""

    def __init__(self, valid: QuerySet, batch_size: int = 256) -> None:
        frame = valid.frame
        parsed = valid.queries()
        ids = frame["id"].astype(str).to_numpy(dtype=object)
        types = frame["type"].astype(str).to_numpy(dtype=object)
        answers = [np.asarray(a, dtype=np.int64) for a in frame["answers_hard"]]
        utils = [np.asarray(u, dtype=np.float64) for u in frame["utilities_hard"]]
        # the metrics' layout: queries by id (the order evaluate's per-query table has), answers best first
        order = np.argsort(ids, kind="stable")
        place = np.empty(len(ids), dtype=np.int64)
        place[order] = np.arange(len(ids))
        counts = np.array([len(answers[i]) for i in order], dtype=np.int64)
        offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
        self.ids, self.types = ids[order], types[order]
        self.seg = np.repeat(np.arange(len(ids), dtype=np.int64), counts)
        self.truth = np.concatenate([utils[i] for i in order]) if len(ids) else np.zeros(0)
        self.n_queries = len(ids)
        groups: dict[str, list[int]] = {}
        for i, t in enumerate(types):
            groups.setdefault(t, []).append(i)
        self.chunks: list[_Chunk] = []
        for idx in groups.values():
            for s in range(0, len(idx), batch_size):
                part = idx[s : s + batch_size]
                width = max([len(answers[i]) for i in part] + [1])
                ents = torch.zeros((len(part), width), dtype=torch.int64)
                ok = torch.zeros((len(part), width), dtype=torch.bool)
                dest = []
                for b, i in enumerate(part):
                    k = len(answers[i])
                    ents[b, :k] = torch.as_tensor(answers[i].copy())
                    ok[b, :k] = True
                    dest.append(np.arange(offsets[place[i]], offsets[place[i]] + k))
                self.chunks.append(_Chunk([parsed[i] for i in part], ents, ok,
                                          np.concatenate(dest) if dest else np.zeros(0, np.int64)))

    def __call__(self, method: Method) -> float:
        return self.many([method])[0]

    def many(self, methods: Sequence[Method]) -> list[float]:
        """The selection score of each method, their utilities computed together batch by batch
        (``methods[0].utilities_of(methods, ...)``)."""
        return [selection_of(s) for s in self.summaries(methods)]

    def summaries(self, methods: Sequence[Method]) -> list[dict[str, dict[str, float]]]:
        """Each method's summary of the valid queries ({metric: {type: x100, "avg"}}: evaluate's
        summarise of the answers file it would write), their utilities computed together."""
        size = len(self.truth)
        pred = [np.empty(size) for _ in methods]
        first = [np.empty(size, dtype=np.int64) for _ in methods]
        ties = [np.empty(size, dtype=np.int64) for _ in methods]
        for chunk in self.chunks:
            with torch.no_grad():
                utils = methods[0].utilities_of(methods, chunk.queries)
            for j, util in enumerate(utils):
                p, f, t = _answer_groups(util, chunk)
                pred[j][chunk.dest], first[j][chunk.dest], ties[j][chunk.dest] = p, f, t
        return [summary_arrays(self.types, metric_arrays(self.seg, self.n_queries, self.truth, p, f, t))
                for p, f, t in zip(pred, first, ties, strict=True)]


def summary_arrays(types: np.ndarray, cols: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """:func:`pipeline.stages.evaluate.summarise` of per-query metric columns (queries in the per-query
    table's order) without the frame: per type the mean of the defined values x100 rounded to 4 places,
    the same numpy sums pandas' mean makes (tests/calibration/test_selection.py), then their mean."""
    from pipeline.core.metrics import METRICS
    from pipeline.softquery.types import ordered_types

    order = ordered_types(set(types.tolist()))
    where = {t: np.flatnonzero(types == t) for t in order}
    out: dict[str, dict[str, float]] = {}
    for name in METRICS:
        by_type: dict[str, float] = {}
        for t in order:
            vals = cols[name][where[t]]
            vals = vals[~np.isnan(vals)]
            if len(vals):
                by_type[t] = round(float(vals.mean()) * 100.0, 4)
        by_type["avg"] = round(float(np.mean(list(by_type.values()))), 4) if by_type else float("nan")
        out[name] = by_type
    return out


def selection_of(summary: dict[str, dict[str, float]]) -> float:
    """The selection score of a summary: the mean over metrics of their averages (:func:`pipeline.stages.
    answer.selection_score`'s rule)."""
    vals = [v["avg"] for v in summary.values() if not np.isnan(v["avg"])]
    return float(np.mean(vals)) if vals else -np.inf


def _answer_groups(util: torch.Tensor, chunk: _Chunk) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The predicted utility (float32 as float64, NaN kept), the tie group's first rank and its size of
    every ground-truth answer of the chunk, as :func:`pipeline.formats.answers.ranked_rows` gives them
    (NaN ranked as -inf, -0.0 equal to 0.0): each row's values sorted once, as integers that order as the
    floats do, the rows one after the other under one key, so that two binary searches per answer count
    the entities above it and those equal to it for every row at once."""
    u = util.detach().float().cpu().numpy()
    keys = _ordered_ints(np.where(np.isnan(u), -np.inf, u) + np.float32(0.0))  # + 0: -0.0 becomes 0.0
    b, n = keys.shape
    row = np.arange(b, dtype=np.int64)[:, None] << 33
    flat = (np.sort(keys, axis=1) + row).reshape(-1)  # ascending within each row, rows in order
    ents = chunk.entities.numpy()
    keep = chunk.valid.numpy()
    rows = np.broadcast_to(np.arange(b)[:, None], ents.shape)[keep]
    needle = np.take_along_axis(keys, ents, 1)[keep] + (rows.astype(np.int64) << 33)
    start = rows.astype(np.int64) * n
    better = n - (np.searchsorted(flat, needle, side="right") - start)
    tied = n - (np.searchsorted(flat, needle, side="left") - start) - better
    return np.take_along_axis(u, ents, 1)[keep].astype(np.float64), better + 1, tied


def _ordered_ints(x: np.ndarray) -> np.ndarray:
    """float32 values (no NaN, no -0.0) as int64 in [0, 2^32) ordered as the floats: the bits of a
    non-negative float, and those of a negative one flipped below them."""
    i = x.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, i ^ 0x7FFFFFFF, i) + (1 << 31)
