"""Calibration D (design section 2): every atom's alpha becomes ``max(0, alpha - delta)`` when answering on
predicted confidences, delta chosen on the valid queries from :data:`~.calibrations.DELTA_GRID`. Also
``zero_alphas``, the alpha-0 queries calibration L trains on. Pure functions over queries (no torch)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from pipeline.core.progress import output
from pipeline.methods.src.calibrations import DELTA_GRID
from pipeline.softquery.model import Conjunction, Query


def lower_alphas(query: Query, delta: float) -> Query:
    """The query with every atom's alpha lowered by delta (never below 0)."""
    if delta == 0.0:
        return query
    return Query(
        tuple(
            Conjunction(tuple(replace(a, alpha=max(0.0, float(a.alpha) - delta)) for a in c.atoms))
            for c in query.conjunctions
        )
    )


def zero_alphas(query: Query) -> Query:
    """The query with alpha = 0 on every atom (L trains on these: no atom can fail)."""
    return Query(tuple(Conjunction(tuple(replace(a, alpha=0.0) for a in c.atoms)) for c in query.conjunctions))


def choose_delta(
    score: Callable[[float], float], grid: Sequence[float] = DELTA_GRID, progress: bool = False
) -> tuple[float, dict[float, float]]:
    """The delta of the grid with the highest score (the first on ties, so smaller deltas win); also every
    score, for the record."""
    with output(progress).bar(grid, desc="calibration D", unit="delta") as bar:
        scores = {float(d): float(score(float(d))) for d in bar}
    return best_delta(scores), scores


def best_delta(scores: dict[float, float]) -> float:
    """The delta with the highest score (the smallest on ties)."""
    return max(scores, key=lambda d: (scores[d], -d))
