"""Ranking metrics of soft-query answering (design section 1), as classes with metadata and a registry.

Ties decide nothing. Every metric is a pure function of one :class:`Ranked` query: its ground-truth answers
``a_1..a_n`` with their true utilities ``t``, their predicted utilities ``p`` and, for each answer, the
predicted tie group it sits in among ALL entities (``first`` = 1 + the number of entities predicted
strictly better, ``ties`` = the group's size, itself included). No metric reads an entity id, so
relabelling the graph changes nothing.

- NDCG = sum_i E[1/R_i] D_i / sum_i (1/i) D_i. ``E[1/R_i]`` is the mean of 1/r over the ranks
  ``first..first+ties-1`` of a_i's predicted tie group (the expectation over the group's orders); ``D_i``
  is the mean of 1/log2(j+1) over the positions j of a_i's tie group among the true answers (the
  expectation over the truth's tie orders). Without ties anywhere this is the paper's
  sum_i (1/R_i)/log2(i+1) / sum_i (1/i)/log2(i+1). The denominator is the numerator of the true utilities
  themselves (and of every ranking consistent with them), so those score exactly 1.
- MAP = (1/n) sum_{k=1..n} E[hit_k * (#hits in top k)] / k, the expectation over the orders of every
  predicted tie group (exact, in closed form: see :func:`average_precision`). Constant predictions score
  the expected AP of a uniformly random ranking.
- tau = Kendall's tau-b and rho = Spearman's rho (average ranks for ties) between ``t`` and ``p``, for
  ``n > 1``; undefined (NaN, left out of the averages and counted) where either side is constant.

The paper's own evaluation code (predicted ties by entity id, the truth's ties in the order its query files
store them, tau and rho left out of single-answer queries) is :func:`paper_protocol`, reported beside,
labelled as such.
Values are in natural units (NDCG 1 = perfect); tables multiply by 100.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from pipeline.core.registry import Registry

if TYPE_CHECKING:  # torch is imported by the functions that rank tensors: the tables import no torch
    import torch

# The paper's evaluation truncates the ground truth to its stored top 100 answers.
PAPER_TOP = 100

# ------------------------------------------------------------------------------------------------- ranking


def _nan_as_neginf(u: torch.Tensor) -> torch.Tensor:
    """NaN -> -inf, everything else (infinities included) kept; nan_to_num alone would also turn -inf
    into the lowest finite float, splitting one tie group in two."""
    import torch

    u = u if u.is_floating_point() else u.float()
    return torch.where(torch.isnan(u), torch.full_like(u, -math.inf), u)


def _np_nan_as_neginf(x: np.ndarray | Sequence[float]) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isnan(x), -np.inf, x)


def rank_entities(utility: torch.Tensor) -> torch.Tensor:
    """Rank of every entity among all entities, per row, ties broken by entity id (the listing order of
    the top answers and the paper protocol's predicted rank; no tie-aware metric reads it).

    utility: (n_entities,) or (B, n_entities) float, -inf = the entity fails the query (NaN counts as -inf).
    Returns the same shape, int64, 1 = best; ties broken by entity id (lower id first), -inf last.
    """
    return rank_and_tie_groups(utility)[0]


def tie_groups(utility: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The predicted tie group of every entity, per row: (first, ties), both the shape of utility, int64.

    first = 1 + the number of entities with a strictly larger utility; ties = the number of entities with
    the same utility (itself included). NaN counts as -inf, and every -inf shares one group at the end."""
    _, first, ties = rank_and_tie_groups(utility)
    return first, ties


def rank_and_tie_groups(utility: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rank, first, ties) of :func:`rank_entities` and :func:`tie_groups` from one sort (the answers
    file needs all three for every batch)."""
    import torch

    u = _nan_as_neginf(utility)
    squeeze = u.dim() == 1
    if squeeze:
        u = u[None]
    b, n = u.shape
    if n == 0:
        empty = torch.zeros_like(u, dtype=torch.int64)
        return tuple(e[0] if squeeze else e for e in (empty, empty, empty))  # type: ignore[return-value]
    # A stable descending sort keeps equal utilities in entity-id order: exactly the rank's tie rule.
    vals, order = torch.sort(u, dim=-1, descending=True, stable=True)
    starts = torch.ones_like(vals, dtype=torch.bool)
    starts[:, 1:] = vals[:, 1:] != vals[:, :-1]
    # Tie groups over the flattened rows (each row's first slot starts a group, so none spans two rows):
    # a slot's group by a running count of starts, each group's first slot and the next group's first.
    flat = starts.reshape(-1)
    gid = torch.cumsum(flat, 0).sub_(1)
    gstart = torch.nonzero(flat, as_tuple=True)[0]
    gnext = torch.cat([gstart[1:], torch.full((1,), b * n, dtype=gstart.dtype, device=u.device)])
    first = (gstart % n + 1).index_select(0, gid).view(b, n)  # 1 + the slots before the group in its row
    ties = (gnext - gstart).index_select(0, gid).view(b, n)
    pos = torch.arange(1, n + 1, device=u.device).expand(b, n)
    out = [torch.empty_like(order) for _ in range(3)]
    out[0].scatter_(-1, order, pos)
    out[1].scatter_(-1, order, first)
    out[2].scatter_(-1, order, ties)
    return tuple(o[0] if squeeze else o for o in out)  # type: ignore[return-value]


def ranks_of(utility: np.ndarray | torch.Tensor, entities: np.ndarray | list[int]) -> np.ndarray:
    """Predicted ranks (n,) int64 of the given entity ids under a utility vector (n_entities,), ties by id.

    An independent numpy implementation of :func:`rank_entities` (a rank is 1 + #strictly better +
    #equal with a lower id), used for single queries and as the oracle in tests."""
    u = _np_nan_as_neginf(utility)
    ent = np.asarray(entities, dtype=np.int64)
    ue = u[ent][:, None]
    better = (u[None, :] > ue).sum(axis=1)
    ids = np.arange(len(u))[None, :]
    equal_before = ((u[None, :] == ue) & (ids < ent[:, None])).sum(axis=1)
    return (1 + better + equal_before).astype(np.int64)


# -------------------------------------------------------------------------------------------- one query


@dataclass(frozen=True)
class Ranked:
    """What the metrics read of one query: its n ground-truth answers, best first by true utility.

    truth: (n,) float64 true utilities; predicted: (n,) float64 predicted utilities (-inf = fails);
    first, ties: (n,) int64, each answer's predicted tie group among ALL entities (:func:`tie_groups`);
    id_rank: (n,) int64 the predicted rank with ties by entity id, read only by :func:`paper_protocol`;
    paper_ranks: (m,) int64 the predicted ranks (ties by id) of the list the paper protocol reads, in its
    order (the SQUK generator's or the published file's; None where the query set has no such list)."""

    truth: np.ndarray
    predicted: np.ndarray
    first: np.ndarray
    ties: np.ndarray
    id_rank: np.ndarray | None = None
    paper_ranks: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.truth)
        for name in ("predicted", "first", "ties"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"Ranked.{name} has {len(getattr(self, name))} values for {n} answers")
        if n and (np.any(np.asarray(self.first) < 1) or np.any(np.asarray(self.ties) < 1)):
            raise ValueError("Ranked.first and Ranked.ties must be >= 1")

    @property
    def n(self) -> int:
        return len(self.truth)

    @classmethod
    def from_utilities(
        cls, truth_utility: np.ndarray | torch.Tensor, predicted: np.ndarray | torch.Tensor,
        answers: np.ndarray | Sequence[int],
    ) -> Ranked:
        """A query from two utility vectors (n_entities,) and its answer ids (best first by truth_utility):
        the oracle path of tests and single queries."""
        import torch

        p = torch.as_tensor(_np_nan_as_neginf(predicted))
        ans = np.asarray(answers, dtype=np.int64)
        first, ties = tie_groups(p)
        t = np.asarray(truth_utility, dtype=np.float64)[ans]
        return cls(
            truth=t, predicted=p.numpy()[ans], first=first.numpy()[ans], ties=ties.numpy()[ans],
            id_rank=rank_entities(p).numpy()[ans],
        )


def harmonic(x: np.ndarray | float) -> np.ndarray:
    """H(x) = sum_{k=1..x} 1/k for integers x >= 0 (float64), exact to ~1e-15 through the digamma function."""
    import torch

    t = torch.as_tensor(np.asarray(x, dtype=np.float64))
    return (torch.special.digamma(t + 1.0) + 0.5772156649015329).numpy()


def expected_inverse_rank(first: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """E[1/R] of an entity placed uniformly among the ranks first..first+ties-1 (its tie group)."""
    first = np.asarray(first, dtype=np.float64)
    ties = np.asarray(ties, dtype=np.float64)
    return (harmonic(first + ties - 1.0) - harmonic(first - 1.0)) / ties


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For values sorted descending: each value's run start and run length (equal values form a run)."""
    n = len(values)
    starts = np.r_[True, values[1:] != values[:-1]] if n else np.zeros(0, dtype=bool)
    idx = np.flatnonzero(starts)
    lengths = np.diff(np.r_[idx, n])
    run = np.cumsum(starts) - 1
    return idx[run], lengths[run]


def truth_discounts(truth: np.ndarray) -> np.ndarray:
    """D_i (n,) for truth utilities best first: the mean of 1/log2(j+1) over the positions j (1-based) of
    a_i's group of equal true utilities."""
    t = np.asarray(truth, dtype=np.float64)
    n = len(t)
    disc = 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))
    start, length = _runs(t)
    csum = np.r_[0.0, np.cumsum(disc)]
    return (csum[start + length] - csum[start]) / length


