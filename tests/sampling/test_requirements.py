"""Soft requirements: alpha levels from percentiles, hybrid draws, beta modes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaders.levels import alpha_percentiles
from pipeline.core.errors import PipelineError, UnknownNameError
from pipeline.sampling.requirements import (
    ALPHA_LEVELS,
    PER_ATOM_LEVELS,
    alpha_for,
    alpha_table,
    draw_betas,
    draw_level,
    draw_levels,
)
from tests.cases import AlphaModeCase, BetaModeCase


def test_percentiles_hand_computed():
    # relation 0: rows 0.2, 0.4, 0.6, 0.8 and a duplicate 0.8 (kept: every published row counts):
    # sorted 0.2, 0.4, 0.6, 0.8, 0.8 -> positions 1, 2, 3 -> 0.4, 0.6, 0.8
    # relation 1: 0.9 and a zero-confidence row of train (kept: only test negatives are set apart, by the
    # loader) -> 0.225, 0.45, 0.675; relation 2: no rows
    rel = np.array([0, 0, 0, 0, 0, 1, 1])
    conf = np.array([0.8, 0.2, 0.6, 0.4, 0.8, 0.9, 0.0])
    p = alpha_percentiles(rel, conf, 3)
    assert p[0] == (0.4, 0.6, 0.8)
    assert p[1] == (0.225, 0.45, 0.675)
    assert 2 not in p
    table = alpha_table(p, 3)
    assert alpha_for(table, [0, 1, 0], "normal") == [0.6, 0.45, 0.6]
    assert alpha_for(table, [2], "zero") == [0.0]
    with pytest.raises(PipelineError, match="relation 2 has no positive facts"):
        alpha_for(table, [2], "low")


def test_percentiles_round_to_four_decimals():
    # 0.1, 0.2, 0.3333 -> p25 at position 0.5: 0.15; p50 0.2; p75 at 1.5: (0.2 + 0.3333) / 2 = 0.26665 -> 0.2666
    # or 0.2667 depending on the binary value; 1/3 makes the rounding visible: (0.2 + 1/3) / 2 = 0.26666.. -> 0.2667
    p = alpha_percentiles(np.zeros(3, dtype=int), np.array([0.1, 0.2, 1 / 3]), 1)
    assert p[0] == (0.15, 0.2, 0.2667)


def test_alpha_table_rejects_unordered_percentiles():
    with pytest.raises(PipelineError, match="not ordered"):
        alpha_table({0: (0.5, 0.4, 0.9)}, 1)
    with pytest.raises(PipelineError, match="outside"):
        alpha_table({3: (0.1, 0.2, 0.3)}, 2)


def test_unknown_modes_are_named():
    rng = np.random.default_rng(0)
    with pytest.raises(UnknownNameError, match="alpha mode 'medium'"):
        draw_level(rng, "medium")
    with pytest.raises(UnknownNameError, match="beta mode 'uneven'"):
        draw_betas(rng, "uneven", 3)


def test_hybrid_draws_every_level_and_fixed_modes_do_not_draw():
    rng = np.random.default_rng(7)
    levels = {draw_level(rng, "hybrid") for _ in range(200)}
    assert levels == set(ALPHA_LEVELS)
    assert {draw_level(rng, "low") for _ in range(10)} == {"low"}


@given(st.integers(0, 2**32 - 1), st.integers(0, 50))
def test_random_betas_are_tenths_in_range(seed, n):
    betas = draw_betas(np.random.default_rng(seed), "random", n)
    assert len(betas) == n
    for b in betas:
        assert 0.1 <= b <= 1.0
        assert round(b * 10) / 10 == b  # an exact decimal tenth, as the text form prints it
    assert draw_betas(np.random.default_rng(seed), "equal", n) == [1.0] * n
    assert draw_betas(np.random.default_rng(seed), "random", n) == betas  # seeded: reproducible


TABLE = AlphaModeCase.table()


class TestAlphaZero(AlphaModeCase):
    name, levels = "zero", frozenset({"zero"})

    def test_never_fails_an_atom(self) -> None:
        assert alpha_for(TABLE, [0, 1], "zero") == [0.0, 0.0]


class TestAlphaLow(AlphaModeCase):
    name, levels = "low", frozenset({"low"})


class TestAlphaNormal(AlphaModeCase):
    name, levels = "normal", frozenset({"normal"})


class TestAlphaHigh(AlphaModeCase):
    name, levels = "high", frozenset({"high"})


class TestAlphaHybrid(AlphaModeCase):
    name, levels = "hybrid", frozenset(ALPHA_LEVELS)


class TestAlphaSquk(AlphaModeCase):
    name, levels = "squk", frozenset(PER_ATOM_LEVELS)

    def test_levels_are_drawn_per_atom_and_never_zero(self) -> None:
        """The SQUK generator's hybrid: each atom its own level among low/normal/high (its published
        PPI5k files mix levels within a query and hold no atom at alpha 0)."""
        rng = np.random.default_rng(5)
        drawn = [draw_levels(rng, "squk", 3) for _ in range(300)]
        assert all(len(lv) == 3 and set(lv) <= set(PER_ATOM_LEVELS) for lv in drawn)
        assert any(len(set(lv)) > 1 for lv in drawn)
        assert {lv for q in drawn for lv in q} == set(PER_ATOM_LEVELS)

    def test_other_modes_draw_one_level_per_query_as_before(self) -> None:
        """Every other mode gives each atom the query's one level and consumes the generator exactly as
        draw_level does, so the query sets sampled before draw_levels existed are unchanged."""
        for mode in ("zero", "low", "normal", "high", "hybrid"):
            a, b = np.random.default_rng(9), np.random.default_rng(9)
            for _ in range(50):
                levels = draw_levels(a, mode, 3)
                assert levels == [draw_level(b, mode)] * 3
            assert a.integers(10**9) == b.integers(10**9)


class TestBetaEqual(BetaModeCase):
    name = "equal"

    def test_every_beta_is_one(self) -> None:
        assert draw_betas(np.random.default_rng(0), "equal", 5) == [1.0] * 5


class TestBetaRandom(BetaModeCase):
    name = "random"

    def test_tenths_drawn_evenly(self) -> None:
        betas = draw_betas(np.random.default_rng(0), "random", 2000)
        assert set(betas) == {k / 10 for k in range(1, 11)}
        assert abs(np.mean(betas) - 0.55) < 0.02
