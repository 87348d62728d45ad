"""The UKGE block bounds of pipeline.models.dot_bounds hold for every member pair (measurement code, but a
wrong bound would report savings that do not exist)."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.models import dot_bounds as db
from pipeline.models.box_bounds import kd_order
from pipeline.models.ukge import UKGELogi


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), d=st.integers(1, 8), leaf=st.sampled_from([3, 8]))
def test_interval_and_cauchy_schwarz_bounds_hold_for_every_pair(seed: int, d: int, leaf: int) -> None:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(40, d, generator=g, dtype=torch.float64)
    e = torch.randn(37, d, generator=g, dtype=torch.float64) * 2
    ho, to = torch.as_tensor(kd_order(a.numpy(), leaf)), torch.randperm(37, generator=g)
    hmn, hmx, hc, hrad = db._blocks(a, ho, leaf)
    tmn, tmx, tc, trad = db._blocks(e, to, leaf)
    iv = db._interval(hmn[:, None], hmx[:, None], tmn[None], tmx[None])
    cs = hc @ tc.T + hrad[:, None] * tc.norm(dim=1)[None] + hc.norm(dim=1)[:, None] * trad[None] + hrad[:, None] * trad[None]
    exact = a @ e.T
    for i in range(len(hmn)):
        for j in range(len(tmn)):
            best = exact[ho[i * leaf : (i + 1) * leaf]][:, to[j * leaf : (j + 1) * leaf]].max()
            assert best <= iv[i, j] + 1e-9 and best <= cs[i, j] + 1e-9


def test_score_cut_and_measure_on_a_toy_model() -> None:
    m = UKGELogi(60, 2, 6, seed=0)
    with torch.no_grad():
        m.w.fill_(2.0)
        m.b.fill_(-1.0)
    sign, cut = db.score_cut(m, 0.1)
    assert sign == 1.0 and math.isclose(cut, (math.log(0.1 / 0.9) + 1.0) / 2.0)
    tot = db.measure(m, 0.1, leaf=8)
    # the exact count of pairs passing, from the model itself
    n_pass = sum(int((m.score_block(torch.arange(60), r, torch.arange(60)) >= 0.1).sum()) for r in range(2))
    assert tot["facts"] == n_pass and tot["pairs"] == 2 * 60 * 60
    assert tot["block_pairs"] == 2 * 8 * 8 and 0 <= tot["pruned_either"] <= tot["block_pairs"]
    assert tot["pruned_either"] >= max(tot["pruned_interval"], tot["pruned_cs"])
    # sound bounds leave every passing pair to be scored
    assert tot["facts"] <= tot["pairs_left"] <= tot["pairs"]
