"""NE values and the LogicE / ConE operators on hand-computed inputs."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.baselines import cone, logice
from pipeline.baselines.number_embedding import number_embedding

PI = math.pi


def test_number_embedding_hand_values() -> None:
    assert number_embedding(torch.tensor(0.0), 4).tolist() == [0.0, 1.0, 0.0, 1.0]
    slow = 1000.0 ** (-2 / 4)  # the second sin/cos pair's frequency, 1/sqrt(1000)
    want = [math.sin(1.0), math.cos(1.0), math.sin(slow), math.cos(slow)]
    assert number_embedding(torch.tensor(1.0), 4).tolist() == pytest.approx(want, abs=1e-6)
    two = number_embedding(torch.tensor([0.5, 0.3]), 2)
    assert two.shape == (2, 2)
    assert two[1].tolist() == pytest.approx([math.sin(0.3), math.cos(0.3)], abs=1e-6)
    odd = number_embedding(torch.tensor(0.7), 3)  # the last dim is a sine of the second pair's frequency
    assert odd[2].item() == pytest.approx(math.sin(0.7 * 1000.0 ** (-2 / 3)), abs=1e-6)
    with pytest.raises(ValueError):
        number_embedding(torch.tensor(1.0), 0)


def test_number_embedding_distinguishes_close_alphas() -> None:
    a, b = number_embedding(torch.tensor([0.25, 0.26]), 64)
    assert (a - b).abs().max().item() > 1e-3


def test_t_norms_hand_values() -> None:
    x, y = torch.tensor([0.5, 0.2, 1.0]), torch.tensor([0.4, 1.0, 0.7])
    assert logice.t_norm([x, y], "product").tolist() == pytest.approx([0.2, 0.2, 0.7])
    assert logice.t_norm([x, y], "godel").tolist() == pytest.approx([0.4, 0.2, 0.7])
    assert logice.t_norm([x, y], "lukasiewicz").tolist() == pytest.approx([0.0, 0.2, 0.7])
    assert logice.t_conorm([x, y], "product").tolist() == pytest.approx([0.7, 1.0, 1.0])
    assert logice.t_conorm([x, y], "godel").tolist() == pytest.approx([0.5, 1.0, 1.0])
    assert logice.t_conorm([x, y], "lukasiewicz").tolist() == pytest.approx([0.9, 1.0, 1.0])
    assert logice.negation(x).tolist() == pytest.approx([0.5, 0.8, 0.0])
    assert logice.l1_distance(x, y).item() == pytest.approx((0.1 + 0.8 + 0.3) / 3)
    with pytest.raises(ValueError):
        logice.t_norm([x, y], "max")


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=3, max_size=3),
    st.lists(st.floats(0, 1), min_size=3, max_size=3),
    st.sampled_from(logice.TNORMS),
)
def test_t_norm_laws(a: list[float], b: list[float], kind: str) -> None:
    x, y = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    t = logice.t_norm([x, y], kind)
    assert torch.allclose(t, logice.t_norm([y, x], kind))  # commutative
    assert torch.all(t <= torch.minimum(x, y) + 1e-12)  # never above the Goedel (largest) t-norm
    assert torch.allclose(logice.t_norm([x, torch.ones_like(x)], kind), x)  # 1 is neutral
    # De Morgan between the conorm and the norm
    assert torch.allclose(
        logice.negation(logice.t_conorm([x, y], kind)),
        logice.t_norm([logice.negation(x), logice.negation(y)], kind),
    )


def test_cone_negation_geometry() -> None:
    axis, arg = torch.tensor([1.0, -0.5, 0.0]), torch.tensor([0.3, 0.0, PI])
    n_axis, n_arg = cone.negation(axis, arg)
    assert n_axis.tolist() == pytest.approx([1.0 - PI, -0.5 + PI, -PI])
    assert n_arg.tolist() == pytest.approx([PI - 0.3, PI, 0.0])
    back = cone.negation(n_axis, n_arg)  # involution up to the 2*pi wrap
    assert torch.allclose(torch.cos(back[0]), torch.cos(axis), atol=1e-6)
    assert torch.allclose(back[1], arg)


def _inside(v: torch.Tensor, axis: torch.Tensor, arg: torch.Tensor) -> torch.Tensor:
    # angular distance to the axis, in [0, pi], against the half-aperture
    d = torch.abs(torch.atan2(torch.sin(v - axis), torch.cos(v - axis)))
    return d < arg


@settings(max_examples=100, deadline=None)
@given(st.floats(-3.1, 3.1), st.floats(0.05, 3.0), st.floats(-3.14, 3.14))
def test_negation_is_the_complement_cone(axis: float, arg: float, v: float) -> None:
    a, g, p = torch.tensor([axis]), torch.tensor([arg]), torch.tensor([v])
    n_axis, n_arg = cone.negation(a, g)
    d = torch.abs(torch.atan2(torch.sin(p - a), torch.cos(p - a))).item()
    if abs(d - arg) < 1e-4:  # on the boundary both may claim it
        return
    assert bool(_inside(p, a, g)) != bool(_inside(p, n_axis, n_arg))
    # a point inside the cone has no outside distance; outside it, a positive one
    dist = cone.distance(p, a, g, inside_weight=0.0).item()
    assert (dist == 0.0) == bool(_inside(p, a, g))


def test_cone_intersection_hand_values() -> None:
    axes = torch.tensor([[PI / 2], [0.0]])
    args = torch.tensor([[1.0], [0.4]])
    half = torch.full((2, 1), 0.5)
    axis, arg = cone.intersection(axes, args, half, torch.tensor([0.5]))
    assert axis.item() == pytest.approx(PI / 4)  # the mean direction of 90 and 0 degrees
    assert arg.item() == pytest.approx(0.2)  # the smaller half-aperture, halved by the gate
    # all the attention on one cone and an open gate: that cone's axis, the smaller aperture
    axis, arg = cone.intersection(axes, args, torch.tensor([[1.0], [0.0]]), torch.tensor([1.0]))
    assert axis.item() == pytest.approx(PI / 2)
    assert arg.item() == pytest.approx(0.4)
    # across the -pi/pi seam the mean stays at the seam, not at 0
    axis, _ = cone.intersection(torch.tensor([[3.0], [-3.0]]), args, half, torch.tensor([1.0]))
    assert abs(axis.item()) == pytest.approx(PI)


def test_cone_distance_hand_value() -> None:
    axis, arg = torch.tensor([0.0]), torch.tensor([PI / 4])
    # a point at 90 degrees: pi/4 outside the boundary at 45 degrees
    out = math.sin(PI / 8)
    inside = min(math.sin(PI / 4), math.sin(PI / 8))
    assert cone.distance(torch.tensor([PI / 2]), axis, arg).item() == pytest.approx(out + 0.02 * inside)
    assert cone.distance(torch.tensor([0.0]), axis, arg).item() == pytest.approx(0.0, abs=1e-7)
    # inside but off the axis: only the weighted inside part
    assert cone.distance(torch.tensor([0.3]), axis, arg).item() == pytest.approx(0.02 * math.sin(0.15))
    assert cone.to_arg(torch.tensor([-50.0, 0.0, 50.0])).tolist() == pytest.approx([0.0, PI / 2, PI])
    # the half-angle form answers the hand-computed point the same way
    halves = cone.half_angles(torch.tensor([PI / 2]))
    assert cone.distance_from_halves(halves, axis, arg).item() == pytest.approx(out + 0.02 * inside)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 0.5))
def test_half_angle_distance_equals_the_direct_one(seed: int, weight: float) -> None:
    """The all-entity scoring path (sines of half angles, multiply-adds) against the direct formula, on
    random axes over the whole circle, apertures from 0 to pi and entities on both sides of the seam."""
    gen = torch.Generator().manual_seed(seed)
    ent = (torch.rand(7, 5, generator=gen, dtype=torch.float64) * 2 - 1) * PI  # (C, d)
    axis = (torch.rand(3, 1, 5, generator=gen, dtype=torch.float64) * 2 - 1) * PI  # (B, 1, d)
    arg = torch.rand(3, 1, 5, generator=gen, dtype=torch.float64) * PI
    direct = cone.distance(ent.unsqueeze(0), axis, arg, weight)
    fast = cone.distance_from_halves(tuple(h.unsqueeze(0) for h in cone.half_angles(ent)), axis, arg, weight)
    assert direct.shape == fast.shape == (3, 7)
    assert torch.allclose(direct, fast, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 0.5), st.integers(1, 9))
def test_fused_point_distance_equals_the_direct_one_with_its_gradients(
    seed: int, weight: float, b: int
) -> None:
    """The train step's fused distance (chunked forward, hand-written backward) against autograd over the
    direct formula: the same values and the same gradients for the entities' raw parameters and the
    cones' axes and apertures (float64; raw values far into tanh's tails, apertures from 0 to pi)."""
    gen = torch.Generator().manual_seed(seed)
    raw = (torch.randn(b, 6, 5, generator=gen, dtype=torch.float64) * 2).requires_grad_()
    axis = ((torch.rand(b, 5, generator=gen, dtype=torch.float64) * 2 - 1) * PI).requires_grad_()
    arg = (torch.rand(b, 5, generator=gen, dtype=torch.float64) * PI).requires_grad_()
    upstream = torch.randn(b, 6, generator=gen, dtype=torch.float64)
    results = []
    for fused in (False, True):
        if fused:
            dist = cone.point_distance(raw, axis, arg, weight)
        else:
            dist = cone.distance(cone.to_axis(raw), axis.unsqueeze(1), arg.unsqueeze(1), weight)
        grads = torch.autograd.grad((dist * upstream).sum(), (raw, axis, arg))
        results.append((dist, *grads))
    for direct, fused in zip(*results, strict=True):
        assert torch.allclose(direct, fused, atol=1e-12)


def test_fused_point_distance_chunks_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows split over several cache-sized chunks give the values and gradients of one pass."""
    gen = torch.Generator().manual_seed(3)
    raw = torch.randn(40, 30, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    axis = ((torch.rand(40, 8, generator=gen, dtype=torch.float64) * 2 - 1) * PI).requires_grad_()
    arg = (torch.rand(40, 8, generator=gen, dtype=torch.float64) * PI).requires_grad_()
    whole = cone.point_distance(raw, axis, arg)
    whole_grads = torch.autograd.grad(whole.sum(), (raw, axis, arg))
    chunks = cone._row_chunks
    assert len(chunks(raw, elements=1000)) == 10  # 4 rows of 240 values per chunk
    monkeypatch.setattr(cone, "_row_chunks", lambda x: chunks(x, elements=1000))
    split = cone.point_distance(raw, axis, arg)
    assert torch.equal(split, whole)
    for a, b in zip(torch.autograd.grad(split.sum(), (raw, axis, arg)), whole_grads, strict=True):
        assert torch.equal(a, b)
