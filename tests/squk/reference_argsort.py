"""A second, independent implementation of the SQUK generator's sort (x86-simd-sort's AVX-512 argsort of
float64, then libstdc++'s std::sort where it gives up), written plainly over Python lists, register by
register, for the tests to hold pipeline.squk.generator_order against. Slow (0.3 s for 15,000 values)."""

from __future__ import annotations

import math

INF = math.inf
SWAP1 = (1, 0, 3, 2, 5, 4, 7, 6)
REV_HALVES = (3, 2, 1, 0, 7, 6, 5, 4)
REV = (7, 6, 5, 4, 3, 2, 1, 0)
SWAP2 = (2, 3, 0, 1, 6, 7, 4, 5)
SWAP4 = (4, 5, 6, 7, 0, 1, 2, 3)


def cmp_merge(k, i, p, mask):
    nk, ni = [], []
    for lane in range(8):
        a, b = k[lane], k[p[lane]]
        t = max(a, b) if (mask >> lane) & 1 else min(a, b)
        nk.append(t)
        ni.append(i[lane] if t == a else i[p[lane]])
    return nk, ni


def sort_register(k, i):
    for p, m in ((SWAP1, 0xAA), (REV_HALVES, 0xCC), (SWAP1, 0xAA), (REV, 0xF0), (SWAP2, 0xCC), (SWAP1, 0xAA)):
        k, i = cmp_merge(k, i, p, m)
    return k, i


def half_clean(k, i):
    for p, m in ((SWAP4, 0xF0), (SWAP2, 0xCC), (SWAP1, 0xAA)):
        k, i = cmp_merge(k, i, p, m)
    return k, i


def coex(k1, k2, i1, i2):
    """(min keys, max keys, their indices); where equal, nothing moves."""
    keep = [k1[lane] <= k2[lane] for lane in range(8)]
    lo = [k1[lane] if keep[lane] else k2[lane] for lane in range(8)]
    hi = [k2[lane] if keep[lane] else k1[lane] for lane in range(8)]
    j1 = [i1[lane] if keep[lane] else i2[lane] for lane in range(8)]
    j2 = [i2[lane] if keep[lane] else i1[lane] for lane in range(8)]
    return lo, hi, j1, j2


def merge_two(k1, k2, i1, i2):
    k3, k4, i3, i4 = coex(k1, k2[::-1], i1, i2[::-1])
    a, b = half_clean(k3, i3)
    c, d = half_clean(k4[::-1], i4[::-1])
    return a, c, b, d


def merge_four(keys, ids):
    t1, m1, it1, im1 = coex(keys[0], keys[3][::-1], ids[0], ids[3][::-1])
    t2, m2, it2, im2 = coex(keys[1], keys[2][::-1], ids[1], ids[2][::-1])
    k0, k1, i0, i1 = coex(t1, t2, it1, it2)
    k2, k3, i2, i3 = coex(m2[::-1], m1[::-1], im2[::-1], im1[::-1])
    out = [half_clean(k, i) for k, i in ((k0, i0), (k1, i1), (k2, i2), (k3, i3))]
    return [o[0] for o in out], [o[1] for o in out]


def merge_eight(keys, ids):
    T, IT, M, IM = [], [], [], []
    for j in range(4):
        t, m, it, im = coex(keys[j], keys[7 - j][::-1], ids[j], ids[7 - j][::-1])
        T.append(t)
        IT.append(it)
        M.append(m)
        IM.append(im)
    T += [M[3][::-1], M[2][::-1], M[1][::-1], M[0][::-1]]
    IT += [IM[3][::-1], IM[2][::-1], IM[1][::-1], IM[0][::-1]]
    for a, b in ((0, 2), (1, 3), (4, 6), (5, 7), (0, 1), (2, 3), (4, 5), (6, 7)):
        T[a], T[b], IT[a], IT[b] = coex(T[a], T[b], IT[a], IT[b])
    out = [half_clean(T[j], IT[j]) for j in range(8)]
    return [o[0] for o in out], [o[1] for o in out]


def network(arr, arg, start, n):
    regs = 1 if n <= 8 else 2 if n <= 16 else 4 if n <= 32 else 8
    keys, ids = [], []
    for r in range(regs):
        idx = [arg[start + 8 * r + lane] if 8 * r + lane < n else 0 for lane in range(8)]
        key = [arr[idx[lane]] if 8 * r + lane < n else INF for lane in range(8)]
        k, i = sort_register(key, idx)
        keys.append(k)
        ids.append(i)
    for r in range(0, regs if regs >= 2 else 0, 2):
        keys[r], keys[r + 1], ids[r], ids[r + 1] = merge_two(keys[r], keys[r + 1], ids[r], ids[r + 1])
    for r in range(0, regs if regs >= 4 else 0, 4):
        keys[r : r + 4], ids[r : r + 4] = merge_four(keys[r : r + 4], ids[r : r + 4])
    if regs == 8:
        keys, ids = merge_eight(keys, ids)
    arg[start : start + n] = [x for reg in ids for x in reg][:n]


