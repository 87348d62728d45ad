"""Metrics of design section 1 on hand-computed rankings, at their extremes, and against scipy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import UnknownNameError
from pipeline.metrics import (
    METRICS,
    average_precision,
    evaluate_ranks,
    get_metric,
    kendall_tau,
    metric_columns,
    ndcg,
    rank_entities,
    ranks_of,
    spearman_rho,
)
from tests.cases import ComponentCase

L3 = math.log2(3)

# Hand-computed values: ranks of the true answers a_1..a_n (best first) -> {metric: value}.
HAND: list[tuple[list[int], dict[str, float]]] = [
    ([1, 2, 3], {"ndcg": 1.0, "map": 1.0, "tau": 1.0, "rho": 1.0}),
    # a_1 and a_2 swapped at the top: every prediction in the top n is an answer, but the order is reversed.
    ([2, 1], {"ndcg": (0.5 + 1 / L3) / (1 + 0.5 / L3), "map": 1.0, "tau": -1.0, "rho": -1.0}),
    # a_2 far down: only rank 1 is a hit among the top 2.
    ([1, 5], {"ndcg": (1 + 0.2 / L3) / (1 + 0.5 / L3), "map": 0.5, "tau": 1.0, "rho": 1.0}),
    # hits at k=1 (1 hit) and k=3 (2 hits): (1/1 + 2/3) / 3; pairs (-1, +1, +1) / 3; d = (-1, 1, 0).
    (
        [3, 1, 10],
        {
            "ndcg": (1 / 3 + 1 / L3 + 0.1 / 2) / (1 + 0.5 / L3 + (1 / 3) / 2),
            "map": 5 / 9,
            "tau": 1 / 3,
            "rho": 0.5,
        },
    ),
    # one answer: correlations are undefined and left out of the averages.
    ([4], {"ndcg": 0.25, "map": 0.0, "tau": math.nan, "rho": math.nan}),
]


def test_every_registered_metric_has_hand_computed_cases() -> None:
    """The meta-test: a metric added to the registry without a hand-computed case fails here."""
    for _, expected in HAND:
        assert set(expected) == set(METRICS)


@pytest.mark.parametrize(("ranks", "expected"), HAND)
def test_hand_computed(ranks: list[int], expected: dict[str, float]) -> None:
    got = evaluate_ranks(ranks)
    for name, value in expected.items():
        if math.isnan(value):
            assert math.isnan(got[name]), name
        else:
            assert got[name] == pytest.approx(value, abs=1e-12), name


def _placements(n_entities: int, n_answers: int) -> list[np.ndarray]:
    return [np.array(p) + 1 for p in itertools.permutations(range(n_entities), n_answers)]


class MetricCase(ComponentCase):
    """What every metric satisfies: its bounds reached where they should be, over every ranking."""

    kind = "metrics"

    @pytest.mark.parametrize(("n_entities", "n_answers"), [(6, 2), (6, 3), (7, 3)])
    def test_extremes_over_all_rankings(self, n_entities: int, n_answers: int) -> None:
        """Over every placement of n answers among N entities: the perfect ranking gives the upper bound and
        the maximum, the reversed ranking of all entities the minimum, all values inside [lower, upper]."""
        m = self.component()
        values = np.array([m(p) for p in _placements(n_entities, n_answers)])
        perfect = m(np.arange(1, n_answers + 1))
        reversed_ = m(n_entities - np.arange(n_answers))  # a_1 last, a_2 second to last, ...
        assert perfect == pytest.approx(m.upper)
        assert values.max() == pytest.approx(perfect)
        assert values.min() == pytest.approx(reversed_)
        assert m.lower - 1e-12 <= values.min() and values.max() <= m.upper + 1e-12
        if self.reaches_lower(n_entities, n_answers):
            assert reversed_ == pytest.approx(m.lower)

    def reaches_lower(self, n_entities: int, n_answers: int) -> bool:
        return False


class TestKendallTau(MetricCase):
    name = "tau"

    def reaches_lower(self, n_entities: int, n_answers: int) -> bool:
        return True


class TestSpearmanRho(MetricCase):
    name = "rho"

    def reaches_lower(self, n_entities: int, n_answers: int) -> bool:
        return True


class TestMAP(MetricCase):
    name = "map"

    def reaches_lower(self, n_entities: int, n_answers: int) -> bool:
        return n_entities >= 2 * n_answers  # every answer can be ranked outside the top n


class TestNDCG(MetricCase):
    name = "ndcg"


def test_metrics_from_utilities_perfect_and_reversed() -> None:
    """End to end from utility vectors: predicting the true utilities is perfect, their negation reversed."""
    rng = np.random.default_rng(0)
    truth = rng.permutation(20).astype(np.float64) / 20 - 0.3  # distinct; the positive ones are answers
    answers = np.argsort(-truth, kind="stable")[: int((truth > 0).sum())]
    for name, m in METRICS.items():
        assert m(ranks_of(truth, answers)) == pytest.approx(m.upper), name
        worst = m(ranks_of(-truth, answers))
        assert worst < m.upper
        if m.lower == -1.0:
            assert worst == pytest.approx(-1.0), name


def test_rank_entities_hand_example() -> None:
    u = torch.tensor([0.5, -math.inf, 0.9, 0.5, math.nan])
    # 0.9 first; the two 0.5 by id; -inf and NaN (treated as -inf) last, by id.
    assert rank_entities(u).tolist() == [2, 4, 1, 3, 5]
    assert ranks_of(u.numpy(), [0, 1, 2, 3, 4]).tolist() == [2, 4, 1, 3, 5]
    batch = torch.stack([u, -u])
    assert rank_entities(batch)[1].tolist() == [2, 1, 4, 3, 5]  # +inf first, NaN still last


values = st.sampled_from([-math.inf, 0.0, 0.1, 0.25, 0.5, 1.0, 2.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(values, min_size=1, max_size=25))
def test_torch_ranks_agree_with_numpy_oracle(u: list[float]) -> None:
    t = torch.tensor(u, dtype=torch.float32)
    ranks = rank_entities(t).numpy()
    assert ranks.tolist() == ranks_of(np.array(u), np.arange(len(u))).tolist()
    assert sorted(ranks.tolist()) == list(range(1, len(u) + 1))  # a permutation: ranks are distinct


distinct_ranks = st.lists(st.integers(1, 500), min_size=2, max_size=40, unique=True)
tied_ranks = st.lists(st.integers(1, 6), min_size=2, max_size=15)


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
@settings(max_examples=80, deadline=None)
@given(st.one_of(distinct_ranks, tied_ranks))
def test_correlations_agree_with_scipy(ranks: list[int]) -> None:
    positions = np.arange(1, len(ranks) + 1)
    tau_ref = scipy.stats.kendalltau(positions, ranks).statistic
    rho_ref = scipy.stats.spearmanr(positions, ranks).statistic
    for ours, ref in ((kendall_tau(ranks), tau_ref), (spearman_rho(ranks), rho_ref)):
        if np.isnan(ref):
            assert math.isnan(ours)
        else:
            assert ours == pytest.approx(ref, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(distinct_ranks, st.data())
def test_moving_an_answer_up_never_hurts_ndcg_or_map(ranks: list[int], data: st.DataObject) -> None:
    """Monotonicity: giving one answer a better free rank never lowers NDCG or MAP."""
    i = data.draw(st.integers(0, len(ranks) - 1))
    free = [k for k in range(1, ranks[i]) if k not in ranks]
    if not free:
        return
    better = list(ranks)
    better[i] = data.draw(st.sampled_from(free))
    assert ndcg(better) > ndcg(ranks)
    assert average_precision(better) >= average_precision(ranks) - 1e-12


def test_bad_ranks_are_rejected() -> None:
    with pytest.raises(ValueError, match="ranks"):
        ndcg([0, 1])
    assert math.isnan(ndcg([]))


def test_lookup_by_name_and_synonym() -> None:
    assert get_metric("NDCG") is METRICS["ndcg"]
    assert get_metric("kendall_tau") is METRICS["tau"]
    with pytest.raises(UnknownNameError, match="did you mean ndcg"):
        get_metric("ndgc")


def test_ls_metrics_lists_the_registry() -> None:
    from pipeline.cli import cli

    result = CliRunner().invoke(cli, ["ls", "metrics"])
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.output.splitlines()[2:]]
    assert names == ["tau", "rho", "map", "ndcg"]


def test_hand_computed_all_at_once() -> None:
    """metric_columns (the vectorised path of the tables) on every hand-computed case together."""
    got = metric_columns([np.asarray(r) for r, _ in HAND])
    for q, (_, expected) in enumerate(HAND):
        for name, value in expected.items():
            if math.isnan(value):
                assert math.isnan(got[name][q]), name
            else:
                assert got[name][q] == pytest.approx(value, abs=1e-12), (q, name)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.just([]), distinct_ranks, tied_ranks), min_size=0, max_size=12))
def test_metric_columns_equal_query_by_query(many: list[list[int]]) -> None:
    """Two implementations: the rows of one length at once (searchsorted, pair signs, argsort ranks) and
    each metric query by query, on mixes of lengths 0..n, distinct and tied ranks (the latter take the
    per-query path)."""
    got = metric_columns([np.asarray(r, dtype=np.int64) for r in many])
    for q, ranks in enumerate(many):
        for name, m in METRICS.items():
            expected = m(ranks) if len(ranks) else math.nan
            if math.isnan(expected):
                assert math.isnan(got[name][q]), (name, ranks)
            else:
                assert got[name][q] == pytest.approx(expected, abs=1e-12), (name, ranks)
