"""The four ranking metrics of many queries at once (no loop over queries): what the valid selection of
calibration reads after every L epoch and for every delta of D, where the per-query functions of
:mod:`pipeline.core.metrics` cost ~10 s per pass over 1,200 PPI5k valid queries (scipy's tau alone 4.8 s).

The queries' answers lie end to end (``seg``: each answer's query, ascending; within a query best first
by true utility, as :class:`~pipeline.core.metrics.Ranked` holds them). Every value is the per-query
function's: tau-b from the same integer counts and the same float operations as scipy's ``kendalltau``
(bit for bit), rho from exact sums of half-integer ranks (bit for bit), MAP and NDCG from the same terms
summed in another order (equal to ~1e-15; ``tests/metrics/test_metric_arrays.py``). The discordant pairs
are counted by a compiled merge sort per query where numba imports (:func:`discordant`).
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.core.metrics import expected_inverse_rank, harmonic

NAMES = ("tau", "rho", "map", "ndcg")


def metric_arrays(
    seg: np.ndarray, n_queries: int, truth: np.ndarray, predicted: np.ndarray, first: np.ndarray, ties: np.ndarray
) -> dict[str, np.ndarray]:
    """{tau, rho, map, ndcg: (n_queries,) float64, NaN where undefined} of answers laid end to end.

    seg: (T,) int64 query of each answer, non-decreasing; truth, predicted: (T,) float64 (NaN predicted
    counts as -inf); first, ties: (T,) int64 each answer's predicted tie group among all entities.

    Two sorts serve all four: the answers by prediction within each query (ties of ``first`` are ties of
    the prediction: the groups MAP reads, the ranks rho reads, the ties tau reads), and by (truth,
    prediction) for tau's discordant pairs; the truth's runs are read in the given order (best first)."""
    seg = np.asarray(seg, dtype=np.int64)
    t = np.asarray(truth, dtype=np.float64)
    p = np.asarray(predicted, dtype=np.float64)
    p = np.where(np.isnan(p), -np.inf, p) + 0.0  # NaN ranks as -inf; + 0: -0.0 is 0.0, as the ranking has it
    first = np.asarray(first, dtype=np.int64)
    ties = np.asarray(ties, dtype=np.int64)
    n = np.bincount(seg, minlength=n_queries).astype(np.int64)
    start = np.r_[0, np.cumsum(n)[:-1]].astype(np.int64)
    if len(seg) > 1 and not np.all((seg[1:] != seg[:-1]) | (t[1:] <= t[:-1])):
        order = np.lexsort((-t, seg))  # best first within each query (Ranked's order), stably
        seg, t, p, first, ties = seg[order], t[order], p[order], first[order], ties[order]
    pos = _positions(seg, start)
    truth_runs = _Runs(seg, pos, n, _run_starts(seg, t))  # best first
    by_p = np.lexsort((p, seg))  # ascending prediction within each query
    pred_runs = _Runs(seg[by_p], pos, n, _run_starts(seg[by_p], p[by_p]))
    out = {
        "ndcg": _ndcg(seg, n, pos, truth_runs, first, ties),
        "map": _average_precision(n, pred_runs, first[by_p], ties[by_p]),
        "rho": _spearman(seg, n, truth_runs, pred_runs, by_p),
        "tau": _kendall(seg, n, start, truth_runs, pred_runs, by_p),
    }
    for name in ("ndcg", "map"):
        out[name][n == 0] = math.nan
    return out


class _Runs:
    """Runs of equal values within each query of arrays in some order: per element its run's first place
    in that order (within the query), the run's length and index, and per query the number of runs."""

    def __init__(self, seg: np.ndarray, pos: np.ndarray, n: np.ndarray, starts: np.ndarray) -> None:
        self.id = np.cumsum(starts) - 1
        self.seg = seg
        self.lo = pos[starts][self.id]  # pos: 0..n-1 within each query, as laid out
        self.length = np.bincount(self.id)[self.id] if len(seg) else np.zeros(0, dtype=np.int64)
        self.starts = starts
        self.count = np.bincount(seg[starts], minlength=len(n))


