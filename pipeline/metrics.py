"""Ranking metrics of soft-query answering (design section 1), as classes with metadata and a registry.

Every metric is a pure function of ``ranks``: ``(n,) int64``, the predicted rank among ALL entities
(1 = best) of each ground-truth answer ``a_1..a_n``, listed best first by true utility. Ranks come from
:func:`rank_entities` / :func:`ranks_of`: descending predicted utility, ties by entity id, ``-inf`` last.

- NDCG  = sum_i (1/R_i)/log2(i+1) / sum_i (1/i)/log2(i+1)
- MAP   = (1/n) sum_{k=1..n} hit_k * (#hits in top k)/k, hit_k = the entity at predicted rank k is an answer
- tau   = Kendall's tau-b between (1..n) and (R_1..R_n)      (only n > 1)
- rho   = Spearman's rho between (1..n) and (R_1..R_n)       (only n > 1)

Values are in natural units (NDCG 1 = perfect); tables multiply by 100.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import torch

from pipeline.registry import Registry

# ------------------------------------------------------------------------------------------------- ranking


def rank_entities(utility: torch.Tensor) -> torch.Tensor:
    """Rank of every entity among all entities, per row.

    utility: (n_entities,) or (B, n_entities) float, -inf = the entity fails the query (NaN counts as -inf).
    Returns the same shape, int64, 1 = best; ties broken by entity id (lower id first), -inf last.
    """
    u = torch.nan_to_num(utility.float(), nan=-math.inf)
    # A stable descending sort keeps equal utilities in entity-id order: exactly the tie rule.
    order = torch.sort(u, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    positions = torch.arange(1, u.shape[-1] + 1, device=u.device).expand_as(order)
    ranks.scatter_(-1, order, positions)
    return ranks


def ranks_of(utility: np.ndarray | torch.Tensor, entities: np.ndarray | list[int]) -> np.ndarray:
    """Predicted ranks (n,) int64 of the given entity ids under a utility vector (n_entities,).

    An independent numpy implementation of :func:`rank_entities` (a rank is 1 + #strictly better +
    #equal with a lower id), used for single queries and as the oracle in tests."""
    u = np.nan_to_num(np.asarray(utility, dtype=np.float64), nan=-np.inf)
    ent = np.asarray(entities, dtype=np.int64)
    ue = u[ent][:, None]
    better = (u[None, :] > ue).sum(axis=1)
    ids = np.arange(len(u))[None, :]
    equal_before = ((u[None, :] == ue) & (ids < ent[:, None])).sum(axis=1)
    return (1 + better + equal_before).astype(np.int64)


# ------------------------------------------------------------------------------------------ pure functions


def _as_ranks(ranks: np.ndarray | list[int]) -> np.ndarray:
    r = np.asarray(ranks, dtype=np.float64).reshape(-1)
    if r.size and (np.any(r < 1) or np.any(~np.isfinite(r))):
        raise ValueError(f"ranks must be finite and >= 1, got {r.tolist()[:10]}")
    return r


def ndcg(ranks: np.ndarray | list[int]) -> float:
    """NDCG of ranks (n,) of the ground-truth answers in best-first order; in (0, 1], 1 = perfect."""
    r = _as_ranks(ranks)
    if r.size == 0:
        return math.nan
    discount = 1.0 / np.log2(np.arange(2, r.size + 2))
    ideal = np.sum(discount / np.arange(1, r.size + 1))
    return float(np.sum(discount / r) / ideal)


def average_precision(ranks: np.ndarray | list[int]) -> float:
    """AP over the first n predicted ranks (n = number of answers); in [0, 1], 1 = perfect."""
    r = _as_ranks(ranks)
    n = r.size
    if n == 0:
        return math.nan
    ks = np.arange(1, n + 1)
    hits = np.isin(ks, r)  # hit_k: the entity at predicted rank k is an answer (ranks are distinct)
    hits_in_top = (r[None, :] <= ks[:, None]).sum(axis=1)
    return float(np.sum(hits * hits_in_top / ks) / n)


def kendall_tau(ranks: np.ndarray | list[int]) -> float:
    """Kendall's tau-b between positions (1..n) and ranks (n,); in [-1, 1], NaN when n < 2."""
    r = _as_ranks(ranks)
    n = r.size
    if n < 2:
        return math.nan
    i, j = np.triu_indices(n, k=1)
    s = np.sign(r[j] - r[i])  # positions j > i always, so the sign of the rank difference decides
    pairs = n * (n - 1) / 2
    tied_pairs = np.sum(s == 0)
    if tied_pairs == pairs:
        return math.nan
    return float(np.sum(s) / math.sqrt(pairs * (pairs - tied_pairs)))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of x ascending, ties sharing their average rank (as scipy.stats.rankdata)."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    # Each distinct value occupies the positions after all smaller values: average its first and last.
    last = np.cumsum(counts)
    return ((last - counts + 1 + last) / 2.0)[inverse]


def spearman_rho(ranks: np.ndarray | list[int]) -> float:
    """Spearman's rho between positions (1..n) and ranks (n,); in [-1, 1], NaN when n < 2."""
    r = _as_ranks(ranks)
    n = r.size
    if n < 2:
        return math.nan
    a = np.arange(1, n + 1, dtype=np.float64)
    b = _average_ranks(r)
    b = b - b.mean()
    a = a - a.mean()
    denom = math.sqrt(float(np.sum(a * a) * np.sum(b * b)))
    if denom == 0.0:
        return math.nan
    return float(np.sum(a * b) / denom)


# ----------------------------------------------------------------------------------------- metric classes


class Metric:
    """A per-query ranking metric with its metadata (for `pipeline ls metrics` and the tables)."""

    name: ClassVar[str]
    label: ClassVar[str]  # column header of the paper-style table
    description: ClassVar[str]
    lower: ClassVar[float]
    upper: ClassVar[float]
    increasing: ClassVar[bool] = True
    min_answers: ClassVar[int] = 1  # queries with fewer ground-truth answers get NaN and are left out
    synonyms: ClassVar[tuple[str, ...]] = ()

    def __call__(self, ranks: np.ndarray | list[int]) -> float:
        """The metric of one query; NaN when it has fewer than min_answers answers."""
        if len(ranks) < self.min_answers:
            return math.nan
        return self.compute(ranks)

    def compute(self, ranks: np.ndarray | list[int]) -> float:
        raise NotImplementedError

    def compute_rows(self, ranks: np.ndarray) -> np.ndarray:
        """(Q,) the metric of Q queries with the same number n >= min_answers of answers at once: ranks
        (Q, n) float64, each row's ranks distinct (see metric_columns). Equal to compute row by row up to
        float summation order; subclasses vectorise it."""
        return np.array([self.compute(r) for r in ranks], dtype=np.float64)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NDCG(Metric):
    name = "ndcg"
    label = "NDCG"
    description = "normalised discounted cumulative gain with gain 1/R_i of the i-th true answer"
    lower, upper = 0.0, 1.0
    synonyms = ("normalized_dcg",)

    def compute(self, ranks: np.ndarray | list[int]) -> float:
        return ndcg(ranks)

    def compute_rows(self, ranks: np.ndarray) -> np.ndarray:
        n = ranks.shape[1]
        discount = 1.0 / np.log2(np.arange(2, n + 2))
        ideal = np.sum(discount / np.arange(1, n + 1))
        return np.sum(discount / ranks, axis=1) / ideal


class MAP(Metric):
    name = "map"
    label = "MAP"
    description = "mean average precision over the top-n predictions (n = number of true answers)"
    lower, upper = 0.0, 1.0
    synonyms = ("average_precision", "ap")

    def compute(self, ranks: np.ndarray | list[int]) -> float:
        return average_precision(ranks)

    def compute_rows(self, ranks: np.ndarray) -> np.ndarray:
        q, n = ranks.shape
        ks = np.arange(1, n + 1, dtype=np.float64)
        # #ranks <= k and < k per row by one searchsorted over the rows laid end to end (row i shifted by
        # i * span, so the flat array stays sorted); distinct ranks: hit_k = the difference of the two
        span = float(ranks.max()) + n + 1.0
        shift = np.arange(q, dtype=np.float64)[:, None] * span
        flat = (np.sort(ranks, axis=1) + shift).ravel()
        at = (ks[None, :] + shift).ravel()
        base = (np.arange(q) * n)[:, None]
        upto = np.searchsorted(flat, at, side="right").reshape(q, n) - base
        below = np.searchsorted(flat, at, side="left").reshape(q, n) - base
        return np.sum((upto > below) * upto / ks, axis=1) / n


class KendallTau(Metric):
    name = "tau"
    label = "tau"
    description = "Kendall's tau between the true order of the answers and their predicted ranks (n > 1)"
    lower, upper = -1.0, 1.0
    min_answers = 2
    synonyms = ("kendall", "kendall_tau")

    def compute(self, ranks: np.ndarray | list[int]) -> float:
        return kendall_tau(ranks)

    def compute_rows(self, ranks: np.ndarray) -> np.ndarray:
        q, n = ranks.shape
        i, j = np.triu_indices(n, k=1)
        pairs = n * (n - 1) / 2
        out = np.empty(q, dtype=np.float64)
        step = max(1, (1 << 22) // max(1, i.size))  # rows per chunk: at most ~4M pair signs at once
        for lo in range(0, q, step):
            r = ranks[lo : lo + step]
            # distinct ranks: no tied pair, so tau-b's denominator is the number of pairs (as compute)
            out[lo : lo + step] = np.sum(np.sign(r[:, j] - r[:, i]), axis=1) / math.sqrt(pairs * pairs)
        return out


class SpearmanRho(Metric):
    name = "rho"
    label = "rho"
    description = "Spearman's rho between the true order of the answers and their predicted ranks (n > 1)"
    lower, upper = -1.0, 1.0
    min_answers = 2
    synonyms = ("spearman", "spearman_rho")

    def compute(self, ranks: np.ndarray | list[int]) -> float:
        return spearman_rho(ranks)

    def compute_rows(self, ranks: np.ndarray) -> np.ndarray:
        q, n = ranks.shape
        a = np.arange(1, n + 1, dtype=np.float64)
        b = np.empty_like(ranks)  # distinct ranks: the average ranks are the positions in sorted order
        np.put_along_axis(b, np.argsort(ranks, axis=1), a[None, :].repeat(q, 0), axis=1)
        b = b - b.mean(axis=1, keepdims=True)
        a = a - a.mean()
        denom = np.sqrt(np.sum(a * a) * np.sum(b * b, axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(denom == 0.0, math.nan, np.sum(a[None, :] * b, axis=1) / denom)


# The paper's column order: tau, rho, MAP, NDCG.
METRICS: Registry[Metric] = Registry(
    "metric",
    (KendallTau(), SpearmanRho(), MAP(), NDCG()),
    row=lambda m: {
        "name": m.name,
        "range": f"[{m.lower}, {m.upper}]",
        "increasing": m.increasing,
        "description": m.description,
    },
)


def get_metric(name: str) -> Metric:
    """A registered metric by name or synonym (case-insensitive); unknown names raise UnknownNameError."""
    return METRICS.get(name)


def metric_columns(ranks: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Every registered metric of many queries at once: {name: (Q,) float64, NaN where undefined}, equal to
    calling each metric query by query (up to float summation order). Queries with the same number of
    answers go through the metric's compute_rows together; a query with a repeated rank (never from
    rank_entities, which ranks every entity once) through compute."""
    out = {name: np.full(len(ranks), math.nan) for name in METRICS.names()}
    by_n: dict[int, list[int]] = {}
    for q, r in enumerate(ranks):
        by_n.setdefault(len(r), []).append(q)
    for n, rows in by_n.items():
        if n == 0:
            continue
        block = np.stack([_as_ranks(ranks[q]) for q in rows])
        distinct = (np.diff(np.sort(block, axis=1), axis=1) > 0).all(axis=1)
        fast, slow = np.asarray(rows)[distinct], np.asarray(rows)[~distinct]
        for name, m in METRICS.items():
            if n < m.min_answers:
                continue
            if fast.size:
                out[name][fast] = m.compute_rows(block[distinct])
            for q in slow:
                out[name][q] = m.compute(ranks[q])
    return out


def evaluate_ranks(ranks: np.ndarray | list[int]) -> dict[str, float]:
    """Every registered metric of one query: {name: value (NaN where undefined)}."""
    return {name: m(ranks) for name, m in METRICS.items()}
