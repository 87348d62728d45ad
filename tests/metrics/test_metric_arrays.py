"""The four metrics of many queries at once (pipeline.core.metric_arrays) against the per-query functions
(metric_columns): tau and rho bit for bit, MAP and NDCG to 1e-12, on random queries with ties on both
sides, failing answers (-inf, NaN) and queries without answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.metric_arrays import metric_arrays
from pipeline.core.metrics import Ranked, metric_columns, tie_groups


@st.composite
def queries(draw: st.DrawFn) -> list[Ranked]:
    """Queries over one small entity set: each a utility vector with few distinct levels (ties) and a few
    answers best first by a truth with few levels (ties), some failing (-inf / NaN)."""
    import torch

    n_ent = draw(st.integers(2, 40))
    out = []
    for _ in range(draw(st.integers(1, 8))):
        levels = draw(st.sampled_from([(0.1, 0.5), (0.2, 0.4, 0.6, 0.8), (-math.inf, 0.3, 0.7), (math.nan, 0.5, 1.0)]))
        u = np.array([draw(st.sampled_from(levels)) for _ in range(n_ent)], dtype=np.float32)
        k = draw(st.integers(0, min(n_ent, 12)))
        answers = np.array(draw(st.permutations(range(n_ent)))[:k], dtype=np.int64)
        truth = np.sort(np.array([draw(st.sampled_from((0.3, 0.6, 0.9, 1.2))) for _ in range(k)]))[::-1].copy()
        p = torch.as_tensor(u)
        first, ties = tie_groups(p)
        out.append(Ranked(truth, u[answers].astype(np.float64), first.numpy()[answers], ties.numpy()[answers]))
    return out


def arrays_of(qs: list[Ranked]) -> dict[str, np.ndarray]:
    seg = np.repeat(np.arange(len(qs)), [q.n for q in qs])
    cat = lambda name, dt: np.concatenate([np.asarray(getattr(q, name), dt) for q in qs]) if qs else np.zeros(0, dt)  # noqa: E731
    return metric_arrays(seg, len(qs), cat("truth", np.float64), cat("predicted", np.float64),
                         cat("first", np.int64), cat("ties", np.int64))


@settings(max_examples=300, deadline=None)
@given(qs=queries())
def test_many_queries_at_once_equal_one_at_a_time(qs: list[Ranked]) -> None:
    want = metric_columns(qs)
    got = arrays_of(qs)
    for name in ("tau", "rho"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)  # bit for bit, NaN where undefined
    for name in ("map", "ndcg"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-14, err_msg=name)
        assert np.array_equal(np.isnan(got[name]), np.isnan(want[name]))


def test_a_long_query_counts_discordant_pairs_like_scipy() -> None:
    """2,000 answers (11 merge levels, partial blocks) beside a 3-answer query: tau-b equals scipy's."""
    import scipy.stats

    rng = np.random.default_rng(0)
    t = np.sort(rng.integers(0, 50, 2000).astype(np.float64))[::-1].copy()
    p = rng.integers(0, 300, 2000).astype(np.float64)
    small = (np.array([0.9, 0.5, 0.1]), np.array([0.2, 0.8, 0.5]))
    seg = np.r_[np.zeros(2000, np.int64), np.ones(3, np.int64)]
    ones = np.ones(2003, np.int64)
    got = metric_arrays(seg, 2, np.r_[t, small[0]], np.r_[p, small[1]], ones, ones)["tau"]
    assert got[0] == scipy.stats.kendalltau(t, p).statistic
    assert got[1] == pytest.approx(-1 / 3)  # pairs (0.9,0.5):- (0.9,0.1):- (0.5,0.1):+


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_compiled_and_the_numpy_merge_count_agree(data: st.DataObject) -> None:
    """Discordant pairs of several queries (ties, lengths past powers of two): numba's merge sort, the
    numpy passes and the pairs counted one by one agree."""
    from pipeline.core import metric_arrays as ma

    sizes = data.draw(st.lists(st.integers(0, 70), min_size=1, max_size=6))
    v = np.array([data.draw(st.integers(0, 5)) for _ in range(sum(sizes))], dtype=np.int64)
    n = np.array(sizes, dtype=np.int64)
    start = np.r_[0, np.cumsum(n)[:-1]].astype(np.int64)
    seg = np.repeat(np.arange(len(n)), n)
    want = [sum(int(v[s + i] > v[s + j]) for i in range(k) for j in range(i + 1, k)) for s, k in zip(start, n, strict=True)]
    assert ma._inversions(seg, n, start, v).tolist() == want
    if ma._compiled() is not None:
        assert ma.discordant(seg, n, start, v).tolist() == want