def _best_first(q: Ranked) -> Ranked:
    """The query with its answers sorted by true utility, best first (a stable sort: no-op when stored so)."""
    order = np.argsort(-np.asarray(q.truth, dtype=np.float64), kind="stable")
    if np.array_equal(order, np.arange(q.n)):
        return q
    cols = [np.asarray(c)[order] for c in (q.truth, q.predicted, q.first, q.ties)]
    return Ranked(*cols, None if q.id_rank is None else np.asarray(q.id_rank)[order])


def ndcg(q: Ranked) -> float:
    """Tie-aware NDCG in (0, 1]; 1 = the true utilities or any ranking consistent with them; NaN when n = 0."""
    if q.n == 0:
        return math.nan
    q = _best_first(q)
    d = truth_discounts(q.truth)
    gain = expected_inverse_rank(q.first, q.ties)
    ideal = np.sum(d / np.arange(1, q.n + 1))
    return float(np.sum(gain * d) / ideal)


def average_precision(q: Ranked) -> float:
    """Tie-aware AP over the first n predicted ranks, in [0, 1]: the exact expectation over the orders of
    every predicted tie group.

    A group occupying ranks s..s+m-1 and holding h answers, with A answers ranked before it: its j-th rank
    is a hit with probability h/m, and given that, the j-1 ranks before it within the group hold
    (j-1)(h-1)/(m-1) answers on average (hypergeometric). So E[hit_k * hits_in_top_k] = (h/m)(1 + A +
    (j-1)(h-1)/(m-1)), summed over the group's ranks k <= n divided by k with harmonic numbers."""
    n = q.n
    if n == 0:
        return math.nan
    first = np.asarray(q.first, dtype=np.int64)
    ties = np.asarray(q.ties, dtype=np.int64)
    s, idx, h = np.unique(first, return_index=True, return_counts=True)
    m = ties[idx].astype(np.float64)
    a = np.cumsum(np.r_[0, h[:-1]]).astype(np.float64)  # answers in the groups before (s ascending)
    keep = s <= n
    s, m, h, a = s[keep].astype(np.float64), m[keep], h[keep].astype(np.float64), a[keep]
    j = np.minimum(m, n - s + 1.0)  # ranks of the group inside the top n
    inv = harmonic(s + j - 1.0) - harmonic(s - 1.0)  # sum of 1/k over them
    within = np.where(m > 1, (h - 1.0) / np.maximum(m - 1.0, 1.0), 0.0)
    total = (h / m) * ((1.0 + a) * inv + within * (j - s * inv))
    return float(np.sum(total) / n)


