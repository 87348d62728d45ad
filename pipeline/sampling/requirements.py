"""Soft requirements of sampled atoms (design section 1): alpha thresholds by level, beta weights by mode.

alpha levels per relation: zero = 0, low / normal / high = the 25th / 50th / 75th percentile of the
relation's confidences over ALL published rows of train, val and test (duplicates kept; the SQUK
benchmark's definition, :func:`loaders.levels.alpha_percentiles` is its one implementation; ingest stores the result on
the store's relation vocabulary, where sampling and `pipeline stats` read it); ``hybrid`` draws one of the
four levels per query; ``squk`` draws one of low / normal / high per atom, as the SQUK benchmark's own
generator does for its published query files (its hybrid: no atom at zero, levels mixed within a query).
beta: ``equal`` = 1.0, ``random`` = U(0.1, 1) in steps of 0.1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.core.errors import PipelineError
from pipeline.core.registry import Registry


@dataclass(frozen=True)
class Mode:
    """A named way of setting alpha or beta (``pipeline sample --alpha NAME`` / ``--beta NAME``)."""

    name: str
    description: str


ALPHA_LEVELS = ("zero", "low", "normal", "high")
ALPHA_MODES: Registry[Mode] = Registry(
    "alpha mode",
    (
        Mode("zero", "alpha = 0: no atom ever fails"),
        Mode("low", "the 25th percentile of the relation's confidences"),
        Mode("normal", "the 50th percentile of the relation's confidences"),
        Mode("high", "the 75th percentile of the relation's confidences"),
        Mode("hybrid", "one of zero/low/normal/high drawn per query"),
        Mode("squk", "one of low/normal/high drawn per atom (the SQUK benchmark generator's hybrid)"),
    ),
)
BETA_MODES: Registry[Mode] = Registry(
    "beta mode",
    (Mode("equal", "beta = 1 for every atom"), Mode("random", "beta drawn from {0.1, 0.2, ..., 1.0} per atom")),
)
PERCENTILES = {"low": 25.0, "normal": 50.0, "high": 75.0}
PER_ATOM_LEVELS = ("low", "normal", "high")  # what the squk mode draws from, per atom


def check_alpha_mode(mode: str) -> str:
    return ALPHA_MODES.canonical(mode)


def check_beta_mode(mode: str) -> str:
    return BETA_MODES.canonical(mode)


def alpha_table(percentiles: Mapping[int, Sequence[float]], n_relations: int) -> np.ndarray:
    """(n_relations, 4) float64: columns zero, low, normal, high, one row per relation id.

    percentiles maps a relation id to its (p25, p50, p75). A relation without positive facts has no
    percentiles; it cannot be sampled from either, so asking for its row is an error (see alpha_for)."""
    table = np.full((n_relations, len(ALPHA_LEVELS)), np.nan)
    table[:, 0] = 0.0
    for rid, (p25, p50, p75) in percentiles.items():
        if not 0 <= int(rid) < n_relations:
            raise PipelineError(f"alpha percentiles name relation {rid}, outside 0..{n_relations - 1}")
        if not (0.0 <= p25 <= p50 <= p75 <= 1.0):
            raise PipelineError(f"relation {rid}: percentiles {p25}, {p50}, {p75} are not ordered in [0, 1]")
        table[int(rid), 1:] = (p25, p50, p75)
    return table



def draw_level(rng: np.random.Generator, mode: str) -> str:
    """The alpha level of one query (of one atom for squk): the mode itself, or a uniform draw among the
    four for hybrid, among low/normal/high for squk."""
    check_alpha_mode(mode)
    if mode == "hybrid":
        return ALPHA_LEVELS[int(rng.integers(len(ALPHA_LEVELS)))]
    if mode == "squk":
        return PER_ATOM_LEVELS[int(rng.integers(len(PER_ATOM_LEVELS)))]
    return mode


def draw_levels(rng: np.random.Generator, mode: str, n_atoms: int) -> list[str]:
    """The alpha level of each of a query's n_atoms atoms: squk draws one per atom; every other mode draws
    one level for the whole query (:func:`draw_level`, the same draws as before this function existed,
    so the query sets of those modes are unchanged)."""
    check_alpha_mode(mode)
    if mode == "squk":
        return [PER_ATOM_LEVELS[int(k)] for k in rng.integers(len(PER_ATOM_LEVELS), size=n_atoms)]
    return [draw_level(rng, mode)] * n_atoms


def alpha_for(table: np.ndarray, relations: Sequence[int], level: str) -> list[float]:
    """alpha of each atom (by its relation id) at one level; values as stored (no rounding)."""
    col = ALPHA_LEVELS.index(level)
    out = []
    for r in relations:
        a = float(table[int(r), col])
        if np.isnan(a):
            raise PipelineError(f"relation {r} has no positive facts, so no '{level}' alpha level")
        out.append(a)
    return out


def draw_betas(rng: np.random.Generator, mode: str, n: int) -> list[float]:
    """n beta weights: 1.0 each (equal) or uniform over {0.1, 0.2, ..., 1.0} (random)."""
    check_beta_mode(mode)
    if mode == "equal":
        return [1.0] * n
    # integers/10 keeps the values exact decimals (0.3, not 0.30000000000000004)
    return [int(k) / 10 for k in rng.integers(1, 11, size=n)]
