"""Compiled search of the dense rows' maximisers (imported by pipeline.engine.maxplus._dense_winners only,
where numba imports): for every stored entry (s, o, cc) of a relation and every row r of a group, the
test ``|state[r, s] + beta[r] * cc - out[r, o]| <= tol[r, o]`` (float32, the same operations as the torch
form, no fused multiply-add) and the smallest such s per cell. One pass over the entries in machine code
instead of ~10 torch passes over (rows x entries) temporaries: calibration L's training reads the whole
relation of every alpha-0 2p/2il row of a batch for its gradient. Not cached on disk (~0.3 s to compile
once per process); tests/engine/test_winners.py checks it against the torch form."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, boundscheck=False)
def winners(state_t: np.ndarray, out_t: np.ndarray, tol_t: np.ndarray, beta: np.ndarray, src: np.ndarray,
            dst: np.ndarray, cc: np.ndarray, best_t: np.ndarray) -> None:  # pragma: no cover (compiled)
    """best_t[o, r] = min(best_t[o, r], s) over the entries i = (s, o, cc) that hit in row r. The (N, R)
    layouts keep a cell's rows together: each entry reads R contiguous values."""
    rows = beta.shape[0]
    for i in range(src.shape[0]):
        s = src[i]
        o = dst[i]
        c = cc[i]
        for r in range(rows):
            prod = beta[r] * c
            cand = state_t[s, r] + prod
            if abs(cand - out_t[o, r]) <= tol_t[o, r] and s < best_t[o, r]:
                best_t[o, r] = s
