"""LogicE operators (Luus et al. 2021): embeddings are vectors of truth values in [0, 1]^d.

Conjunction is a t-norm, disjunction its t-conorm, negation ``1 - x``, all applied per dimension; an
entity scores by the L1 distance between its truth vector and the query's. Pure functions over tensors,
shapes ``(..., d)``; the module that owns parameters is :mod:`pipeline.baselines.models`.
"""

from __future__ import annotations

import torch

from pipeline.baselines.settings import TNORMS  # noqa: F401 (declared with the options that choose one)


def t_norm(xs: list[torch.Tensor], kind: str = "product") -> torch.Tensor:
    """Conjunction of truth vectors (each (..., d) in [0, 1])."""
    out = xs[0]
    for x in xs[1:]:
        if kind == "product":
            out = out * x
        elif kind == "godel":
            out = torch.minimum(out, x)
        elif kind == "lukasiewicz":
            out = torch.clamp(out + x - 1.0, min=0.0)
        else:
            raise ValueError(f"unknown t-norm {kind!r}; known: {', '.join(TNORMS)}")
    return out


def t_conorm(xs: list[torch.Tensor], kind: str = "product") -> torch.Tensor:
    """Disjunction, the dual of :func:`t_norm` by De Morgan: ``1 - T(1 - x1, 1 - x2, ...)``."""
    return 1.0 - t_norm([1.0 - x for x in xs], kind)


def negation(x: torch.Tensor) -> torch.Tensor:
    """Standard fuzzy negation."""
    return 1.0 - x


def l1_distance(entity: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference over dimensions (in [0, 1]); broadcasts entity (..., C, d) vs query (..., 1, d)."""
    return (entity - query).abs().mean(dim=-1)
