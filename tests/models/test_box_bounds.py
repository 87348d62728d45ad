"""The box-model pruning bound (pipeline.models.box_bounds): the monotonicity it rests on, the bound against
the model's exact confidences, and the pruned scoring against brute force."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.models import box_bounds as bb
from pipeline.models.beurre import BEUrRE, gumbel_intersection, log_volume

BETA = 0.01


def spread_model(n: int, d: int, n_rel: int, seed: int, condition: str = "head", spread: float = 2.0) -> BEUrRE:
    """A BEUrRE whose boxes are spread like a trained one's (corners far apart, widths 0.2-5), not the
    initial near-identical unit cubes."""
    g = torch.Generator().manual_seed(seed)
    m = BEUrRE(n, n_rel, d, gumbel_beta=BETA, condition=condition, seed=seed)
    with torch.no_grad():
        m.lo.copy_(torch.randn(n, d, generator=g) * spread)
        m.log_width.copy_(torch.randn(n, d, generator=g) * 0.6)
        m.trans_head.copy_(torch.randn(n_rel, d, generator=g) * 0.3)
        m.scale_head.copy_(1 + 0.3 * torch.randn(n_rel, d, generator=g))
        m.trans_tail.copy_(torch.randn(n_rel, d, generator=g) * 0.3)
        m.scale_tail.copy_(1 + 0.3 * torch.randn(n_rel, d, generator=g))
    return m


def brute(m: BEUrRE, r: int, threshold: float, heads: torch.Tensor | None = None):
    heads = torch.arange(m.n_entities) if heads is None else heads
    p = m.score_block(heads, r, torch.arange(m.n_entities))
    hi, ti = (p >= threshold).nonzero(as_tuple=True)
    return heads[hi], ti, p[hi, ti]


def assert_same_facts(got, ref, threshold: float, n: int, tol: float = 1e-6) -> None:
    """Same (h, t) in the same order and scores within tol (the block shapes differ, so a vectorised
    kernel may round the last bit differently); a pair may only be in one of them when its score is
    within tol of the threshold."""
    gk, rk = (got[0] * n + got[1]).numpy(), (ref[0] * n + ref[1]).numpy()
    both, gi, ri = np.intersect1d(gk, rk, return_indices=True)
    assert np.all(np.diff(gk) > 0) and np.all(np.diff(rk) > 0)
    np.testing.assert_allclose(got[2].numpy()[gi], ref[2].numpy()[ri], rtol=0, atol=tol)
    for scores, idx in ((got[2].numpy(), np.setdiff1d(np.arange(len(gk)), gi)),
                        (ref[2].numpy(), np.setdiff1d(np.arange(len(rk)), ri))):
        assert np.all(np.abs(scores[idx] - threshold) <= tol)


def test_log_sides_are_the_summands_of_log_volume() -> None:
    w = torch.randn(50, 64) * 3
    assert torch.equal(bb.log_sides(w, BETA).sum(-1), log_volume(w, BETA))


boxes = st.integers(0, 2**31 - 1)


@settings(max_examples=60, deadline=None)
@given(seed=boxes, d=st.integers(1, 12), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_intersection_volume_never_decreases_when_a_box_grows(seed: int, d: int, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    lo1, lo2 = r(d) * 2, r(d) * 2
    hi1, hi2 = lo1 + r(d).exp(), lo2 + r(d).exp()
    grow_lo, grow_hi = r(d).abs() * r(1).exp(), r(d).abs() * r(1).exp()
    for beta in (0.01, 0.3):
        base = log_volume(torch.sub(*reversed(gumbel_intersection(lo1, hi1, lo2, hi2, beta))), beta)
        # grow either box, on either side, in every dimension at once
        for args in (
            (lo1 - grow_lo, hi1 + grow_hi, lo2, hi2),
            (lo1, hi1, lo2 - grow_lo, hi2 + grow_hi),
            (lo1 - grow_lo, hi1, lo2, hi2),
        ):
            lo, hi = gumbel_intersection(*args, beta)
            grown = log_volume(hi - lo, beta)
            tol = 1e-5 * (1 + abs(float(base))) if dtype == torch.float32 else 1e-12
            assert float(grown) >= float(base) - tol


@settings(max_examples=40, deadline=None)
@given(
    seed=boxes,
    d=st.integers(1, 10),
    condition=st.sampled_from(["head", "tail"]),
    spread=st.sampled_from([0.3, 1.0, 3.0]),
)
@torch.no_grad()
def test_block_bound_is_above_every_exact_confidence(seed: int, d: int, condition: str, spread: float) -> None:
    m = spread_model(40, d, 2, seed, condition, spread)
    for r in range(2):
        hlo, hw = m.boxes(torch.arange(40), r, "head")
        tlo, tw = m.boxes(torch.arange(40), r, "tail")
        rng = np.random.default_rng(seed)
        hset, tset = torch.as_tensor(rng.permutation(40)), torch.as_tensor(rng.permutation(40))
        hb = bb.make_blocks(hlo, hw, hset, leaf=8)
        tb = bb.make_blocks(tlo, tw, tset, leaf=8)
        bound, margin = bb.block_log_bound(hb, tb, m.gumbel_beta, condition)
        logp = torch.log(m.score_block(torch.arange(40), r, torch.arange(40)).clamp_min(1e-30))
        for i in range(len(hb.lo)):
            for j in range(len(tb.lo)):
                best = logp[hb.members(i)][:, tb.members(j)].max()
                assert float(best) <= float(bound[i, j]) + 1e-5, (i, j)
                assert float(margin[i, j]) > 0


def test_kd_order_is_a_deterministic_permutation_with_compact_blocks() -> None:
    pts = np.random.default_rng(0).normal(size=(1000, 3))
    order = bb.kd_order(pts, leaf=16)
    assert sorted(order.tolist()) == list(range(1000))
    assert np.array_equal(order, bb.kd_order(pts, leaf=16))
    blocks = [pts[order[a : a + 16]] for a in range(0, 1000, 16)]
    ranges = np.mean([np.prod(b.max(0) - b.min(0)) for b in blocks])
    shuffled = [pts[a : a + 16] for a in range(0, 1000, 16)]
    assert ranges < 0.1 * np.mean([np.prod(b.max(0) - b.min(0)) for b in shuffled])


@pytest.mark.parametrize("condition", ["head", "tail"])
@pytest.mark.parametrize("leaf", [4, 16])
def test_pruned_scoring_equals_brute_force(condition: str, leaf: int) -> None:
    m = spread_model(300, 4, 3, seed=1, condition=condition, spread=4.0)
    pruned_any = False
    for r in range(3):
        for threshold in (0.05, 0.3):
            stats = bb.PruneStats()
            h, t, s = bb.score_relation(m, r, threshold, leaf=leaf, stats=stats, pair_budget=4096)
            ref = brute(m, r, threshold)
            assert_same_facts((h, t, s), ref, threshold, 300)
            assert len(h) == len(ref[0]) and torch.equal(h, ref[0]) and torch.equal(t, ref[1])
            assert stats.facts == len(h) and stats.pairs_total == 300 * 300
            assert stats.pairs_scored < stats.pairs_total
            pruned_any |= stats.blocks_pruned > 0
    assert pruned_any  # the toy must exercise stage 1, not only stage 2


def test_pruned_scoring_of_a_head_subset_and_the_progress_callback() -> None:
    m = spread_model(200, 5, 1, seed=2)
    heads = torch.tensor([199, 3, 50, 7, 120])
    seen = []
    h, t, s = bb.score_relation(m, 0, 0.1, heads=heads, leaf=4, on_block=seen.append)
    assert_same_facts((h, t, s), brute(m, 0, 0.1, heads.sort().values), 0.1, 200)
    assert sum(seen) == len(heads)


def test_an_unprunable_model_still_scores_exactly() -> None:
    # the initial BEUrRE: near-identical unit cubes, every pair close to the threshold region
    m = BEUrRE(120, 2, 8, seed=0)
    stats = bb.PruneStats()
    h, t, s = bb.score_relation(m, 1, 0.01, leaf=8, stats=stats)
    assert_same_facts((h, t, s), brute(m, 1, 0.01), 0.01, 120)
    assert stats.blocks_pruned == 0 and len(h) == 120 * 120


@settings(max_examples=40, deadline=None)
@given(
    seed=boxes,
    d=st.integers(2, 16),
    condition=st.sampled_from(["head", "tail"]),
    spread=st.sampled_from([0.3, 1.0, 3.0]),
    threshold=st.sampled_from([0.01, 0.2, 0.5, 0.9]),
)
@torch.no_grad()
def test_staged_cut_keeps_every_pair_at_or_above_the_threshold(
    seed: int, d: int, condition: str, spread: float, threshold: float
) -> None:
    # stage 3 alone (no block pruning before it): every pair the model scores >= threshold survives
    m = spread_model(30, d, 1, seed, condition, spread)
    hlo, hw = m.boxes(torch.arange(30), 0, "head")
    tlo, tw = m.boxes(torch.arange(30), 0, "tail")
    cut = float(np.log(threshold))
    stages = tuple(range(1, d))  # a cut after every dimension: the most partial sums a pair can meet
    staged = bb.StagedPairs.build((hlo, hw), (tlo, tw), m.gumbel_beta, condition, cut, stages, sample=64, judge=False)
    assert len(staged.slices) == d - 1
    tails = torch.arange(30).repeat(30, 1)
    stats = bb.PruneStats()
    ph, pt = staged.survivors(torch.arange(30), tails, stats)
    p = m.score_block(torch.arange(30), 0, torch.arange(30))
    wanted = set(map(tuple, (p >= threshold).nonzero().tolist()))
    assert wanted <= set(zip(ph.tolist(), pt.tolist(), strict=True))
    assert stats.pairs_exact == len(ph) and stats.pairs_cut == 900 - len(ph)


def test_staged_cut_is_tight_enough_to_drop_far_pairs() -> None:
    # the partial sums must cut: without stage 3 every pair of this model would be scored in full
    m = spread_model(300, 16, 1, seed=3, spread=1.0)
    stats = bb.PruneStats()
    got = bb.score_relation(m, 0, 0.3, leaf=8, stats=stats, stages=(2, 4, 8, 12))
    assert_same_facts(got, brute(m, 0, 0.3), 0.3, 300)
    assert stats.pairs_cut > 0.5 * stats.pairs_scored
    assert stats.pairs_exact + stats.pairs_cut == stats.pairs_scored
    assert stats.pair_dims < 0.5 * stats.pairs_scored * 16


@pytest.mark.parametrize("stages", [(), (3,), (2, 5, 9, 13), bb.STAGES])
@pytest.mark.parametrize("condition", ["head", "tail"])
def test_pruned_scoring_equals_brute_force_with_any_stages(stages: tuple[int, ...], condition: str) -> None:
    m = spread_model(200, 16, 2, seed=4, condition=condition, spread=1.5)
    for r in range(2):
        for threshold in (0.05, 0.5):
            got = bb.score_relation(m, r, threshold, leaf=8, stages=stages)
            ref = brute(m, r, threshold)
            assert_same_facts(got, ref, threshold, 200)
            assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


def test_partial_sums_are_skipped_where_they_cannot_pay() -> None:
    m = spread_model(300, 16, 1, seed=3, spread=1.0)
    hlo, hw = m.boxes(torch.arange(300), 0, "head")
    tlo, tw = m.boxes(torch.arange(300), 0, "tail")
    build = lambda t: bb.StagedPairs.build((hlo, hw), (tlo, tw), m.gumbel_beta, "head", float(np.log(t)), (2, 4, 8, 12))  # noqa: E731
    assert build(0.3).slices  # most pairs fall below log 0.3 within a few dimensions
    assert not build(1e-30).slices  # every pair passes: partial sums would only add work
    stats = bb.PruneStats()
    got = bb.score_relation(m, 0, 1e-30, leaf=8, stats=stats, stages=(2, 4, 8, 12))
    assert len(got[0]) == 300 * 300 and stats.pairs_cut == 0 and stats.pair_dims == 0
    assert stats.pairs_exact == stats.pairs_scored


def test_worthwhile_weighs_the_partial_sums_against_the_exact_score() -> None:
    # 4 dimensions, stages after 1 and 2: pairs whose first term is already below the cut are dropped at once
    far = torch.tensor([[-5.0, 0.0, 0.0, 0.0]]).repeat(10, 1)
    near = torch.zeros(10, 4)
    assert bb.worthwhile(far, [0, 1, 2], cut=-1.0)  # 0.6 x 1 dimension, nobody left: 0.6 < 3.2
    assert not bb.worthwhile(near, [0, 1, 2], cut=-1.0)  # 0.6 x 2 + 4 = 5.2 > 3.2
    assert not bb.worthwhile(far, [0], cut=-1.0)
