"""The four ranking metrics of many queries at once (no loop over queries): what the valid selection of
calibration reads after every L epoch and for every delta of D, where the per-query functions of
:mod:`pipeline.core.metrics` cost ~10 s per pass over 1,200 PPI5k valid queries (scipy's tau alone 4.8 s).

The queries' answers lie end to end (``seg``: each answer's query, ascending; within a query best first
by true utility, as :class:`~pipeline.core.metrics.Ranked` holds them). Every value is the per-query
function's: tau-b from the same integer counts and the same float operations as scipy's ``kendalltau``
(bit for bit), rho from exact sums of half-integer ranks (bit for bit), MAP and NDCG from the same terms
summed in another order (equal to ~1e-15; ``tests/metrics/test_metric_arrays.py``).
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
    counts as -inf); first, ties: (T,) int64 each answer's predicted tie group among all entities."""
    seg = np.asarray(seg, dtype=np.int64)
    t = np.asarray(truth, dtype=np.float64)
    p = np.asarray(predicted, dtype=np.float64)
    p = np.where(np.isnan(p), -np.inf, p)
    first = np.asarray(first, dtype=np.int64)
    ties = np.asarray(ties, dtype=np.int64)
    n = np.bincount(seg, minlength=n_queries).astype(np.int64)
    start = np.r_[0, np.cumsum(n)[:-1]].astype(np.int64)
    out = {
        "ndcg": _ndcg(seg, n, start, t, first, ties),
        "map": _average_precision(seg, n, start, first, ties),
        "rho": _spearman(seg, n, start, t, p),
        "tau": _kendall(seg, n, start, t, p),
    }
    for name in ("ndcg", "map"):
        out[name][n == 0] = math.nan
    return out


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


def _ndcg(seg: np.ndarray, n: np.ndarray, start: np.ndarray, t: np.ndarray, first: np.ndarray,
          ties: np.ndarray) -> np.ndarray:
    order = np.lexsort((-t, seg))  # best first within each query (stable: a no-op when stored so)
    seg, t, first, ties = seg[order], t[order], first[order], ties[order]
    pos = _positions(seg, start)
    # D_i: the mean discount over the positions of a_i's group of equal true utilities. The prefix sums of
    # 1/log2(j + 1) depend on the position alone: one table for every query, the per-query cumsum's values.
    longest = int(n.max()) if len(n) else 0
    table = np.r_[0.0, np.cumsum(1.0 / np.log2(np.arange(2, longest + 2, dtype=np.float64)))]
    starts = _run_starts(seg, t)
    run = np.cumsum(starts) - 1
    run_pos = pos[starts][run]
    run_len = np.bincount(run)[run]
    d = (table[run_pos + run_len] - table[run_pos]) / run_len
    gain = expected_inverse_rank(first, ties)
    q = len(n)
    num = np.bincount(seg, weights=gain * d, minlength=q)
    ideal = np.bincount(seg, weights=d / (pos + 1), minlength=q)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / ideal


def _average_precision(seg: np.ndarray, n: np.ndarray, start: np.ndarray, first: np.ndarray,
                       ties: np.ndarray) -> np.ndarray:
    # groups of equal `first` within each query (one predicted tie group each), ascending
    order = np.lexsort((first, seg))
    seg, first, ties = seg[order], first[order], ties[order]
    starts = _run_starts(seg, first)
    gseg = seg[starts]
    s = first[starts].astype(np.float64)
    m = ties[starts].astype(np.float64)
    h = np.diff(np.r_[np.flatnonzero(starts), len(seg)]).astype(np.int64)
    # answers ranked in the groups before, within the query: a running count restarted at each query
    before = np.r_[0, np.cumsum(h)[:-1]]
    a = (before - before[np.searchsorted(gseg, gseg, side="left")]).astype(np.float64)
    nq = n[gseg].astype(np.float64)
    keep = s <= nq
    s, m, hf, a, nq, gseg = s[keep], m[keep], h[keep].astype(np.float64), a[keep], nq[keep], gseg[keep]
    j = np.minimum(m, nq - s + 1.0)
    inv = harmonic(s + j - 1.0) - harmonic(s - 1.0)
    within = np.where(m > 1, (hf - 1.0) / np.maximum(m - 1.0, 1.0), 0.0)
    total = (hf / m) * ((1.0 + a) * inv + within * (j - s * inv))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(gseg, weights=total, minlength=len(n)) / n


def _average_ranks(seg: np.ndarray, start: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of x within each query, ties sharing their average rank (metrics.average_ranks)."""
    order = np.lexsort((x, seg))
    ss, xs = seg[order], x[order]
    pos = _positions(ss, start)
    starts = _run_starts(ss, xs)
    run = np.cumsum(starts) - 1
    lo = pos[starts][run] + 1
    hi = lo + np.bincount(run)[run] - 1
    out = np.empty(len(x), dtype=np.float64)
    out[order] = (lo + hi) / 2.0
    return out


def _constant(seg: np.ndarray, n_queries: int, x: np.ndarray) -> np.ndarray:
    """(Q,) bool: every value of the query is the same (queries without values count as constant): one
    run of equal values once sorted."""
    order = np.lexsort((x, seg))
    starts = _run_starts(seg[order], x[order])
    return np.bincount(seg[order][starts], minlength=n_queries) <= 1


def _spearman(seg: np.ndarray, n: np.ndarray, start: np.ndarray, t: np.ndarray, p: np.ndarray) -> np.ndarray:
    # The ranks are half-integers and their mean (n + 1) / 2 is one: every product and partial sum below
    # is exact, so the sums equal the per-query function's in any order.
    centre = (n[seg] + 1) / 2.0
    a = _average_ranks(seg, start, t) - centre
    b = _average_ranks(seg, start, p) - centre
    q = len(n)
    sab = np.bincount(seg, weights=a * b, minlength=q)
    saa = np.bincount(seg, weights=a * a, minlength=q)
    sbb = np.bincount(seg, weights=b * b, minlength=q)
    undefined = (n < 2) | _constant(seg, q, t) | _constant(seg, q, p)
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


def _kendall(seg: np.ndarray, n: np.ndarray, start: np.ndarray, t: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Kendall's tau-b as scipy.stats.kendalltau computes it: the discordant pairs counted exactly (the
    strict inversions of p once sorted by (t, p), within each query) and tau = (tot - xtie - ytie + ntie -
    2 dis) / sqrt(tot - xtie) / sqrt(tot - ytie), clipped to [-1, 1]."""
    q = len(n)
    order = np.lexsort((p, t, seg))
    seg, t, p = seg[order], t[order], p[order]
    xtie = _tied_pairs(seg, q, t)
    ntie = _tied_pairs(seg, q, t, p)
    by_p = np.lexsort((p, seg))
    ytie = _tied_pairs(seg[by_p], q, p[by_p])
    dis = _inversions(seg, n, start, np.unique(p, return_inverse=True)[1].astype(np.int64))
    tot = _pairs(n)
    cmd = tot - xtie - ytie + ntie - 2 * dis
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = cmd.astype(np.float64) / np.sqrt((tot - xtie).astype(np.float64)) / np.sqrt((tot - ytie).astype(np.float64))
    tau = np.minimum(1.0, np.maximum(-1.0, tau))
    tau[(n < 2) | (xtie == tot) | (ytie == tot)] = math.nan
    return tau


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