def store(arr, arg, lanes, pivot, left, right_end):
    lt = [j for j in lanes if arr[j] < pivot]
    ge = [j for j in lanes if not arr[j] < pivot]
    arg[left : left + len(lt)] = lt
    arg[right_end - len(ge) : right_end] = ge
    return len(ge)


def partition(arr, arg, left, right, pivot, unroll):
    width = 8 * unroll
    lo_hi = [arr[arg[p]] for p in range(left, right)]
    smallest, biggest = min(lo_hi), max(lo_hi)
    for _ in range((right - left) % width):
        if not arr[arg[left]] < pivot:
            right -= 1
            arg[left], arg[right] = arg[right], arg[left]
        else:
            left += 1
    if left == right:
        return left, smallest, biggest
    if unroll == 1 and right - left == 8:
        lanes = arg[left : left + 8]
        return left + 8 - store(arr, arg, lanes, pivot, left, left + 8), smallest, biggest
    first = [arg[left + 8 * j : left + 8 * j + 8] for j in range(unroll)]
    last = [arg[right - 8 * (unroll - j) : right - 8 * (unroll - j) + 8] for j in range(unroll)]
    r_store, l_store = right - 8, left
    left, right = left + width, right - width
    while right != left:
        if (r_store + 8) - right < left - l_store:
            right -= width
            cur = [arg[right + 8 * j : right + 8 * j + 8] for j in range(unroll)]
        else:
            cur = [arg[left + 8 * j : left + 8 * j + 8] for j in range(unroll)]
            left += width
        for lanes in cur:
            ge = store(arr, arg, lanes, pivot, l_store, r_store + 8)
            l_store, r_store = l_store + 8 - ge, r_store - ge
    for lanes in first + last:
        ge = store(arr, arg, lanes, pivot, l_store, r_store + 8)
        l_store, r_store = l_store + 8 - ge, r_store - ge
    return l_store, smallest, biggest


def std_sort(arr, a, first, last):
    """libstdc++'s std::sort, recursively, as its source reads."""

    def less(x, y):
        return arr[x] < arr[y]

    def adjust(base, hole, length, value):
        top, child = hole, hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if less(a[base + child], a[base + child - 1]):
                child -= 1
            a[base + hole] = a[base + child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[base + hole] = a[base + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[base + parent], value):
            a[base + hole] = a[base + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[base + hole] = value

    def heap_sort(f, end):
        n = end - f
        for parent in range((n - 2) // 2, -1, -1):
            adjust(f, parent, n, a[f + parent])
        while end - f > 1:
            end -= 1
            value, a[end] = a[end], a[f]
            adjust(f, 0, end - f, value)

    def loop(f, end, depth):
        while end - f > 16:
            if depth == 0:
                heap_sort(f, end)
                return
            depth -= 1
            x, y, z = f + 1, f + (end - f) // 2, end - 1
            if less(a[x], a[y]):
                m = y if less(a[y], a[z]) else z if less(a[x], a[z]) else x
            else:
                m = x if less(a[x], a[z]) else z if less(a[y], a[z]) else y
            a[f], a[m] = a[m], a[f]
            lo, hi = f + 1, end
            while True:
                while less(a[lo], a[f]):
                    lo += 1
                hi -= 1
                while less(a[f], a[hi]):
                    hi -= 1
                if lo >= hi:
                    break
                a[lo], a[hi] = a[hi], a[lo]
                lo += 1
            loop(lo, end, depth)
            end = lo

    def insert(j):
        val = a[j]
        while less(val, a[j - 1]):
            a[j] = a[j - 1]
            j -= 1
        a[j] = val

    n = last - first
    if n <= 1:
        return
    loop(first, last, 2 * (n.bit_length() - 1))
    for j in range(first + 1, last):
        if j < first + 16 and less(a[j], a[first]):
            a[first + 1 : j + 1], a[first] = a[first:j], a[j]
        elif j < first + 16:
            insert(j)
        else:
            insert(j)


def argsort(values):
    arr = [float(v) for v in values]
    arg = list(range(len(arr)))

    def rec(left, right, iters):
        if iters <= 0:
            std_sort(arr, arg, left, right + 1)
            return
        if right + 1 - left <= 64:
            network(arr, arg, left, right + 1 - left)
            return
        if right - left >= 8:
            size = (right - left) // 8
            pivot = sorted(arr[arg[left + j * size]] for j in range(1, 9))[4]
        else:
            pivot = arr[arg[right]]
        p, smallest, biggest = partition(arr, arg, left, right + 1, pivot, 1 if right + 1 - left <= 256 else 4)
        if pivot != smallest:
            rec(left, p - 1, iters - 1)
        if pivot != biggest:
            rec(p, right, iters - 1)

    if len(arr) > 1:
        rec(0, len(arr) - 1, 2 * int(math.log2(len(arr))))
    return arg
