"""ConE operators (Zhang et al. 2021): a query is a product of d two-dimensional sector cones.

Each dimension holds an axis in [-pi, pi) and a half-aperture ``arg`` in [0, pi] (the cone covers the
angles ``axis - arg .. axis + arg``); an entity is a cone of aperture 0 (just its axis). Pure functions over
tensors of shape ``(..., d)``; the learned parts (projection MLP, attention, gate) live in
:mod:`pipeline.baselines.models` and are passed in as tensors here.
"""

from __future__ import annotations

import math
from typing import Any

import torch

PI = math.pi


def to_axis(x: torch.Tensor) -> torch.Tensor:
    """Unbounded values to axes in (-pi, pi)."""
    return torch.tanh(x) * PI


def to_arg(x: torch.Tensor) -> torch.Tensor:
    """Unbounded values to half-apertures in (0, pi)."""
    return torch.tanh(2.0 * x) * (PI / 2) + PI / 2


def negation(axis: torch.Tensor, arg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The complement cone: the opposite axis, the complementary half-aperture ``pi - arg``."""
    flipped = torch.where(axis >= 0, axis - PI, axis + PI)
    return flipped, PI - arg


def intersection(
    axes: torch.Tensor, args: torch.Tensor, attention: torch.Tensor, gate: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Intersection of k cones.

    axes, args: (k, ..., d); attention: (k, ..., d) weights summing to 1 over k; gate: (..., d) in [0, 1].
    The axis is the attention-weighted mean direction (a semantic average on the circle, computed with
    atan2 so that it never leaves [-pi, pi)); the half-aperture is the smallest one shrunk by the gate,
    so the result is never wider than any input cone."""
    x = (attention * torch.cos(axes)).sum(0)
    y = (attention * torch.sin(axes)).sum(0)
    axis = torch.atan2(y, x)
    arg = args.min(dim=0).values * gate
    return axis, arg


def distance(
    entity_axis: torch.Tensor, axis: torch.Tensor, arg: torch.Tensor, inside_weight: float = 0.02
) -> torch.Tensor:
    """ConE's distance of entity points to query cones, averaged over dimensions.

    Outside part: the chord distance ``|sin((v - bound)/2)|`` to the nearer cone boundary, 0 for a point
    inside the cone; inside part: the distance to the axis, capped by the cone's own size, weighted by
    ``inside_weight`` so that points near the axis rank first among those inside. Broadcasts
    entity_axis (..., C, d) against axis/arg (..., 1, d)."""
    to_axis_ = torch.abs(torch.sin((entity_axis - axis) / 2))
    half = torch.abs(torch.sin(arg / 2))
    outside = torch.minimum(
        torch.abs(torch.sin((entity_axis - (axis - arg)) / 2)),
        torch.abs(torch.sin((entity_axis - (axis + arg)) / 2)),
    )
    outside = torch.where(to_axis_ < half, torch.zeros_like(outside), outside)
    inside = torch.minimum(to_axis_, half)
    return (outside + inside_weight * inside).mean(dim=-1)


def half_angles(entity_axis: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sin(v/2), cos(v/2))`` of entity axes, computed once per scoring of all entities."""
    return torch.sin(entity_axis / 2), torch.cos(entity_axis / 2)


def distance_from_halves(
    halves: tuple[torch.Tensor, torch.Tensor],
    axis: torch.Tensor,
    arg: torch.Tensor,
    inside_weight: float = 0.02,
) -> torch.Tensor:
    """:func:`distance` with the entities given by :func:`half_angles`: the same value with no sine or
    cosine of an (entities x queries x d) tensor, which is the cost of scoring (every candidate of every
    train step, every entity when answering).

    With ``u = (v - axis)/2`` and ``h = arg/2`` in [0, pi/2]: ``sin u`` and ``cos u`` are multiply-adds of
    the entity's half-angle sines (``sin(v/2) cos(axis/2) - cos(v/2) sin(axis/2)``, ...); the two boundary
    chords are ``|sin(u - h)|`` and ``|sin(u + h)|``, and ``min(|x - y|, |x + y|) = ||x| - |y||`` turns
    their minimum into ``| |sin u| cos h - |cos u| sin h |``, which is ``sin(t - h)`` for the angle
    ``t`` in [0, pi/2] with ``sin t = |sin u|``: negative exactly when the point is inside the cone
    (``|sin u| < sin h``), where :func:`distance` counts no outside part. So the outside part is
    ``relu(|sin u| cos h - |cos u| sin h)`` and the inside part ``min(|sin u|, sin h)``.
    Broadcasts halves (..., C, d) against axis/arg (..., 1, d)."""
    sv, cv = halves
    sa, ca = torch.sin(axis / 2), torch.cos(axis / 2)
    sh, ch = torch.sin(arg / 2), torch.cos(arg / 2)
    su = torch.abs(sv * ca - cv * sa)
    cu = torch.abs(cv * ca + sv * sa)
    outside = torch.relu(su * ch - cu * sh)
    inside = torch.minimum(su, sh)
    return (outside + inside_weight * inside).mean(dim=-1)


class _PointDistance(torch.autograd.Function):
    """:func:`point_distance`, forward and backward over chunks of queries. Autograd over the elementwise
    formula reads and writes a (B, C, d) tensor per operation (~25 of them with the backward), which bounds
    a ConE train step by memory traffic; here a chunk's temporaries stay in cache, nothing (B, C, d) is
    saved for the backward (it is recomputed), and only the inputs' gradients are written. Measured: a
    PPI5k train step (256 queries x 160 candidates x d = 128) 2.9 -> 5.1 steps/s on one thread."""

    @staticmethod
    def forward(ctx: Any, raw: torch.Tensor, axis: torch.Tensor, arg: torch.Tensor, w: float) -> torch.Tensor:
        ctx.save_for_backward(raw, axis, arg)
        ctx.w = w
        out = raw.new_empty(raw.shape[:-1])
        for rows in _row_chunks(raw):
            p, q = _Parts.of(raw[rows], axis[rows], arg[rows])
            out[rows] = (torch.relu(p.su * q.ch - p.cu * q.sh) + w * torch.minimum(p.su, q.sh)).mean(-1)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        raw, axis, arg = ctx.saved_tensors
        w = ctx.w
        g_raw = torch.empty_like(raw)
        g_axis, g_arg = torch.empty_like(axis), torch.empty_like(arg)
        for rows in _row_chunks(raw):
            p, q = _Parts.of(raw[rows], axis[rows], arg[rows])
            g = (grad[rows] / raw.shape[-1]).unsqueeze(-1)  # d(mean)/d(term)
            out_on = (p.su * q.ch > p.cu * q.sh).to(raw.dtype)
            in_on = (p.su < q.sh).to(raw.dtype)
            g_su = g * (out_on * q.ch + w * in_on)
            g_cu = -g * out_on * q.sh
            g_ch = (g * out_on * p.su).sum(1)
            g_sh = (g * (w * (1.0 - in_on) - out_on * p.cu)).sum(1)
            ds, dc = g_su * torch.sign(p.s), g_cu * torch.sign(p.c)
            g_sv = ds * q.ca + dc * q.sa
            g_cv = dc * q.ca - ds * q.sa
            # the point's half angle is (pi/2) tanh(raw): d/draw = (pi/2)(1 - tanh^2)
            g_raw[rows] = (g_sv * p.cv - g_cv * p.sv) * ((PI / 2) * (1.0 - p.t * p.t))
            g_ca = (ds * p.sv + dc * p.cv).sum(1)
            g_sa = (dc * p.sv - ds * p.cv).sum(1)
            sa, ca, sh, ch = (x.squeeze(1) for x in (q.sa, q.ca, q.sh, q.ch))
            g_axis[rows] = (g_sa * ca - g_ca * sa) / 2
            g_arg[rows] = (g_sh * ch - g_ch * sh) / 2
        return g_raw, g_axis, g_arg, None


class _Parts:
    """The half-angle terms of one chunk: the points' (t = tanh(raw), sv, cv = sin, cos of the half axis,
    s = sin u, c = cos u, su = |s|, cu = |c|) and the cones' (sa, ca, sh, ch), the latter (b, 1, d)."""

    __slots__ = ("t", "sv", "cv", "s", "c", "su", "cu", "sa", "ca", "sh", "ch")

    @classmethod
    def of(cls, raw: torch.Tensor, axis: torch.Tensor, arg: torch.Tensor) -> tuple[_Parts, _Parts]:
        p, q = cls(), cls()
        q.sa, q.ca = torch.sin(axis / 2).unsqueeze(1), torch.cos(axis / 2).unsqueeze(1)
        q.sh, q.ch = torch.sin(arg / 2).unsqueeze(1), torch.cos(arg / 2).unsqueeze(1)
        p.t = torch.tanh(raw)
        half = p.t * (PI / 2)  # half of to_axis(raw)
        p.sv, p.cv = torch.sin(half), torch.cos(half)
        p.s = p.sv * q.ca - p.cv * q.sa
        p.c = p.cv * q.ca + p.sv * q.sa
        p.su, p.cu = torch.abs(p.s), torch.abs(p.c)
        return p, q


def _row_chunks(x: torch.Tensor, elements: int = 1 << 18) -> list[slice]:
    """Row slices of (B, C, d) holding about ``elements`` values each (1 MB of float32: cache-sized;
    measured best of 2^15..2^20 on the train step)."""
    b, per_row = x.shape[0], max(1, x[0].numel())
    step = max(1, elements // per_row)
    return [slice(s, s + step) for s in range(0, b, step)]


def point_distance(
    raw: torch.Tensor, axis: torch.Tensor, arg: torch.Tensor, inside_weight: float = 0.02
) -> torch.Tensor:
    """:func:`distance` of entity points to query cones axis/arg (B, d): (B, C). The points are given by
    their raw parameters (B, C, d), whose axes are :func:`to_axis` of them. The same value as
    :func:`distance_from_halves` over :func:`half_angles` of those axes, with a fused, chunked backward
    (the cost of a train step)."""
    return _PointDistance.apply(raw, axis, arg, float(inside_weight))
