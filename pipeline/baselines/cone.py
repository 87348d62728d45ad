"""ConE operators (Zhang et al. 2021): a query is a product of d two-dimensional sector cones.

Each dimension holds an axis in [-pi, pi) and a half-aperture ``arg`` in [0, pi] (the cone covers the
angles ``axis - arg .. axis + arg``); an entity is a cone of aperture 0 (just its axis). Pure functions over
tensors of shape ``(..., d)``; the learned parts (projection MLP, attention, gate) live in
:mod:`pipeline.baselines.models` and are passed in as tensors here.
"""

from __future__ import annotations

import math

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
    halves: tuple[torch.Tensor, torch.Tensor], axis: torch.Tensor, arg: torch.Tensor, inside_weight: float = 0.02
) -> torch.Tensor:
    """:func:`distance` with the entities given by :func:`half_angles`: the same value, by
    ``sin((v - x)/2) = sin(v/2) cos(x/2) - cos(v/2) sin(x/2)``, so the (queries x entities x d) work is
    multiply-adds and the sines and cosines are taken on (entities x d) and (queries x d) only (scoring
    every entity is the cost of answering). Broadcasts halves (..., C, d) against axis/arg (..., 1, d)."""
    sv, cv = halves

    def chord(x: torch.Tensor) -> torch.Tensor:
        return torch.abs(sv * torch.cos(x / 2) - cv * torch.sin(x / 2))

    to_axis_ = chord(axis)
    half = torch.abs(torch.sin(arg / 2))
    outside = torch.minimum(chord(axis - arg), chord(axis + arg))
    outside = torch.where(to_axis_ < half, torch.zeros_like(outside), outside)
    inside = torch.minimum(to_axis_, half)
    return (outside + inside_weight * inside).mean(dim=-1)
