"""The order in which the SQUK benchmark's generator writes a query's answers, ties included.

The authors' generator (``deterministic_soft_query``) takes the nonzero utilities of a query over the
entities in id order, sorts them with numpy's default ``np.argsort`` and keeps the last 100; their
evaluation reverses that list and reads it as the truth, best first. Where utilities tie, the positions the
tied entities take are whatever that sort leaves, and that order decides the paper protocol's tau and rho
(a tied pair is concordant or discordant with the predicted ranks depending on it).

numpy's default argsort of float64 is not the textbook introsort on every machine: from numpy 1.25 on a CPU
with AVX-512 it runs Intel's x86-simd-sort (bitonic networks of 8-lane registers for up to 64 elements, a
vectorised partition around a median of 8 above that, and libstdc++'s ``std::sort`` where the partitions
stop making progress, as they do on large tie groups). The published files were written that way: this
module re-implements that algorithm, step by step, so that the same order comes out on any machine. It
reproduces every published query we could read whole (17 PPI5k 1p queries of up to 118 answers, 5 CN15k 2in
queries over all 15,000 entities with tie groups of thousands; the fixtures of tests/squk) and none of the
other orders does (the scalar introsort: 0 of 17; the AVX2 sort of this machine's numpy: 12 of 17).

:func:`squk_argsort` is that permutation; :func:`generator_answers` the answer list the generator writes.
Pure functions over arrays; compiled with numba (a 15,000-entity query with 90% ties in about a millisecond).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from pipeline.engine._numba_cache import checked

#: answers the generator keeps (the last 100 of its sort)
GENERATOR_TOP = 100

# Lane permutations of one 8-lane register (result lane L takes lane P[L]), as x86-simd-sort defines them:
# neighbours, reversal within each half, reversal, pairs two apart, halves swapped.
_SWAP1 = np.array([1, 0, 3, 2, 5, 4, 7, 6], dtype=np.int64)
_REV_HALVES = np.array([3, 2, 1, 0, 7, 6, 5, 4], dtype=np.int64)
_REV = np.array([7, 6, 5, 4, 3, 2, 1, 0], dtype=np.int64)
_SWAP2 = np.array([2, 3, 0, 1, 6, 7, 4, 5], dtype=np.int64)
_SWAP4 = np.array([4, 5, 6, 7, 0, 1, 2, 3], dtype=np.int64)
_NETWORK = 64  # sizes up to this sort by networks alone
_UNROLL = 4  # registers per step of the large partition


@numba.njit(cache=False, nogil=True)
def _cmp_merge(k, i, perm, mask):  # pragma: no cover - compiled
    """Compare-exchange each lane with lane perm[L]: lanes whose mask bit is set keep the larger key. A
    lane keeps its own index unless its key changed (ties never move)."""
    nk = np.empty(8)
    ni = np.empty(8, dtype=np.int64)
    for lane in range(8):
        a = k[lane]
        b = k[perm[lane]]
        if (mask >> lane) & 1:
            t = a if a > b else b
        else:
            t = a if a < b else b
        nk[lane] = t
        ni[lane] = i[lane] if t == a else i[perm[lane]]
    k[:] = nk
    i[:] = ni


@numba.njit(cache=False, nogil=True)
def _sort_register(k, i):  # pragma: no cover - compiled
    _cmp_merge(k, i, _SWAP1, 0xAA)
    _cmp_merge(k, i, _REV_HALVES, 0xCC)
    _cmp_merge(k, i, _SWAP1, 0xAA)
    _cmp_merge(k, i, _REV, 0xF0)
    _cmp_merge(k, i, _SWAP2, 0xCC)
    _cmp_merge(k, i, _SWAP1, 0xAA)


@numba.njit(cache=False, nogil=True)
def _half_clean(k, i):  # pragma: no cover - compiled
    """A bitonic register into order."""
    _cmp_merge(k, i, _SWAP4, 0xF0)
    _cmp_merge(k, i, _SWAP2, 0xCC)
    _cmp_merge(k, i, _SWAP1, 0xAA)


@numba.njit(cache=False, nogil=True)
def _coex(keys, ids, a, b):  # pragma: no cover - compiled
    """Registers a and b lane by lane: the smaller key into a, the larger into b; on a tie nothing moves."""
    for lane in range(8):
        x, y = keys[a, lane], keys[b, lane]
        if y < x:
            keys[a, lane], keys[b, lane] = y, x
            ids[a, lane], ids[b, lane] = ids[b, lane], ids[a, lane]


@numba.njit(cache=False, nogil=True)
def _reverse(keys, ids, r):  # pragma: no cover - compiled
    keys[r, :] = keys[r, ::-1].copy()
    ids[r, :] = ids[r, ::-1].copy()


@numba.njit(cache=False, nogil=True)
def _merge_two(keys, ids, r):  # pragma: no cover - compiled
    """Registers r, r+1 (each sorted) into one sorted run of 16."""
    _reverse(keys, ids, r + 1)
    _coex(keys, ids, r, r + 1)
    _reverse(keys, ids, r + 1)
    _half_clean(keys[r], ids[r])
    _half_clean(keys[r + 1], ids[r + 1])


@numba.njit(cache=False, nogil=True)
def _merge_four(keys, ids, r):  # pragma: no cover - compiled
    """Registers r..r+3 (two sorted runs of 16) into one sorted run of 32."""
    _reverse(keys, ids, r + 2)
    _reverse(keys, ids, r + 3)
    _coex(keys, ids, r, r + 3)
    _coex(keys, ids, r + 1, r + 2)
    # the larger halves, reversed back: (max of 1&2, max of 0&3) in that order, as they now stand
    _reverse(keys, ids, r + 2)
    _reverse(keys, ids, r + 3)
    _coex(keys, ids, r, r + 1)
    _coex(keys, ids, r + 2, r + 3)
    for j in range(4):
        _half_clean(keys[r + j], ids[r + j])


@numba.njit(cache=False, nogil=True)
def _merge_eight(keys, ids):  # pragma: no cover - compiled
    """Registers 0..7 (two sorted runs of 32) into one sorted run of 64."""
    for j in range(4, 8):
        _reverse(keys, ids, j)
    for j in range(4):
        _coex(keys, ids, j, 7 - j)
    # the larger halves, reversed back: (max of 3&4, 2&5, 1&6, 0&7) in that order, as they now stand
    for j in range(4, 8):
        _reverse(keys, ids, j)
    for a, b in ((0, 2), (1, 3), (4, 6), (5, 7), (0, 1), (2, 3), (4, 5), (6, 7)):
        _coex(keys, ids, a, b)
    for j in range(8):
        _half_clean(keys[j], ids[j])


@numba.njit(cache=False, nogil=True)
def _network(arr, arg, start, n):  # pragma: no cover - compiled
    """arg[start:start+n] (n <= 64) sorted by networks: registers of 8 padded with +inf, each sorted,
    then merged pairwise."""
    regs = 1 if n <= 8 else 2 if n <= 16 else 4 if n <= 32 else 8
    keys = np.full((regs, 8), np.inf)
    ids = np.zeros((regs, 8), dtype=np.int64)
    for r in range(regs):
        for lane in range(8):
            p = 8 * r + lane
            if p < n:
                ids[r, lane] = arg[start + p]
                keys[r, lane] = arr[ids[r, lane]]
        _sort_register(keys[r], ids[r])
    if regs >= 2:
        for r in range(0, regs, 2):
            _merge_two(keys, ids, r)
    if regs >= 4:
        for r in range(0, regs, 4):
            _merge_four(keys, ids, r)
    if regs == 8:
        _merge_eight(keys, ids)
    for p in range(n):
        arg[start + p] = ids[p // 8, p % 8]


@numba.njit(cache=False, nogil=True)
def _pivot(arr, arg, left, right):  # pragma: no cover - compiled
    """The median of 8 evenly spaced elements (the 5th smallest), or the last element of a short range."""
    if right - left >= 8:
        size = (right - left) // 8
        v = np.empty(8)
        for j in range(8):
            v[j] = arr[arg[left + (j + 1) * size]]
        v.sort()
        return v[4]
    return arr[arg[right]]


@numba.njit(cache=False, nogil=True)
def _store(arr, arg, idx, pivot, l_store, r_end):  # pragma: no cover - compiled
    """One register's lanes: those below the pivot to arg[l_store...], the others to the end of
    arg[...r_end), each group in lane order; returns how many were not below."""
    ge = 0
    for lane in range(8):
        if arr[idx[lane]] >= pivot:
            ge += 1
    lo, hi = l_store, r_end - ge
    for lane in range(8):
        if arr[idx[lane]] >= pivot:
            arg[hi] = idx[lane]
            hi += 1
        else:
            arg[lo] = idx[lane]
            lo += 1
    return ge


@numba.njit(cache=False, nogil=True)
def _partition(arr, arg, left, right, pivot, unroll, mm):  # pragma: no cover - compiled
    """Partition arg[left:right) around pivot (below | not below); returns the first index of the upper
    part. mm receives the range's smallest and largest key. unroll: registers per step (1 for ranges of up
    to 8 * 4 * 8 elements, 4 above)."""
    width = unroll * 8
    for _ in range((right - left) % width):
        v = arr[arg[left]]
        mm[0] = min(mm[0], v)
        mm[1] = max(mm[1], v)
        if not v < pivot:
            right -= 1
            arg[left], arg[right] = arg[right], arg[left]
        else:
            left += 1
    if left == right:
        return left
    for p in range(left, right):
        v = arr[arg[p]]
        mm[0] = min(mm[0], v)
        mm[1] = max(mm[1], v)
    if unroll == 1 and right - left == 8:
        idx = arg[left : left + 8].copy()
        return left + 8 - _store(arr, arg, idx, pivot, left, left + 8)
    first = np.empty((unroll, 8), dtype=np.int64)
    last = np.empty((unroll, 8), dtype=np.int64)
    for j in range(unroll):
        first[j] = arg[left + 8 * j : left + 8 * j + 8]
        last[j] = arg[right - 8 * (unroll - j) : right - 8 * (unroll - j) + 8]
    r_store = right - 8
    l_store = left
    left += width
    right -= width
    cur = np.empty((unroll, 8), dtype=np.int64)
    while right - left != 0:
        if (r_store + 8) - right < left - l_store:
            right -= width
            for j in range(unroll):
                cur[j] = arg[right + 8 * j : right + 8 * j + 8]
        else:
            for j in range(unroll):
                cur[j] = arg[left + 8 * j : left + 8 * j + 8]
            left += width
        for j in range(unroll):
            ge = _store(arr, arg, cur[j], pivot, l_store, r_store + 8)
            l_store += 8 - ge
            r_store -= ge
    for j in range(unroll):
        ge = _store(arr, arg, first[j], pivot, l_store, r_store + 8)
        l_store += 8 - ge
        r_store -= ge
    for j in range(unroll):
        if unroll == 1:  # the single-register form stores its last register from l_store
            ge = _store(arr, arg, last[j], pivot, l_store, l_store + 8)
        else:
            ge = _store(arr, arg, last[j], pivot, l_store, r_store + 8)
            r_store -= ge
        l_store += 8 - ge
    return l_store


@numba.njit(cache=False, nogil=True)
def _sift(arr, arg, base, hole, length, value):  # pragma: no cover - compiled
    """libstdc++'s __adjust_heap then __push_heap on arg[base:base+length)."""
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if arr[arg[base + child]] < arr[arg[base + child - 1]]:
            child -= 1
        arg[base + hole] = arg[base + child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        arg[base + hole] = arg[base + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and arr[arg[base + parent]] < arr[value]:
        arg[base + hole] = arg[base + parent]
        hole = parent
        parent = (hole - 1) // 2
    arg[base + hole] = value


@numba.njit(cache=False, nogil=True)
def _heap_sort(arr, arg, first, last):  # pragma: no cover - compiled
    n = last - first
    if n >= 2:
        parent = (n - 2) // 2
        while True:
            _sift(arr, arg, first, parent, n, arg[first + parent])
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:
        last -= 1
        value = arg[last]
        arg[last] = arg[first]
        _sift(arr, arg, first, 0, last - first, value)


@numba.njit(cache=False, nogil=True)
def _linear_insert(arr, arg, last):  # pragma: no cover - compiled
    val = arg[last]
    nxt = last - 1
    while arr[val] < arr[arg[nxt]]:
        arg[last] = arg[nxt]
        last = nxt
        nxt -= 1
    arg[last] = val


@numba.njit(cache=False, nogil=True)
def _std_sort(arr, arg, first, last):  # pragma: no cover - compiled
    """libstdc++'s std::sort of arg[first:last) by arr[arg[.]]: introsort (median of three moved to the
    front, unguarded partition, heap sort past 2 log2 n levels, ranges of 16 or fewer left), then insertion
    sort."""
    n = last - first
    if n <= 1:
        return
    depth0 = 0
    m = n
    while m > 1:
        m >>= 1
        depth0 += 1
    stack = np.empty((2 * depth0 + 2, 3), dtype=np.int64)
    top = 0
    stack[0, 0], stack[0, 1], stack[0, 2] = first, last, 2 * depth0
    top = 1
    while top > 0:
        top -= 1
        f, lst, depth = stack[top, 0], stack[top, 1], stack[top, 2]
        while lst - f > 16:
            if depth == 0:
                _heap_sort(arr, arg, f, lst)
                break
            depth -= 1
            a, b, c = f + 1, f + (lst - f) // 2, lst - 1
            va, vb, vc = arr[arg[a]], arr[arg[b]], arr[arg[c]]
            if va < vb:
                pick = b if vb < vc else (c if va < vc else a)
            elif va < vc:
                pick = a
            elif vb < vc:
                pick = c
            else:
                pick = b
            arg[f], arg[pick] = arg[pick], arg[f]
            lo, hi = f + 1, lst
            pv = arr[arg[f]]
            while True:
                while arr[arg[lo]] < pv:
                    lo += 1
                hi -= 1
                while pv < arr[arg[hi]]:
                    hi -= 1
                if not lo < hi:
                    break
                arg[lo], arg[hi] = arg[hi], arg[lo]
                lo += 1
            stack[top, 0], stack[top, 1], stack[top, 2] = lo, lst, depth
            top += 1
            lst = lo
    if n > 16:
        _insertion_sort(arr, arg, first, first + 16)
        for j in range(first + 16, last):
            _linear_insert(arr, arg, j)
    else:
        _insertion_sort(arr, arg, first, last)


@numba.njit(cache=False, nogil=True)
def _insertion_sort(arr, arg, first, last):  # pragma: no cover - compiled
    for j in range(first + 1, last):
        if arr[arg[j]] < arr[arg[first]]:
            val = arg[j]
            for p in range(j, first, -1):
                arg[p] = arg[p - 1]
            arg[first] = val
        else:
            _linear_insert(arr, arg, j)


@numba.njit(cache=True, nogil=True)
def _argsort(arr, arg, max_iters):  # pragma: no cover - compiled
    """x86-simd-sort's argsort_64bit_ over the whole of arg, its recursion as a stack (the two halves of a
    partition are disjoint, so the order they are done in changes nothing)."""
    n = len(arg)
    stack = np.empty((4 * (max_iters + 2) + 4, 3), dtype=np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, n - 1, max_iters
    top = 1
    mm = np.empty(2)
    while top > 0:
        top -= 1
        left, right, iters = stack[top, 0], stack[top, 1], stack[top, 2]
        if iters <= 0:
            _std_sort(arr, arg, left, right + 1)
            continue
        if right + 1 - left <= _NETWORK:
            _network(arr, arg, left, right + 1 - left)
            continue
        pivot = _pivot(arr, arg, left, right)
        mm[0], mm[1] = np.inf, -np.inf
        unroll = 1 if right + 1 - left <= 8 * _UNROLL * 8 else _UNROLL
        p = _partition(arr, arg, left, right + 1, pivot, unroll, mm)
        if pivot != mm[1]:
            stack[top, 0], stack[top, 1], stack[top, 2] = p, right, iters - 1
            top += 1
        if pivot != mm[0]:
            stack[top, 0], stack[top, 1], stack[top, 2] = left, p - 1, iters - 1
            top += 1


_argsort = checked(_argsort)  # compiled once (about 10 s), then read from numba's disk cache, sealed


def squk_argsort(values: np.ndarray) -> np.ndarray:
    """The permutation numpy's default ``np.argsort`` gives float64 ``values`` (n,) on an AVX-512 machine
    (numpy >= 1.25), as the SQUK generator sorted its utilities: (n,) int64, values[order] ascending.

    >>> squk_argsort(np.array([0.5, 0.25, 0.5, 0.75])).tolist()
    [1, 0, 2, 3]
    """
    arr = np.ascontiguousarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"squk_argsort: values must be 1-D, not of shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError("squk_argsort: values hold NaN (the generator's utilities never do)")
    arg = np.arange(len(arr), dtype=np.int64)
    if len(arr) > 1:
        _argsort(arr, arg, 2 * int(math.log2(len(arr))))
    return arg


def generator_answers(utility: np.ndarray, k: int = GENERATOR_TOP) -> np.ndarray:
    """The answers the SQUK generator writes for a utility vector (N,) over the entities (finite values > 0
    are answers), best first, as the authors' evaluation reads them: the last k of
    :func:`squk_argsort` over the answers in id order, reversed. (k,) int64 entity ids (fewer where there
    are fewer answers).

    >>> generator_answers(np.array([0.0, 0.5, -np.inf, 0.5, 0.25]), k=2).tolist()
    [3, 1]
    """
    u = np.asarray(utility, dtype=np.float64)
    ids = np.flatnonzero(np.isfinite(u) & (u > 0))
    order = squk_argsort(u[ids])
    return ids[order[-k:][::-1]] if k > 0 else ids[:0]
