"""The confidence models on hand-computed examples and properties: UKGE's mapping, BEUrRE's Gumbel boxes."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.errors import UnknownNameError
from pipeline.models import BACKBONES, BEUrRE, UKGELogi, UKGERect, get_model_class
from pipeline.models.beurre import EULER_GAMMA, gumbel_intersection, log_volume
from tests.cases import ModelCase


def test_registry_names_and_descriptions() -> None:
    from pipeline.core.registry import registry_rows

    assert set(BACKBONES) == {"ukge_logi", "ukge_rect", "beurre"}
    rows = registry_rows("models")
    assert [r["name"] for r in rows] == list(BACKBONES)
    assert all(len(r["description"]) > 20 for r in rows)
    with pytest.raises(UnknownNameError, match="did you mean ukge_logi"):
        get_model_class("ukge_log")


def _ukge(cls, w: float, b: float) -> torch.nn.Module:
    m = cls(3, 1, dim=2)
    with torch.no_grad():
        m.ent.copy_(torch.tensor([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]]))
        m.rel.copy_(torch.tensor([[2.0, 1.0]]))
        m.w.fill_(w)
        m.b.fill_(b)
    return m


def test_ukge_hand_computed() -> None:
    # <e0, r0, e1> = 1*2*0.5 + 2*1*(-1) = -1;  <e0, r0, e2> = 1*2*3 + 0 = 6
    h, r, t = torch.tensor([0, 0]), torch.tensor([0, 0]), torch.tensor([1, 2])
    logi = _ukge(UKGELogi, 0.5, 0.25)
    expect = [1 / (1 + math.exp(-(0.5 * -1 + 0.25))), 1 / (1 + math.exp(-(0.5 * 6 + 0.25)))]
    assert logi.score(h, r, t).tolist() == pytest.approx(expect, abs=1e-6)
    rect = _ukge(UKGERect, 0.1, 0.2)
    # 0.1 * -1 + 0.2 = 0.1 (inside [0, 1]); 0.1 * 6 + 0.2 = 0.8
    assert rect.score(h, r, t).tolist() == pytest.approx([0.1, 0.8], abs=1e-6)
    rect_big = _ukge(UKGERect, 1.0, 0.0)
    assert rect_big.score(h, r, t).tolist() == [0.0, 1.0]  # clamped both ways
    # rect trains on the unclamped line, so gradients exist outside [0, 1]
    assert rect_big.training_output(h, r, t).tolist() == pytest.approx([-1.0, 6.0])


@pytest.mark.parametrize("cls", [UKGELogi, UKGERect, BEUrRE])
def test_score_block_equals_forward(cls) -> None:
    m = cls(7, 3, dim=5, seed=3).eval()
    with torch.no_grad():  # move BEUrRE boxes apart so confidences vary
        for p in m.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    heads, tails = torch.tensor([0, 4, 6]), torch.arange(7)
    for r in range(3):
        block = m.score_block(heads, r, tails)
        hh, tt = torch.meshgrid(heads, tails, indexing="ij")
        ref = m.score(hh.reshape(-1), torch.full((21,), r), tt.reshape(-1)).reshape(3, 7)
        torch.testing.assert_close(block, ref, atol=1e-6, rtol=1e-5)


def test_beurre_one_dimensional_box_by_hand() -> None:
    beta = 0.01
    m = BEUrRE(2, 1, dim=1, gumbel_beta=beta)
    with torch.no_grad():
        m.lo.copy_(torch.tensor([[0.0], [0.5]]))  # head box [0, 1], tail box [0.5, 2]
        m.log_width.copy_(torch.tensor([[0.0], [math.log(1.5)]]))
        m.trans_head.zero_(), m.trans_tail.zero_(), m.scale_head.fill_(1.0), m.scale_tail.fill_(1.0)
    lo = beta * math.log(math.exp(0 / beta) + math.exp(0.5 / beta))
    hi = -beta * math.log(math.exp(-1 / beta) + math.exp(-2 / beta))
    softplus = lambda x: math.log1p(math.exp(x))  # noqa: E731
    cap = softplus(hi - lo - 2 * EULER_GAMMA * beta)
    expect_head = cap / softplus(1.0 - 2 * EULER_GAMMA * beta)
    expect_tail = cap / softplus(1.5 - 2 * EULER_GAMMA * beta)
    one = torch.tensor([0])
    assert float(m.score(one, one, torch.tensor([1]))) == pytest.approx(expect_head, rel=1e-5)
    # by hand: softplus(0.5 - 0.011544) / softplus(1 - 0.011544) = 0.96692 / 1.30484 (half the head box
    # overlaps, but softplus volumes with temperature 1 are not linear in the side length)
    assert expect_head == pytest.approx(0.74102, abs=1e-4)
    m_tail = BEUrRE(2, 1, dim=1, gumbel_beta=beta, condition="tail")
    m_tail.load_state_dict(m.state_dict())
    assert float(m_tail.score(one, one, torch.tensor([1]))) == pytest.approx(expect_tail, rel=1e-5)
    # the relation's maps act on the boxes: shift the head box by +0.75 -> [0.75, 1.75], well inside the tail
    with torch.no_grad():
        m.trans_head.fill_(0.75)
    assert float(m.score(one, one, torch.tensor([1]))) == pytest.approx(1.0, abs=1e-3)


@settings(max_examples=60, deadline=None)
@given(
    lo=st.lists(st.floats(-3, 3), min_size=6, max_size=6),
    logw=st.lists(st.floats(-4, 2), min_size=6, max_size=6),
    beta=st.sampled_from([0.001, 0.01, 0.1, 1.0]),
)
def test_gumbel_intersection_never_exceeds_either_box(
    lo: list[float], logw: list[float], beta: float
) -> None:
    lo1, lo2 = torch.tensor(lo[:3]), torch.tensor(lo[3:])
    w1, w2 = torch.tensor(logw[:3]).exp(), torch.tensor(logw[3:]).exp()
    clo, chi = gumbel_intersection(lo1, lo1 + w1, lo2, lo2 + w2, beta)
    assert torch.all(clo >= torch.maximum(lo1, lo2) - 1e-6)
    assert torch.all(chi <= torch.minimum(lo1 + w1, lo2 + w2) + 1e-6)
    v = log_volume(chi - clo, beta)
    assert v <= log_volume(w1, beta) + 1e-5 and v <= log_volume(w2, beta) + 1e-5


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), spread=st.floats(0.0, 3.0), condition=st.sampled_from(["head", "tail"]))
def test_beurre_confidences_in_unit_interval(seed: int, spread: float, condition: str) -> None:
    m = BEUrRE(6, 2, dim=4, seed=seed, condition=condition)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(spread * torch.randn(p.shape, generator=g))
    s = m.score_block(torch.arange(6), seed % 2, torch.arange(6))
    assert torch.isfinite(s).all() and (s >= 0).all() and (s <= 1).all()


@pytest.mark.parametrize("cls", [UKGELogi, BEUrRE])
def test_features_are_the_embeddings(cls) -> None:
    m = cls(5, 2, dim=3, seed=1)
    h, r, t = torch.tensor([0, 4]), torch.tensor([1, 0]), torch.tensor([2, 2])
    eh, er, et = m.features(h, r, t)
    de, dr = m.feature_dims
    assert eh.shape == (2, de) and er.shape == (2, dr) and et.shape == (2, de)
    torch.testing.assert_close(et[0], et[1])  # same tail, same vector
    if cls is UKGELogi:
        torch.testing.assert_close(eh, m.ent[h])
        torch.testing.assert_close(er, m.rel[r])
    else:
        torch.testing.assert_close(eh[:, :3], m.lo[h])
        torch.testing.assert_close(eh[:, 3:], m.log_width[h].exp())


def test_seeded_init_and_content_hash() -> None:
    a, b, c = UKGELogi(10, 2, dim=4, seed=5), UKGELogi(10, 2, dim=4, seed=5), UKGELogi(10, 2, dim=4, seed=6)
    assert a.content_hash() == b.content_hash() != c.content_hash()
    with torch.no_grad():
        b.w.add_(1e-6)  # any change in any parameter changes the hash
    assert a.content_hash() != b.content_hash()
    # the config is part of the identity: same weights, different mapping
    d = UKGERect(10, 2, dim=4, seed=5)
    assert d.content_hash() != a.content_hash()


class TestUKGELogi(ModelCase):
    name = "ukge_logi"


class TestUKGERect(ModelCase):
    name = "ukge_rect"


class TestBEUrRE(ModelCase):
    name = "beurre"