def _positions(seg: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Each element's place within its query (0-based), for arrays laid out query by query."""
    return np.arange(len(seg), dtype=np.int64) - start[seg]


def _run_starts(seg: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """(T,) bool: where a run of equal (seg, keys...) begins, for arrays sorted by them."""
    flag = np.ones(len(seg), dtype=bool)
    if len(seg) > 1:
        same = seg[1:] == seg[:-1]
        for k in keys:
            same &= k[1:] == k[:-1]
        flag[1:] = ~same
    return flag


def _ndcg(seg: np.ndarray, n: np.ndarray, pos: np.ndarray, runs: _Runs, first: np.ndarray,
          ties: np.ndarray) -> np.ndarray:
    # D_i: the mean discount over the positions of a_i's group of equal true utilities. The prefix sums of
    # 1/log2(j + 1) depend on the position alone: one table for every query, the per-query cumsum's values.
    longest = int(n.max()) if len(n) else 0
    table = np.r_[0.0, np.cumsum(1.0 / np.log2(np.arange(2, longest + 2, dtype=np.float64)))]
    d = (table[runs.lo + runs.length] - table[runs.lo]) / runs.length
    gain = expected_inverse_rank(first, ties)
    q = len(n)
    num = np.bincount(seg, weights=gain * d, minlength=q)
    ideal = np.bincount(seg, weights=d / (pos + 1), minlength=q)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / ideal


def _average_precision(n: np.ndarray, runs: _Runs, first: np.ndarray, ties: np.ndarray) -> np.ndarray:
    # the predicted tie groups of each query's answers are its runs of equal prediction (equal values, equal
    # `first`), read from the highest: the group at `first` s holding h answers has the n - hi answers of
    # higher prediction before it (hi: its run's end in ascending order)
    st = runs.starts
    order = np.lexsort((first[st], runs.seg[st]))  # per query, ascending first (descending prediction)
    gseg = runs.seg[st][order]
    s = first[st][order].astype(np.float64)
    m = ties[st][order].astype(np.float64)
    h = runs.length[st][order]
    nq = n[gseg].astype(np.float64)
    a = nq - (runs.lo[st][order] + h)
    keep = s <= nq
    s, m, hf, a, nq, gseg = s[keep], m[keep], h[keep].astype(np.float64), a[keep], nq[keep], gseg[keep]
    j = np.minimum(m, nq - s + 1.0)
    inv = harmonic(s + j - 1.0) - harmonic(s - 1.0)
    within = np.where(m > 1, (hf - 1.0) / np.maximum(m - 1.0, 1.0), 0.0)
    total = (hf / m) * ((1.0 + a) * inv + within * (j - s * inv))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(gseg, weights=total, minlength=len(n)) / n


def _spearman(seg: np.ndarray, n: np.ndarray, truth_runs: _Runs, pred_runs: _Runs, by_p: np.ndarray) -> np.ndarray:
    # Average ranks (ascending, 1..n): the truth's runs are best first, so a run at places lo..lo+len-1
    # holds ascending ranks n-lo-len+1..n-lo; the prediction's runs are ascending already. The ranks are
    # half-integers and their mean (n + 1) / 2 is one: every product and partial sum below is exact, so
    # the sums equal the per-query function's in any order.
    nn = n[seg]
    ra = nn - truth_runs.lo - (truth_runs.length - 1) / 2.0
    rb = np.empty(len(seg), dtype=np.float64)
    rb[by_p] = pred_runs.lo + (pred_runs.length + 1) / 2.0
    centre = (nn + 1) / 2.0
    a, b = ra - centre, rb - centre
    q = len(n)
    sab = np.bincount(seg, weights=a * b, minlength=q)
    saa = np.bincount(seg, weights=a * a, minlength=q)
    sbb = np.bincount(seg, weights=b * b, minlength=q)
    undefined = (n < 2) | (truth_runs.count <= 1) | (pred_runs.count <= 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = sab / np.sqrt(saa * sbb)
    rho[undefined] = math.nan
    return rho


def _pairs(counts: np.ndarray) -> np.ndarray:
    return counts * (counts - 1) // 2


def _tied_pairs(seg: np.ndarray, n_queries: int, *keys: np.ndarray) -> np.ndarray:
    """(Q,) int64: pairs of answers of each query equal in every key (the arrays sorted by seg and keys)."""
    starts = _run_starts(seg, *keys)
    counts = np.diff(np.r_[np.flatnonzero(starts), len(seg)]).astype(np.int64)
    return _sums(seg[starts], _pairs(counts), n_queries)


def _sums(group: np.ndarray, values: np.ndarray, n_queries: int) -> np.ndarray:
    """(Q,) int64 sums of integer values by query (float64 sums are exact below 2^53: far above any count)."""
    return np.rint(np.bincount(group, weights=values.astype(np.float64), minlength=n_queries)).astype(np.int64)


def _kendall(seg: np.ndarray, n: np.ndarray, start: np.ndarray, truth_runs: _Runs, pred_runs: _Runs,
             by_p: np.ndarray) -> np.ndarray:
    """Kendall's tau-b as scipy.stats.kendalltau computes it: the discordant pairs counted exactly (the
    strict inversions of p once sorted by (t, p), within each query) and tau = (tot - xtie - ytie + ntie -
    2 dis) / sqrt(tot - xtie) / sqrt(tot - ytie), clipped to [-1, 1]."""
    q = len(n)
    # dense ranks within each query: of the truth ascending (its runs are best first) and of the prediction
    t_rank = truth_runs.count[seg] - 1 - (truth_runs.id - truth_runs.id[start[seg]])
    p_rank = np.empty(len(seg), dtype=np.int64)
    p_rank[by_p] = pred_runs.id - pred_runs.id[start[pred_runs.seg]]
    width = int(n.max()) + 1 if len(n) else 1
    order = np.argsort((seg * width + t_rank) * width + p_rank, kind="stable")  # by (query, truth, prediction)
    ss, tr, pr = seg[order], t_rank[order], p_rank[order]
    xtie = _sums(truth_runs.seg[truth_runs.starts], _pairs(truth_runs.length[truth_runs.starts]), q)
    ytie = _sums(pred_runs.seg[pred_runs.starts], _pairs(pred_runs.length[pred_runs.starts]), q)
    ntie = _tied_pairs(ss, q, tr, pr)
    dis = discordant(ss, n, start, pr)
    tot = _pairs(n)
    cmd = tot - xtie - ytie + ntie - 2 * dis
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = cmd.astype(np.float64) / np.sqrt((tot - xtie).astype(np.float64)) / np.sqrt((tot - ytie).astype(np.float64))
    tau = np.minimum(1.0, np.maximum(-1.0, tau))
    tau[(n < 2) | (xtie == tot) | (ytie == tot)] = math.nan
    return tau


def discordant(seg: np.ndarray, n: np.ndarray, start: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(Q,) int64: pairs i < j of the same query with v[i] > v[j]: compiled (numba, the merge count of
    :mod:`._inversions_numba`) where numba imports, else :func:`_inversions` (numpy passes). Both count
    exactly (tests/metrics/test_metric_arrays.py)."""
    kernel = _compiled()
    if kernel is None:
        return _inversions(seg, n, start, v)
    return kernel(start.astype(np.int64), n.astype(np.int64), np.ascontiguousarray(v, dtype=np.int64))


_KERNEL: dict[str, object] = {}


def _compiled() -> object:
    """The compiled merge count, or None where numba cannot be imported (or PIPELINE_KERNELS=torch)."""
    if "inversions" not in _KERNEL:
        import os

        kernel = None
        if os.environ.get("PIPELINE_KERNELS", "auto").strip().lower() != "torch":
            try:
                from pipeline.core._inversions_numba import inversions as kernel  # type: ignore[no-redef]
            except ImportError:
                kernel = None
        _KERNEL["inversions"] = kernel
    return _KERNEL["inversions"]


def _inversions(seg: np.ndarray, n: np.ndarray, start: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(Q,) int64: pairs i < j of the same query with v[i] > v[j] (v: integer keys in each query's order).

    A bottom-up merge count over every query at once: at width w, each element of a right block counts
    the elements of its left neighbour block (w elements) above it. The elements are kept sorted by
    (block, value) under one integer key, where each block occupies the same index range as in the
    query's order, so the count is one binary search of the right blocks' (sorted) keys among the left
    blocks' from the block's first index; the next width's order merges pairs of blocks (a stable sort of
    sorted runs, which timsort merges). ~log2(longest query) linear passes."""
    q = len(n)
    if len(v) < 2:
        return np.zeros(q, dtype=np.int64)
    pos = _positions(seg, start)
    base = start[seg]
    m = int(v.max()) + 1
    longest = int(n.max())
    out = np.zeros(q, dtype=np.int64)
    order = np.arange(len(v))  # sorted by (block, v) at the current width (width 1: every element alone)
    w = 1
    while w < longest:
        block = pos // w
        keys = ((base + block * w) * m + v)[order]  # ascending
        at = order[(block[order] % 2) == 1]  # the right blocks' elements, in sorted order
        left = base[at] + (block[at] - 1) * w  # the left block's first index (its range in keys)
        below = np.searchsorted(keys, left * m + v[at], side="right") - left  # its elements <= v
        out += _sums(seg[at], w - below, q)
        # the next width's blocks are pairs of these: merge each pair's two sorted runs
        w *= 2
        order = order[np.argsort(((base + (pos // w) * w) * m + v)[order], kind="stable")]
    return out