def _defined(t: np.ndarray, p: np.ndarray) -> bool:
    return len(t) > 1 and not (np.all(t == t[0]) or np.all(p == p[0]))


def kendall_tau(q: Ranked) -> float:
    """Kendall's tau-b between true and predicted utilities; NaN when n < 2 or either side is constant.

    O(n log n) through scipy (Knight's algorithm): a truth tie group can hold every entity of the graph
    (15,000 on CN15k), where a pair matrix would not do. tests/metrics checks it against the pairs."""
    t = np.asarray(q.truth, dtype=np.float64)
    p = _np_nan_as_neginf(q.predicted)
    if not _defined(t, p):
        return math.nan
    from scipy.stats import kendalltau  # ~0.3 s to import: only where a tau is computed

    # scipy ranks the values itself; -inf (a failing answer) is an ordinary, lowest value there
    return float(kendalltau(t, p, variant="b").statistic)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of x ascending, ties sharing their average rank (as scipy.stats.rankdata)."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    # Each distinct value occupies the positions after all smaller values: average its first and last.
    last = np.cumsum(counts)
    return ((last - counts + 1 + last) / 2.0)[inverse]


def spearman_rho(q: Ranked) -> float:
    """Spearman's rho (Pearson's r of average ranks) between true and predicted utilities; NaN when n < 2
    or either side is constant."""
    t = np.asarray(q.truth, dtype=np.float64)
    p = _np_nan_as_neginf(q.predicted)
    if not _defined(t, p):
        return math.nan
    a = average_ranks(t)
    b = average_ranks(p)
    a, b = a - a.mean(), b - b.mean()
    return float(np.sum(a * b) / math.sqrt(float(np.sum(a * a) * np.sum(b * b))))


