"""The compiled stream of pipeline.engine.kernels (imported only there: importing this module imports
numba). Module level so that numba can cache the compiled code on disk."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from pipeline.engine._numba_cache import checked


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


@numba.njit(inline="always")
def _run_end(dst: Any, i: int, n: int) -> int:  # pragma: no cover - compiled
    """The end of the run of entries from i on with dst[i]'s column."""
    j = i + 1
    while j < n and dst[j] == dst[i]:
        j += 1
    return j


@numba.njit(inline="always")
def _term(st: Any, src: Any, cc: Any, k: int, b: int, b0: Any, b1: Any, two: bool) -> Any:  # pragma: no cover
    """Entry k's value for row b with one atom (beta b0) or two (b0, b1), fused multiply-adds in order."""
    v = fma32(cc[0, k], b0, st[src[k], b])
    return fma32(cc[1, k], b1, v) if two else v


@numba.njit(cache=True, nogil=True, boundscheck=False)
def stream(st: Any, src: Any, dst: Any, cc: Any, beta: Any, out: Any) -> None:  # pragma: no cover - compiled
    """out[dst_i, b] = max(out[dst_i, b], st[src_i, b] + sum_p beta[p, b] * cc[p, i]) for every entry i
    and row b (kernels.stream_max): st, out (N, B) float32; src, dst (F,) int32|int64; cc (P, F) and
    beta (P, B) float32. Each run of entries with one dst (the engine's arrays are sorted by dst) is
    reduced apart from out, so no entry waits on the previous one's store: with few rows in registers,
    row by row, four chains at once (a NaN tracked aside); with many rows in two accumulator rows (even
    and odd entries) whose loops over the rows are vectorised. One and two atoms (a relation; a
    multi-edge's shared entries) take these loops; more atoms a plain one. Correct for any order of dst
    (runs are then shorter)."""
    n_atoms, bsz = beta.shape
    n = src.shape[0]
    two = n_atoms == 2
    if bsz < _WIDE_ROWS:
        i = 0
        while i < n:
            o, j = dst[i], _run_end(dst, i, n)
            for b in range(bsz):
                acc = out[o, b]
                if n_atoms > 2:  # rare (a three-atom multi-edge): one chain
                    for k in range(i, j):
                        v = st[src[k], b]
                        for p in range(n_atoms):
                            v = fma32(cc[p, k], beta[p, b], v)
                        acc = _amax(acc, v)
                    out[o, b] = acc
                    continue
                b0, b1 = beta[0, b], beta[n_atoms - 1, b]
                a1 = a2 = a3 = acc
                bad = acc != acc  # a NaN seen: kept apart, so each chain is one compare and select
                k = i
                while k + 4 <= j:  # four accumulators: four independent chains of maxima
                    x0 = _term(st, src, cc, k, b, b0, b1, two)
                    x1 = _term(st, src, cc, k + 1, b, b0, b1, two)
                    x2 = _term(st, src, cc, k + 2, b, b0, b1, two)
                    x3 = _term(st, src, cc, k + 3, b, b0, b1, two)
                    acc = x0 if x0 > acc else acc
                    a1 = x1 if x1 > a1 else a1
                    a2 = x2 if x2 > a2 else a2
                    a3 = x3 if x3 > a3 else a3
                    bad |= (x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3)
                    k += 4
                for t in range(k, j):
                    x0 = _term(st, src, cc, t, b, b0, b1, two)
                    acc = x0 if x0 > acc else acc
                    bad |= x0 != x0
                acc = _amax(_amax(acc, a1), _amax(a2, a3))
                out[o, b] = np.float32(np.nan) if bad else acc
            i = j
        return
    if n_atoms <= 2:  # each run maxed into two accumulator rows (even and odd entries), then into out
        acc0 = np.empty(bsz, dtype=np.float32)
        acc1 = np.empty(bsz, dtype=np.float32)
        i = 0
        while i < n:
            o, j = dst[i], _run_end(dst, i, n)
            for b in range(bsz):
                acc0[b] = out[o, b]
                acc1[b] = out[o, b]
            for k in range(i, j, 2):
                k1 = k + 1 if k + 1 < j else k  # an odd run: the last entry twice
                s0, s1, c0, c1 = src[k], src[k1], cc[0, k], cc[0, k1]
                # one loop per atom count, its loads hoisted: a condition inside stops the vectorising
                if two:
                    d0, d1 = cc[1, k], cc[1, k1]
                    for b in range(bsz):
                        acc0[b] = _amax(acc0[b], fma32(d0, beta[1, b], fma32(c0, beta[0, b], st[s0, b])))
                        acc1[b] = _amax(acc1[b], fma32(d1, beta[1, b], fma32(c1, beta[0, b], st[s1, b])))
                else:
                    for b in range(bsz):
                        acc0[b] = _amax(acc0[b], fma32(c0, beta[0, b], st[s0, b]))
                        acc1[b] = _amax(acc1[b], fma32(c1, beta[0, b], st[s1, b]))
            for b in range(bsz):
                out[o, b] = _amax(acc0[b], acc1[b])
            i = j
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


@numba.njit(cache=True, nogil=True, boundscheck=False)
def merge_two(a: Any, b: Any, pos_a: Any, pos_b: Any) -> int:  # pragma: no cover - compiled
    """The keys present in both of two ascending, duplicate-free arrays a and b, by one two-pointer pass:
    writes each shared key's position in a and in b into pos_a, pos_b (room for min(len) entries, in
    ascending key order) and returns how many there are (kernels.shared_two)."""
    i = j = k = 0
    na, nb = a.shape[0], b.shape[0]
    while i < na and j < nb:
        x, y = a[i], b[j]
        if x < y:
            i += 1
        elif y < x:
            j += 1
        else:
            pos_a[k] = i
            pos_b[k] = j
            k += 1
            i += 1
            j += 1
    return k


stream = checked(stream)  # its disk cache sealed with CRC-32s: a damaged file means a fresh compilation
merge_two = checked(merge_two)
