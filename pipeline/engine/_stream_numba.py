"""The compiled stream of pipeline.engine.kernels (imported only there: importing this module imports
numba). Module level so that numba can cache the compiled code on disk."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic


@intrinsic
def fma32(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """a * b + c rounded once (llvm.fma.f32), as torch's addcmul_ computes it on the CPU."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        f32 = ir.FloatType()
        fn = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32, f32, f32]))
        return builder.call(fn, args)

    return sig, codegen


_WIDE_ROWS = 4  # from this many rows on, the loops over the rows (vectorised) beat the runs in registers


@numba.njit(inline="always")
def _amax(cur: Any, x: Any) -> Any:  # pragma: no cover - compiled
    """max as torch's amax computes it: the larger value; a NaN wins and stays (branch-free selects)."""
    return cur if cur != cur else (x if (x > cur or x != x) else cur)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def stream(st: Any, src: Any, dst: Any, cc: Any, beta: Any, out: Any) -> None:  # pragma: no cover - compiled
    """out[dst_i, b] = max(out[dst_i, b], st[src_i, b] + sum_p beta[p, b] * cc[p, i]) for every entry i
    and row b (kernels.stream_max): st, out (N, B) float32; src, dst (F,) int32|int64; cc (P, F) and
    beta (P, B) float32. Few rows: each run of entries with one dst (the engine's arrays are sorted by
    dst) is reduced in a register, row by row, so no entry waits on the previous one's store. Many rows:
    the innermost loops run over the rows (vectorised). One and two atoms (a relation; a multi-edge's
    shared entries) have loops of their own. Correct for any order of dst (runs are then shorter)."""
    n_atoms, bsz = beta.shape
    n = src.shape[0]
    if bsz < _WIDE_ROWS:
        i = 0
        while i < n:
            o = dst[i]
            j = i + 1
            while j < n and dst[j] == o:
                j += 1
            for b in range(bsz):
                acc = out[o, b]
                if n_atoms == 1:  # four accumulators: four independent chains of maxima
                    b0 = beta[0, b]
                    a1 = a2 = a3 = acc
                    k = i
                    while k + 4 <= j:
                        acc = _amax(acc, fma32(cc[0, k], b0, st[src[k], b]))
                        a1 = _amax(a1, fma32(cc[0, k + 1], b0, st[src[k + 1], b]))
                        a2 = _amax(a2, fma32(cc[0, k + 2], b0, st[src[k + 2], b]))
                        a3 = _amax(a3, fma32(cc[0, k + 3], b0, st[src[k + 3], b]))
                        k += 4
                    for t in range(k, j):
                        acc = _amax(acc, fma32(cc[0, t], b0, st[src[t], b]))
                    acc = _amax(_amax(acc, a1), _amax(a2, a3))
                elif n_atoms == 2:
                    b0, b1 = beta[0, b], beta[1, b]
                    a1 = a2 = a3 = acc
                    k = i
                    while k + 4 <= j:
                        acc = _amax(acc, fma32(cc[1, k], b1, fma32(cc[0, k], b0, st[src[k], b])))
                        a1 = _amax(a1, fma32(cc[1, k + 1], b1, fma32(cc[0, k + 1], b0, st[src[k + 1], b])))
                        a2 = _amax(a2, fma32(cc[1, k + 2], b1, fma32(cc[0, k + 2], b0, st[src[k + 2], b])))
                        a3 = _amax(a3, fma32(cc[1, k + 3], b1, fma32(cc[0, k + 3], b0, st[src[k + 3], b])))
                        k += 4
                    for t in range(k, j):
                        acc = _amax(acc, fma32(cc[1, t], b1, fma32(cc[0, t], b0, st[src[t], b])))
                    acc = _amax(_amax(acc, a1), _amax(a2, a3))
                else:
                    for k in range(i, j):
                        v = st[src[k], b]
                        for p in range(n_atoms):
                            v = fma32(cc[p, k], beta[p, b], v)
                        acc = _amax(acc, v)
                out[o, b] = acc
            i = j
        return
    if n_atoms == 1:
        for i in range(n):
            s, o, c = src[i], dst[i], cc[0, i]
            for b in range(bsz):
                out[o, b] = _amax(out[o, b], fma32(c, beta[0, b], st[s, b]))
        return
    if n_atoms == 2:
        for i in range(n):
            s, o, c0, c1 = src[i], dst[i], cc[0, i], cc[1, i]
            for b in range(bsz):
                out[o, b] = _amax(out[o, b], fma32(c1, beta[1, b], fma32(c0, beta[0, b], st[s, b])))
        return
    v = np.empty(bsz, dtype=np.float32)
    for i in range(n):
        s, o = src[i], dst[i]
        for b in range(bsz):
            v[b] = st[s, b]
        for p in range(n_atoms):
            c = cc[p, i]
            for b in range(bsz):
                v[b] = fma32(c, beta[p, b], v[b])
        for b in range(bsz):
            out[o, b] = _amax(out[o, b], v[b])
