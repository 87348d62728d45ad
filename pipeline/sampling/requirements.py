"""Soft requirements of sampled atoms (design section 1): alpha thresholds by level, beta weights by mode.

alpha levels per relation: zero = 0, low / normal / high = the 25th / 50th / 75th percentile of the
relation's confidences over ALL published rows of train, val and test (duplicates kept; the SQUK
benchmark's definition, :func:`alpha_percentiles` is its one implementation; ingest stores the result on
the store's relation vocabulary, where sampling and `pipeline stats` read it); ``hybrid`` draws one of the
four levels per query. beta: ``equal`` = 1.0, ``random`` = U(0.1, 1) in steps of 0.1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pipeline.errors import PipelineError, unknown_name

ALPHA_LEVELS = ("zero", "low", "normal", "high")
ALPHA_MODES = (*ALPHA_LEVELS, "hybrid")
BETA_MODES = ("equal", "random")
PERCENTILES = {"low": 25.0, "normal": 50.0, "high": 75.0}


def check_alpha_mode(mode: str) -> str:
    if mode not in ALPHA_MODES:
        raise unknown_name("alpha mode", mode, list(ALPHA_MODES))
    return mode


def check_beta_mode(mode: str) -> str:
    if mode not in BETA_MODES:
        raise unknown_name("beta mode", mode, list(BETA_MODES))
    return mode


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


LEVEL_DECIMALS = 4  # the published percentile files carry 4 decimals


def alpha_percentiles(
    rel: np.ndarray, conf: np.ndarray, n_relations: int
) -> dict[int, tuple[float, float, float]]:
    """The low/normal/high alpha levels of each relation id that has rows (design section 1).

    rel, conf: (n_rows,) relation id and confidence of EVERY published row of train, val and test as read
    (duplicate (h, r, t) rows kept, not merged: the SQUK benchmark counts each row; the caller leaves out
    CN15k's zero-confidence test negatives, which are not facts). Returns {rid: (p25, p50, p75)} with
    numpy's default linear interpolation, rounded to 4 decimals. This reproduces all 21 values of SQUK's
    published PPI5k ``percentile_25_50_75.json`` (tests/sampling/test_levels_squk.py)."""
    rel = np.asarray(rel, dtype=np.int64)
    conf = np.asarray(conf, dtype=np.float64)
    out: dict[int, tuple[float, float, float]] = {}
    for r in range(n_relations):
        c = conf[rel == r]
        if len(c):
            q = np.round(np.percentile(c, [25.0, 50.0, 75.0]), LEVEL_DECIMALS)
            out[r] = (float(q[0]), float(q[1]), float(q[2]))
    return out


def draw_level(rng: np.random.Generator, mode: str) -> str:
    """The alpha level of one query: the mode itself, or a uniform draw among the four for hybrid."""
    check_alpha_mode(mode)
    if mode == "hybrid":
        return ALPHA_LEVELS[int(rng.integers(len(ALPHA_LEVELS)))]
    return mode


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