def doubly_tied_pairs(q: Ranked) -> tuple[int, int]:
    """(pairs of answers tied in both true and predicted utility, all pairs): the pairs that tie rules
    used to count as agreement. O(n log n): pairs within each group of equal (true, predicted) values."""
    n = q.n
    if n < 2:
        return 0, 0
    both = np.stack([np.asarray(q.truth, dtype=np.float64), _np_nan_as_neginf(q.predicted)], axis=1)
    _, counts = np.unique(both, axis=0, return_counts=True)
    return int(np.sum(counts * (counts - 1) // 2)), n * (n - 1) // 2


# ------------------------------------------------------------------------------- the paper's protocol


def ndcg_of_ranks(ranks: np.ndarray) -> float:
    """The paper's NDCG of distinct ranks (n,) of the answers in truth order."""
    r = np.asarray(ranks, dtype=np.float64)
    discount = 1.0 / np.log2(np.arange(2, r.size + 2))
    return float(np.sum(discount / r) / np.sum(discount / np.arange(1, r.size + 1)))


def ap_of_ranks(ranks: np.ndarray) -> float:
    """The paper's AP of distinct ranks (n,) over the first n predictions."""
    r = np.sort(np.asarray(ranks, dtype=np.float64))
    ks = np.arange(1, r.size + 1, dtype=np.float64)
    hits = np.isin(ks, r)
    hits_in_top = np.searchsorted(r, ks, side="right")
    return float(np.sum(hits * hits_in_top / ks) / r.size)


# The paper protocol reads the truth in the order its query file stores it: the published files hold what the
# SQUK generator wrote (the last 100 of numpy's default argsort on an AVX-512 machine,
# pipeline.squk.generator_order), and a tied pair in that order is concordant or discordant with the
# predicted ranks depending on it. A query set that carries that list (answers_paper: sampled valid and test
# sets, imported sets) is read in it, once: the authors' own path. A query set written before it has only our
# order (ids within a tie); for those the protocol estimates the file's order by averaging PAPER_DRAWS seeded
# random orders of each tie group ("shuffled"), or reads our order reversed ("reversed", the rule before).
PAPER_TIE_ORDERS = ("shuffled", "reversed")
PAPER_SEED = 20240303  # the tie orders' seed, with each query's key (its id): the same orders on every run
PAPER_DRAWS = 32


def paper_truth_order(truth: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """The positions of the truth (n,) best first, as the authors' evaluation reads a query file: equal true
    utilities in a random order drawn from rng (None: our stored order, entity ids, reversed)."""
    t = np.asarray(truth, dtype=np.float64)
    if rng is None:
        return np.argsort(t, kind="stable")[::-1].copy()  # best first; ties in reversed stored order
    order = np.argsort(-t, kind="stable")
    start, length = _runs(t[order])
    shuffled = order.copy()
    for s in np.unique(start[length > 1]):
        m = int(length[s])
        shuffled[s : s + m] = order[s : s + m][rng.permutation(m)]
    return shuffled


def paper_protocol(q: Ranked, key: int = 0, tie_order: str = "shuffled", draws: int = PAPER_DRAWS) -> dict[str, float]:
    """The metrics as the paper's released evaluation computes them (for comparison only; ids decide ties):
    the truth read in the order its query file stores it and truncated to its first 100 answers; each
    answer's predicted rank with ties by entity id; tau and rho (scipy's, between the truth positions 1..n
    and those ranks) only for queries with more than one answer (NaN otherwise: the authors' averages
    leave them out), MAP and NDCG for every query. Where the query carries that list (``paper_ranks``) it
    is read once, as is; otherwise tie_order says how the truth's ties are ordered: "shuffled", random
    orders (seeded by PAPER_SEED and key), each metric the mean over ``draws`` orders (an estimate of the
    file's order); "reversed": our stored order (ids) reversed, once (see PAPER_TIE_ORDERS)."""
    if tie_order not in PAPER_TIE_ORDERS:
        raise ValueError(f"tie_order must be one of {', '.join(PAPER_TIE_ORDERS)}, not {tie_order!r}")
    if q.paper_ranks is not None:
        if len(q.paper_ranks) == 0:
            return {"tau": math.nan, "rho": math.nan, "map": math.nan, "ndcg": math.nan}
        return _paper_metrics(np.asarray(q.paper_ranks, dtype=np.float64)[:PAPER_TOP])
    if q.id_rank is None:
        raise ValueError("paper_protocol needs Ranked.id_rank or Ranked.paper_ranks")
    if q.n == 0:
        return {"tau": math.nan, "rho": math.nan, "map": math.nan, "ndcg": math.nan}
    truth = np.asarray(q.truth, dtype=np.float64)
    ranks = np.asarray(q.id_rank, dtype=np.float64)
    if tie_order == "reversed":
        return _paper_metrics(ranks[paper_truth_order(truth, None)[:PAPER_TOP]])
    rng = np.random.default_rng([PAPER_SEED, int(key)])
    if len(np.unique(truth)) == len(truth):
        draws = 1  # no tie: every draw reads the same order
    runs = [_paper_metrics(ranks[paper_truth_order(truth, rng)[:PAPER_TOP]]) for _ in range(draws)]
    return {m: float(np.mean([r[m] for r in runs])) for m in runs[0]}


def _paper_metrics(r: np.ndarray) -> dict[str, float]:
    """The authors' per-query metrics of the predicted ranks r (n,) of the answers in file order."""
    n = len(r)
    if n == 1:
        tau = rho = math.nan
    else:
        pos = np.arange(1, n + 1, dtype=np.float64)
        i, j = np.triu_indices(n, k=1)
        tau = float(np.sum(np.sign(r[j] - r[i])) / (n * (n - 1) / 2))
        ar = average_ranks(r)
        a, b = pos - pos.mean(), ar - ar.mean()
        rho = float(np.sum(a * b) / math.sqrt(float(np.sum(a * a) * np.sum(b * b))))
    return {"tau": tau, "rho": rho, "map": ap_of_ranks(r), "ndcg": ndcg_of_ranks(r)}


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

    def __call__(self, q: Ranked) -> float:
        """The metric of one query; NaN where it is undefined (fewer than min_answers answers, ...)."""
        if q.n < self.min_answers:
            return math.nan
        return self.compute(q)

    def compute(self, q: Ranked) -> float:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NDCG(Metric):
    name = "ndcg"
    label = "NDCG"
    description = "normalised DCG, gain E[1/R_i] of the i-th true answer, ties share their ranks"
    lower, upper = 0.0, 1.0
    synonyms = ("normalized_dcg",)

    def compute(self, q: Ranked) -> float:
        return ndcg(q)


class MAP(Metric):
    name = "map"
    label = "MAP"
    description = "mean average precision over the top-n predictions, expected over predicted tie orders"
    lower, upper = 0.0, 1.0
    synonyms = ("average_precision", "ap")

    def compute(self, q: Ranked) -> float:
        return average_precision(q)


class KendallTau(Metric):
    name = "tau"
    label = "tau"
    description = "Kendall's tau-b between true and predicted utilities of the answers (n > 1, neither constant)"
    lower, upper = -1.0, 1.0
    min_answers = 2
    synonyms = ("kendall", "kendall_tau")

    def compute(self, q: Ranked) -> float:
        return kendall_tau(q)


class SpearmanRho(Metric):
    name = "rho"
    label = "rho"
    description = "Spearman's rho (average ranks) between true and predicted utilities (n > 1, neither constant)"
    lower, upper = -1.0, 1.0
    min_answers = 2
    synonyms = ("spearman", "spearman_rho")

    def compute(self, q: Ranked) -> float:
        return spearman_rho(q)


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


def evaluate_query(q: Ranked) -> dict[str, float]:
    """Every registered metric of one query: {name: value (NaN where undefined)}."""
    return {name: m(q) for name, m in METRICS.items()}


def chance(q: Ranked, n_entities: int) -> Ranked:
    """The same answers under constant predictions over n_entities: one tie group holding every entity, so
    every metric takes its expected value under a uniformly random ranking (tau and rho are undefined)."""
    n = q.n
    return Ranked(q.truth, np.zeros(n), np.ones(n, dtype=np.int64), np.full(n, n_entities, dtype=np.int64),
                  np.arange(1, n + 1, dtype=np.int64))


def metric_columns(
    queries: Sequence[Ranked], paper: bool = False, keys: Sequence[int] | None = None, tie_order: str = "shuffled"
) -> dict[str, np.ndarray]:
    """Every registered metric of many queries: {name: (Q,) float64, NaN where undefined}; with paper, also
    ``paper_<name>`` (:func:`paper_protocol`, each query's truth ties ordered by its key, default its
    position; tie_order as there), ``paper_n`` (how many answers the protocol read), ``tied_pairs`` / ``pairs`` (:func:`doubly_tied_pairs` over the first 100
    answers, the truth the paper's protocol reads) and ``tied_pairs_all`` / ``pairs_all`` (over every
    answer, whole tie groups included)."""
    if keys is not None and len(keys) != len(queries):
        raise ValueError(f"metric_columns: {len(keys)} keys for {len(queries)} queries")
    names = list(METRICS.names())
    extra = [*(f"paper_{m}" for m in names), "paper_n", "tied_pairs", "pairs", "tied_pairs_all", "pairs_all"] if paper else []
    out = {name: np.full(len(queries), math.nan) for name in [*names, *extra]}
    for i, q in enumerate(queries):
        if q.n == 0:
            continue
        for name, m in METRICS.items():
            out[name][i] = m(q)
        if paper:
            for name, v in paper_protocol(q, i if keys is None else keys[i], tie_order).items():
                out[f"paper_{name}"][i] = v
            out["paper_n"][i] = min(PAPER_TOP, q.n if q.paper_ranks is None else len(q.paper_ranks))
            out["tied_pairs_all"][i], out["pairs_all"][i] = doubly_tied_pairs(q)
            top = Ranked(q.truth[:PAPER_TOP], q.predicted[:PAPER_TOP], q.first[:PAPER_TOP], q.ties[:PAPER_TOP])
            out["tied_pairs"][i], out["pairs"][i] = doubly_tied_pairs(top)
    return out
