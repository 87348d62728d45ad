"""Per-relation "default + sparse exceptions" access to one graph's facts (design section 2).

:class:`Adjacency` indexes a :class:`~pipeline.core.kg.GraphTensors` both ways (rows by head and rows by
tail, CSR-style with pointers per (relation, entity)) plus each relation's diagonal, so the engine reads
one row, one column, or one (h, r, t) lookup without ever forming a dense |E| x |E| matrix.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import torch

import pipeline.engine.kernels as kernels
from pipeline.core.kg import GraphTensors

NEG_INF = float("-inf")

_MEMO_BYTES = 512 << 20  # derived arrays kept per Adjacency (least recently used dropped first)


class PairStore(Protocol):
    """Where an Adjacency keeps relation-pair arrays beyond its memo (pipeline.formats.pair_cache: files
    shared by every process answering on the same export). ``kind``: "shared" or "front"."""

    def has(self, kind: str, parts: tuple[tuple[bool, int], ...]) -> bool: ...

    def load(self, kind: str, parts: tuple[tuple[bool, int], ...]) -> tuple[torch.Tensor, ...] | None: ...

    def store(
        self, kind: str, parts: tuple[tuple[bool, int], ...], arrays: tuple[torch.Tensor, ...]
    ) -> bool: ...


# positions (P,) int64 of an array of stored confidences -> their values (P,), differentiable (calibration L)
ConfGrad = Callable[[torch.Tensor], torch.Tensor]


def take_conf(conf: torch.Tensor, pos: torch.Tensor, grad: ConfGrad | None) -> torch.Tensor:
    """conf[pos]; where a gradient source is attached (calibration L's training index) and autograd is
    on, grad(pos): the values at pos computed with autograd, so only the facts the engine reads this way
    (anchor rows, point lookups, the max-plus winners) enter the graph. A source computes the values conf
    holds, bit for bit, wherever conf was filled; L's index fills conf only for the relations the engine
    streams and leaves the facts it only reads here uncomputed (``methods/src/affine.training_adjacency``)."""
    if grad is None or not torch.is_grad_enabled():
        return conf.index_select(0, pos)
    return grad(pos)


def index_dtype(n_entities: int) -> torch.dtype:
    """The dtype of entity ids in the index: int32 (half the bytes of int64 per fact and orientation, the
    difference between a CN15k export fitting in 4 GiB or not) whenever every id fits."""
    return torch.int32 if n_entities <= 1 << 31 else torch.int64


@dataclass(frozen=True)
class Oriented:
    """All facts sorted by (rel, src, dst). src/dst: (nnz,) entity ids (int32, see index_dtype), conf:
    (nnz,) float32; ptr: (n_relations * n_entities + 1,) int64 (offsets may pass 2^31), the facts of row
    (r, s) are [ptr[r*N + s], ptr[r*N + s + 1]), sorted by dst (point lookups search there)."""

    src: torch.Tensor
    dst: torch.Tensor
    conf: torch.Tensor
    ptr: torch.Tensor
    # where set and autograd is on, grad(pos) gives the values at pos differentiably (take_conf)
    grad: ConfGrad | None = field(default=None, compare=False, repr=False)

    @property
    def differentiable(self) -> bool:
        """Whether reads of conf can carry a gradient (conf tied to autograd, or a gradient source)."""
        return self.conf.requires_grad or self.grad is not None

    @classmethod
    def from_sorted(
        cls,
        src: torch.Tensor,
        dst: torch.Tensor,
        conf: torch.Tensor,
        rel_offsets: torch.Tensor,
        n_entities: int,
    ) -> Oriented:
        """From facts already sorted by (rel, src, dst), relation r at [rel_offsets[r], rel_offsets[r+1]).
        The arrays are kept as given (no copy): a graph's (head, tail, conf) are its rows by head."""
        n = n_entities
        n_rel = rel_offsets.numel() - 1
        ptr = torch.empty(n_rel * n + 1, dtype=torch.int64, device=src.device)
        ents = torch.arange(n, dtype=src.dtype, device=src.device)
        bounds = rel_offsets.tolist()
        for r in range(n_rel):  # per relation: no temporary of the size of the whole graph
            lo, hi = bounds[r], bounds[r + 1]
            ptr[r * n : (r + 1) * n] = torch.searchsorted(src[lo:hi], ents).add_(lo)
        ptr[n_rel * n] = bounds[-1]
        return cls(src, dst, conf, ptr)

    def reversed(self, rel_offsets: torch.Tensor, n_entities: int) -> Oriented:
        """The same facts with src and dst swapped (the other orientation), sorted by (rel, self.dst,
        self.src): per relation, a stable sort by dst of facts ordered by (src, dst) orders them by (dst, src)."""
        src = torch.empty_like(self.src)
        dst = torch.empty_like(self.dst)
        conf = []  # slices concatenated: differentiable when the confidences are (calibration L)
        bounds = rel_offsets.tolist()
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            if hi == lo:
                continue
            order = torch.sort(self.dst[lo:hi], stable=True).indices
            torch.index_select(self.dst[lo:hi], 0, order, out=src[lo:hi])
            torch.index_select(self.src[lo:hi], 0, order, out=dst[lo:hi])
            conf.append(self.conf[lo:hi].index_select(0, order))
        conf = torch.cat(conf) if conf else self.conf[:0]
        return Oriented.from_sorted(src, dst, conf, rel_offsets, n_entities)

    def rows(
        self, rel: torch.Tensor, s: torch.Tensor, n_entities: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Facts of the rows (rel[i], s[i]) for P pairs: (pair (T,), dst (T,), conf (T,)), grouped by pair
        in order and sorted by dst within a pair."""
        k = rel * n_entities + s
        start = self.ptr[k]
        count = self.ptr[k + 1] - start
        pair, pos = expand_positions(start, count)
        return pair, self.dst.index_select(0, pos), take_conf(self.conf, pos, self.grad)

    def lookup(
        self, rel: torch.Tensor, s: torch.Tensor, o: torch.Tensor, n_entities: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Point lookups: (found (P,) bool, conf (P,) float32, 0 where not found). A binary search inside
        each row (rows are sorted by dst): no global key array, whose 8 bytes per fact and orientation
        were a third of the index."""
        k = rel * n_entities + s
        lo, end = self.ptr[k], self.ptr[k + 1]
        nnz = self.dst.numel()
        if nnz == 0 or k.numel() == 0:
            return torch.zeros(k.shape, dtype=torch.bool, device=k.device), torch.zeros(
                k.shape, device=k.device
            )
        hi = end.clone()
        # lower bound of o in [lo, hi): the first position whose dst >= o; log2(longest row) steps
        for _ in range(int((hi - lo).max()).bit_length()):
            mid = (lo + hi) >> 1
            less = self.dst.index_select(0, mid.clamp(max=nnz - 1)) < o
            live = lo < hi
            lo = torch.where(live & less, mid + 1, lo)
            hi = torch.where(live & ~less, mid, hi)
        pos = lo.clamp(max=nnz - 1)
        found = (lo < end) & (self.dst.index_select(0, pos) == o)
        return found, torch.where(
            found, take_conf(self.conf, pos, self.grad), torch.zeros((), device=k.device)
        )

    def nbytes(self) -> int:
        return sum(x.element_size() * x.numel() for x in (self.src, self.dst, self.conf, self.ptr))


def fact_relations(ptr: torch.Tensor, n_entities: int) -> torch.Tensor:
    """(nnz,) int64: the relation of every fact of an orientation with row pointers ptr (relation r's
    facts start at ptr[r * N]); nothing per fact is stored for it."""
    starts = ptr[::n_entities]
    return torch.repeat_interleave(torch.arange(starts.numel() - 1, device=ptr.device), starts.diff())


def expand(start: torch.Tensor, count: torch.Tensor, *arrays: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Ragged gather: for P ranges [start, start+count), the pair index (T,) of every element and each
    array gathered at those positions. T = count.sum()."""
    pair, pos = expand_positions(start, count)
    # index_select: the same gather as a[pos], several times faster than advanced indexing on the CPU
    return (pair, *(a.index_select(0, pos) for a in arrays))


def expand_positions(start: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The pair index (T,) and the position (T,) of every element of P ranges [start, start+count)."""
    total = int(count.sum())
    dev = start.device
    pair = torch.repeat_interleave(torch.arange(count.numel(), device=dev), count, output_size=total)
    first = torch.cumsum(count, 0) - count
    pos = (start - first).index_select(0, pair).add_(torch.arange(total, device=dev))
    return pair, pos


def merge_keys(keys: list[torch.Tensor], bound: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The sorted union (U,) int64 of key arrays with every key in [0, bound), and the position in it (T,)
    of each element of their concatenation (T = total length). Any keys are accepted; the engine's are
    sorted runs (a relation's slice of the index, a row's facts), which the CPU path merges in linear time."""
    cat = torch.cat(keys)
    if bound <= 1 << 31:
        cat = cat.to(torch.int32)  # 32-bit keys sort and move faster
    if cat.device.type != "cpu" or cat.numel() < 2:
        union, inv = torch.unique(cat, return_inverse=True)
        return union.to(torch.int64), inv
    # numpy's stable sort is a timsort: on a few concatenated sorted runs it is a linear merge, ~100x
    # faster than torch.unique's full sort on a CN15k export's relation pair (measured: 18 ms vs 1.9 s).
    a = cat.numpy()
    order, union, rank = _stable_union(a)
    inv = np.empty(a.size, dtype=np.int64)
    inv[order] = rank
    return torch.from_numpy(union), torch.from_numpy(inv)


def _stable_union(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, union, rank) of a 1-D key array: the stable sort permutation, the sorted distinct keys
    (int64) and, for each sorted slot, its key's position in the union."""
    order = np.argsort(a, kind="stable")
    ordered = a[order]
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    rank = np.cumsum(first, dtype=np.int64)
    rank -= 1
    return order, ordered[first].astype(np.int64), rank


def merge_sorted_runs(runs: list[torch.Tensor], bound: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The sorted union (U,) int64 of sorted, duplicate-free key arrays in [0, bound), and for each run
    the position in the union of each of its keys. Equals merge_keys (split per run); on the CPU the
    positions come from one linear merge with no scatter."""
    if runs[0].device.type != "cpu" or sum(r.numel() for r in runs) < 2:
        union, inv = merge_keys(runs, bound)
        return union, list(torch.split(inv, [r.numel() for r in runs]))
    dtype = np.int32 if bound <= 1 << 31 else np.int64
    cat = np.concatenate([r.numpy().astype(dtype, copy=False) for r in runs])
    order, union, rank = _stable_union(cat)  # timsort: a linear merge of the sorted runs
    # the stable merge keeps each run's keys in their (ascending) order: a run's positions in the union
    # are the ranks at its sorted slots, read in order
    ends = np.cumsum([r.numel() for r in runs])
    if len(runs) == 2:  # the multi-edge case: one comparison tells the runs apart
        in_first = order < ends[0]
        where = [torch.from_numpy(rank[in_first]), torch.from_numpy(rank[~in_first])]
    else:
        run_of = np.searchsorted(ends, order, side="right")
        where = [torch.from_numpy(rank[run_of == i]) for i in range(len(runs))]
    return torch.from_numpy(union), where


def shared_keys(runs: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The keys present in at least two of several sorted, duplicate-free key arrays: shared (K,) ascending
    (the runs' dtype), and for each run the position (K,) int64 of each shared key in that run (-1 where
    the run lacks it)."""
    if runs[0].device.type != "cpu" or sum(r.numel() for r in runs) < 2:
        return _shared_keys_torch(runs)
    if len(runs) == 2 and kernels.ready() and runs[0].numel() + runs[1].numel() >= kernels.MIN_WORK:
        shared, pa, pb = kernels.shared_two(runs[0], runs[1])  # the same arrays, one compiled pass
        return shared, [pa, pb]
    # numpy's stable sort is a timsort: on a few concatenated sorted runs, a linear merge; equal keys of
    # different runs land next to each other, in run order
    cat = np.concatenate([r.numpy() for r in runs])
    order = np.argsort(cat, kind="stable")
    ordered = cat[order]
    same = ordered[1:] == ordered[:-1]  # slot i+1 repeats slot i's key
    if len(runs) == 2:  # a key is at most twice, at slots (i, i+1): first run, then second
        first = np.flatnonzero(same)
        where = [order[first], order[first + 1] - runs[0].numel()]
        return torch.from_numpy(ordered[first]), [
            torch.from_numpy(w.astype(np.int64, copy=False)) for w in where
        ]
    new = np.empty(ordered.size, dtype=bool)
    new[0] = True
    np.logical_not(same, out=new[1:])
    gid = np.cumsum(new) - 1
    keep = np.bincount(gid) >= 2
    slots = np.flatnonzero(keep[gid])
    col = (np.cumsum(keep) - 1)[gid[slots]]
    ends = np.cumsum([r.numel() for r in runs])
    part = np.searchsorted(ends, order[slots], side="right")
    shared = ordered[new & keep[gid]]
    where = []
    for p in range(len(runs)):
        w = np.full(shared.size, -1, dtype=np.int64)
        mine = part == p
        w[col[mine]] = order[slots[mine]] - (ends[p] - runs[p].numel())
        where.append(torch.from_numpy(w))
    return torch.from_numpy(shared), where


def _shared_keys_torch(runs: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """shared_keys by torch.unique and binary searches (any device; a full sort, no merge of the runs)."""
    uniq, count = torch.unique(torch.cat(runs), return_counts=True)
    shared = uniq[count >= 2]
    where = []
    for r in runs:
        if not r.numel():
            where.append(torch.full(shared.shape, -1, dtype=torch.int64, device=shared.device))
            continue
        pos = torch.searchsorted(r, shared).clamp_(max=r.numel() - 1)
        where.append(torch.where(r.index_select(0, pos) == shared, pos, -1))
    return shared, where


def _front_cover(group: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(K,) int64, ascending: positions of points (x, y) that cover each group's Pareto front. With X the
    group's largest x and Y_X the largest y among its points at X, the corner point (X, Y_X) is >= in both
    coordinates every point with y <= Y_X (likewise the corner (X_Y, Y) with the roles swapped): a point
    is kept unless one of the two corners beats it, and the corners are kept. So every point of the group
    is <= some kept point in both coordinates, every kept point is one of the points, and the front is
    among them (equal points all kept). Sorting out the exact front (no kept point beaten by another)
    would list 1.1-1.8x fewer points on the exports' relation pairs at 1.4-2.5x the cost (measured in
    docs/studies/multi-edges-on-cn15k.md; the floor path evaluates these few points per query, so
    the cut alone is kept. x, y >= 0 float32, group ids >= 0."""
    if not group.numel():
        return group
    if group.device.type == "cpu":
        g = group.numpy()
        if bool((g[1:] >= g[:-1]).all()):  # groups contiguous (a relation pair's entries by column)
            return torch.from_numpy(_front_cover_runs(g, x.numpy(), y.numpy()))
    return _front_cover_torch(group, x, y)


def _front_cover_runs(g: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """_front_cover for group ids in ascending order (each group one contiguous run), in numpy: the
    per-group maxima are reductions over runs (np.maximum.reduceat), not scatters."""
    new = np.empty(g.size, dtype=bool)
    new[0] = True
    np.not_equal(g[1:], g[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, g.size))
    keep = np.ones(g.size, dtype=bool)
    for u, v in ((x, y), (y, x)):
        at = u == np.repeat(np.maximum.reduceat(u, starts), counts)
        v_at = np.repeat(np.maximum.reduceat(np.where(at, v, np.float32(NEG_INF)), starts), counts)
        keep &= (v > v_at) | (at & (v == v_at))
    return np.flatnonzero(keep).astype(np.int64, copy=False)


def _front_cover_torch(group: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """_front_cover in torch, for any device and any order of the groups (scatters by group id)."""
    n = int(group.max()) + 1
    keep = torch.ones(group.numel(), dtype=torch.bool, device=group.device)
    for u, v in ((x, y), (y, x)):
        top_u = torch.full((n,), NEG_INF, device=u.device).scatter_reduce_(0, group, u, "amax")
        at = u == top_u.index_select(0, group)
        v_at = torch.full((n,), NEG_INF, device=u.device).scatter_reduce_(0, group[at], v[at], "amax")
        keep &= (v > v_at.index_select(0, group)) | (at & (v == v_at.index_select(0, group)))
    return torch.nonzero(keep, as_tuple=True)[0]


class BytesLRU:
    """A memo bounded by bytes: the least recently used entries leave first when a new one needs room, so
    an answering run builds each relation pair's union of supports (16 B per entry: 5-10M entries on a
    CN15k export) once and reuses it across batches and alpha levels while the memory stays bounded.
    A working set larger than the budget, revisited in the same order (every pass of D's delta search),
    is an LRU's worst case: nothing is reused then (measured in docs/studies/multi-edges-on-cn15k.md)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self._items: OrderedDict[tuple, tuple[tuple[torch.Tensor, ...], int]] = OrderedDict()

    def get(self, key: tuple) -> tuple[torch.Tensor, ...] | None:
        got = self._items.get(key)
        if got is None:
            return None
        self._items.move_to_end(key)
        return got[0]

    def put(self, key: tuple, value: tuple[torch.Tensor, ...], size: int) -> None:
        if size > self.budget:
            return  # larger than the whole budget: evicting everything would not make it fit
        old = self._items.pop(key, None)
        if old is not None:
            self.used -= old[1]
        while self.used + size > self.budget:
            self.used -= self._items.popitem(last=False)[1][1]
        self._items[key] = (value, size)
        self.used += size

    def clear(self) -> None:
        self._items.clear()
        self.used = 0

    def __contains__(self, key: tuple) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class Adjacency:
    """A graph indexed for the engine: `fwd` rows by head (dst = tail), `bwd` rows by tail (dst = head),
    `diag_*` the facts (e, r, e) per relation (diag_off: (n_relations + 1,))."""

    n_entities: int
    n_relations: int
    fwd: Oriented
    bwd: Oriented
    diag_ent: torch.Tensor
    diag_conf: torch.Tensor
    diag_off: torch.Tensor
    dataset: str = ""
    # gradient source of diag_conf (as Oriented.grad: calibration L's training index)
    diag_grad: ConfGrad | None = field(default=None, compare=False, repr=False)
    # memo of derived arrays (relation slices filtered by alpha, unions of supports); never changes a
    # result. init=False: dataclasses.replace (e.g. new confidences) starts a fresh memo, never a stale one
    _memo: BytesLRU = field(
        default_factory=lambda: BytesLRU(_MEMO_BYTES), init=False, repr=False, compare=False
    )
    # relation-pair work on disk, shared by every process that answers on the same export (pipeline.formats.pair_cache);
    # init=False: new confidences (dataclasses.replace) never read the pair files of the old ones
    _pairs: PairStore | None = field(default=None, init=False, repr=False, compare=False)

    def use_pair_cache(self, cache: PairStore | None) -> Adjacency:
        """Read and write relation-pair arrays (shared entries, column fronts) through ``cache``, whose
        identity must key these very confidences; returns self."""
        object.__setattr__(self, "_pairs", cache)
        return self

    @property
    def pair_cache(self) -> PairStore | None:
        return self._pairs

    def _pair(self, kind: str, parts: tuple[tuple[bool, int], ...], build: Callable[[], tuple]) -> tuple:
        """A relation pair's arrays: from the memo, else the pair cache's file, else built (and written).

        On a GPU too: the file's arrays are copied to the device (what ``pipeline export`` prepared, or an
        earlier process wrote, is not built again; building PPI5k's im pairs on an H200 held its first
        answer to ~260 queries/s), and a pair built on the device is written from a host copy. The
        arrays are exact selections of the export's facts (no arithmetic), the same on every device."""
        key = (kind, parts)
        got = self._memo.get(key)
        if got is not None:
            return got
        cache = self._pairs
        if cache is None:
            return self._remember(key, build())
        got = cache.load(kind, parts)
        if got is not None:  # .to: the mapped arrays themselves on the CPU, a copy on a GPU
            return self._remember(key, tuple(x.to(self.device) for x in got))
        with cache.building(kind, parts):  # one process builds it; the others wait and read its file
            got = cache.load(kind, parts)
            if got is not None:
                return self._remember(key, tuple(x.to(self.device) for x in got))
            value = build()
            stored = not any(x.requires_grad for x in value) and cache.store(kind, parts, tuple(x.cpu() for x in value))
            if stored and self.device.type == "cpu":
                # the memo keeps the file's mapped pages (the page cache, one copy for every worker)
                # rather than this process' own copy of the arrays
                value = cache.load(kind, parts) or value
        return self._remember(key, value)

    @classmethod
    def from_graph(cls, graph: GraphTensors) -> Adjacency:
        """Index a graph: the rows by head share the graph's arrays where their dtypes already match (an
        export's int32 ids), the rows by tail are built relation by relation (no graph-sized temporary)."""
        n, r = graph.n_entities, graph.n_relations
        graph = _sorted(graph)
        idt = index_dtype(n)
        fwd = Oriented.from_sorted(graph.head.to(idt), graph.tail.to(idt), graph.conf, graph.rel_offsets, n)
        bwd = fwd.reversed(graph.rel_offsets, n)
        loop = torch.nonzero(graph.head == graph.tail, as_tuple=True)[0]
        dent, dconf = fwd.src.index_select(0, loop), graph.conf.index_select(0, loop)
        doff = torch.searchsorted(graph.rel.index_select(0, loop), torch.arange(r + 1, device=loop.device))
        return cls(n, r, fwd, bwd, dent, dconf, doff, graph.dataset)

    @property
    def device(self) -> torch.device:
        return self.fwd.conf.device

    def oriented(self, from_head: bool) -> Oriented:
        return self.fwd if from_head else self.bwd

    def diagonal(self, rel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The self-loop facts (e, rel[i], e) of P relations: (pair (T,), e (T,), conf (T,))."""
        start = self.diag_off[rel]
        pair, pos = expand_positions(start, self.diag_off[rel + 1] - start)
        return pair, self.diag_ent.index_select(0, pos), take_conf(self.diag_conf, pos, self.diag_grad)

    def finite_facts(
        self, parts: tuple[tuple[bool, int, bool, float], ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The stored entries of a sum of atoms (one atom or a multi-edge) whose value is finite.

        parts: per atom (from_head, relation, negated, alpha), from_head meaning s is the atom's head.
        Returns s, o (U,) entity ids (index_dtype) sorted by o, and cc (P, U) float32: per atom c (or 1 - c when negated) with
        c = 0 where that atom has no fact, so V(s, o) = sum_p beta_p * cc[p]. Entries where some atom's
        cc < alpha (compared in float32) are dropped: their value is -inf. Memoised (bounded by bytes):
        a batch reuses the few alpha levels of each relation."""
        got = self._memo.get(parts)
        if got is not None:
            return got
        if len(parts) > 1 and any(not p[2] and p[3] > 0 for p in parts):
            return self._remember(parts, self._required_facts(parts))
        src, dst, conf = self._union(tuple((p[0], p[1]) for p in parts))
        if not any(p[2] for p in parts) and not any(p[3] > 0 for p in parts):
            return src, dst, conf  # c >= 0 always: nothing to drop, nothing to remember
        cc = torch.stack([1.0 - c if p[2] else c for p, c in zip(parts, conf, strict=True)])
        keep = None
        for p, c in zip(parts, cc, strict=True):
            if p[2] or p[3] > 0:  # alpha as a float32 tensor: the comparison is made in float32
                ok = c >= torch.tensor(p[3], dtype=torch.float32, device=c.device)
                keep = ok if keep is None else keep.logical_and_(ok)
        # one nonzero and index_select per array: several boolean-mask selects cost ~3x more
        idx = torch.nonzero(keep, as_tuple=True)[0]
        if idx.numel() < keep.numel():
            src, dst, cc = src.index_select(0, idx), dst.index_select(0, idx), cc.index_select(1, idx)
        return self._remember(parts, (src, dst, cc))

    def _required_facts(
        self, parts: tuple[tuple[bool, int, bool, float], ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """finite_facts of a multi-edge with a positive atom at alpha > 0: that atom is finite only on its
        own facts with c >= alpha, so the finite entries are the intersection of those filtered supports
        (the other atoms' confidences found by binary search), never the union of whole relations (5-10M
        entries per CN15k pair, ~1 s each). The same arrays as filtering the union, in the same order."""
        n = self.n_entities
        slices = [self._column_keys(from_head, rel) for from_head, rel, _, _ in parts]
        required = [i for i, p in enumerate(parts) if not p[2] and p[3] > 0]
        first = required[0]
        key, conf = slices[first]
        alpha = torch.tensor(parts[first][3], dtype=torch.float32, device=conf.device)
        keys = key.index_select(0, torch.nonzero(conf >= alpha, as_tuple=True)[0])
        cc: list[torch.Tensor | None] = [None] * len(parts)
        for i, (_, _, neg, a) in enumerate(parts):
            if i == first:
                continue
            key, conf = slices[i]
            if key.numel():
                pos = torch.searchsorted(key, keys).clamp_(max=key.numel() - 1)
                found = key.index_select(0, pos) == keys
                c = torch.where(found, conf.index_select(0, pos), torch.zeros((), device=conf.device))
            else:
                found = torch.zeros(keys.shape, dtype=torch.bool, device=keys.device)
                c = torch.zeros(keys.shape, dtype=conf.dtype, device=conf.device)
            c = 1.0 - c if neg else c
            if neg or a > 0:  # as in finite_facts: compared in float32
                ok = c >= torch.tensor(a, dtype=torch.float32, device=c.device)
                idx = torch.nonzero(ok, as_tuple=True)[0]
                if idx.numel() < keys.numel():
                    keys, c = keys.index_select(0, idx), c.index_select(0, idx)
                    cc = [None if x is None else x.index_select(0, idx) for x in cc]
            cc[i] = c
        key, conf = slices[first]
        pos = torch.searchsorted(key, keys)
        cc[first] = conf.index_select(0, pos)
        idt = self.fwd.src.dtype
        o = keys // n
        return (keys - o * n).to(idt), o.to(idt), torch.stack(cc)

    def _column_keys(self, from_head: bool, rel: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A relation's facts as keys o * N + s, ascending (rows by o, sorted by s; s on the head side when
        from_head), int32 where N * N fits, and their confidences: slices of the index, no sort."""
        n = self.n_entities
        kt = torch.int32 if n * n <= 1 << 31 else torch.int64
        ori = self.oriented(not from_head)
        lo, hi = int(ori.ptr[rel * n]), int(ori.ptr[(rel + 1) * n])
        return torch.mul(ori.src[lo:hi].to(kt), n).add_(ori.dst[lo:hi]), ori.conf[lo:hi]

    def shared_facts(
        self, parts: tuple[tuple[bool, int], ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The entries of a multi-edge stored in at least two of its relations: like _union's arrays
        (s, o (I,) sorted by (o, s), each relation's confidence there (P, I), 0 where it has no fact) but
        only where two supports meet, usually far fewer entries than their union. Memoised: it depends on
        neither alpha, beta nor negation. The split max-plus step (maxplus._split_multi_edges) needs this
        and the relations' own slices only, never the union."""
        return self._pair("shared", parts, lambda: self._shared(parts))

    def _shared(self, parts: tuple[tuple[bool, int], ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """shared_facts' arrays, built (not memoised)."""
        n = self.n_entities
        keys, confs = zip(*(self._column_keys(from_head, rel) for from_head, rel in parts), strict=True)
        shared, where = shared_keys(list(keys))
        zero = torch.zeros((), dtype=torch.float32, device=shared.device)
        rows = []  # torch.where, not a scatter: differentiable where conf is (calibration L's autograd index)
        for conf, pos in zip(confs, where, strict=True):
            if len(parts) == 2:  # a key shared by two runs is in both: every position is valid
                rows.append(conf.index_select(0, pos))
                continue
            got = conf.index_select(0, pos.clamp(min=0)) if conf.numel() else zero.expand(pos.shape)
            rows.append(torch.where(pos >= 0, got, zero))
        cc = torch.stack(rows)
        idt = self.fwd.src.dtype
        o = shared // n
        return (shared - o * n).to(idt), o.to(idt), cc

    def column_front(self, parts: tuple[tuple[bool, int], ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """For a sum of one or two relations (parts: (from_head, relation) each, s on the head side when
        from_head), points (c_1, ..., c_P) per column o that cover the column's stored entries (s, o), with
        c_p = 0 where relation p has no fact: every entry is <= some listed point in every coordinate and
        every listed point is <= some entry. So a function that never decreases in any coordinate has the
        same column maximum over the listed points as over the entries (maxplus._floor_rows), and they are
        few: each relation's largest confidence per column, plus the entries stored in both that cover
        their column's Pareto front (_front_cover). Returns o (F,) int64 and the confidences (P, F)
        float32. Memoised: it depends on neither alpha, beta nor negation."""
        if len(parts) > 2:
            raise ValueError(f"column_front covers one or two relations, not {len(parts)}")
        if len(parts) == 1:  # one relation's column maxima: one cheap pass, nothing worth a file
            key = ("front", parts)
            got = self._memo.get(key)
            return got if got is not None else self._remember(key, self._front(parts))
        return self._pair("front", parts, lambda: self._front(parts))

    def _front(self, parts: tuple[tuple[bool, int], ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """column_front's arrays, built (not memoised)."""
        cols, confs = [], []
        for p, (from_head, rel) in enumerate(parts):
            o, best = self._column_max(from_head, rel)
            c = torch.zeros((len(parts), o.numel()), dtype=torch.float32, device=o.device)
            c[p] = best
            cols.append(o)
            confs.append(c)
        if len(parts) == 2:  # built, not memoised: only the (small) front is kept
            known = ("shared", parts) in self._memo or (
                self._pairs is not None and self._pairs.has("shared", parts)
            )
            _, o, cc = self.shared_facts(parts) if known else self._shared(parts)
            o, cc = o.long(), cc.detach()
            keep = _front_cover(o, cc[0], cc[1])
            cols.append(o.index_select(0, keep))
            confs.append(cc.index_select(1, keep))
        return torch.cat(cols), torch.cat(confs, 1)

    def has_front(self, parts: tuple[tuple[bool, int], ...]) -> bool:
        """Whether column_front(parts) is memoised or in the pair cache (cheap to read now)."""
        if ("front", parts) in self._memo:
            return True
        return self._pairs is not None and self._pairs.has("front", parts)

    def _column_max(self, from_head: bool, rel: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A relation's columns o (K,) int64 with a fact (s on the head side when from_head) and each
        column's largest confidence (K,) float32."""
        n = self.n_entities
        ori = self.oriented(not from_head)
        lo, hi = int(ori.ptr[rel * n]), int(ori.ptr[(rel + 1) * n])
        if ori.conf.device.type == "cpu":  # rows are contiguous runs of the slice: a reduction per run
            start = ori.ptr[rel * n : (rel + 1) * n]
            cols = torch.nonzero(ori.ptr[rel * n + 1 : (rel + 1) * n + 1] > start, as_tuple=True)[0]
            if not cols.numel():
                return cols, torch.zeros(0, dtype=torch.float32)
            conf = ori.conf[lo:hi].detach().numpy()
            best = np.maximum.reduceat(conf, (start.index_select(0, cols) - lo).numpy())
            return cols, torch.from_numpy(best)
        best = torch.full((n,), NEG_INF, dtype=torch.float32, device=ori.conf.device)
        best.scatter_reduce_(
            0, ori.src[lo:hi].long(), ori.conf[lo:hi].detach(), reduce="amax", include_self=True
        )
        cols = torch.nonzero(torch.isfinite(best), as_tuple=True)[0]
        return cols, best.index_select(0, cols)

    def _union(self, parts: tuple[tuple[bool, int], ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The union of the relations' supports sorted by (o, s) (s on the head side when from_head):
        s, o (U,) entity ids (index_dtype) and each relation's confidence there (P, U), 0 where it has no fact. Memoised: it
        does not depend on alpha, beta or negation."""
        got = self._memo.get(("union", parts))
        if got is not None:
            return got
        n = self.n_entities
        if len(parts) == 1:  # slices of the index: nothing to build or remember
            ori = self.oriented(not parts[0][0])
            lo, hi = int(ori.ptr[parts[0][1] * n]), int(ori.ptr[(parts[0][1] + 1) * n])
            return ori.dst[lo:hi], ori.src[lo:hi], ori.conf[lo:hi][None, :]
        keys, confs = zip(*(self._column_keys(from_head, rel) for from_head, rel in parts), strict=True)
        union, where = merge_sorted_runs(list(keys), n * n)
        del keys
        conf = torch.zeros((len(parts), union.numel()), dtype=torch.float32, device=union.device)
        for p, c in enumerate(confs):
            conf[p, where[p]] = c  # torch indexing: differentiable in conf (calibration L)
        idt = self.fwd.src.dtype
        o = union // n
        s = (union - o * n).to(idt)
        return self._remember(("union", parts), (s, o.to(idt), conf))

    def _remember(self, key: tuple, value: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        if any(x.requires_grad for x in value):
            return value  # part of an autograd graph (calibration): valid for this computation only
        self._memo.put(key, value, sum(x.element_size() * x.numel() for x in value))
        return value

    def nbytes(self) -> int:
        return (
            self.fwd.nbytes()
            + self.bwd.nbytes()
            + sum(x.element_size() * x.numel() for x in (self.diag_ent, self.diag_conf, self.diag_off))
        )


def _sorted(graph: GraphTensors) -> GraphTensors:
    """graph itself when its facts are sorted by (rel, head, tail) with rel_offsets matching (GraphTensors'
    contract, checked one relation at a time), else a sorted copy."""
    n = graph.n_entities
    bounds = graph.rel_offsets.tolist()
    ok = len(bounds) == graph.n_relations + 1 and bounds[0] == 0 and bounds[-1] == graph.nnz
    for r in range(graph.n_relations):
        if not ok:
            break
        lo, hi = bounds[r], bounds[r + 1]
        key = graph.head[lo:hi].to(torch.int64) * n + graph.tail[lo:hi]
        ok = hi >= lo and bool((graph.rel[lo:hi] == r).all()) and bool((key[1:] > key[:-1]).all())
    if ok:
        return graph
    key = (graph.rel.to(torch.int64) * n + graph.head) * n + graph.tail
    order = torch.sort(key).indices
    rel = graph.rel.index_select(0, order)
    offsets = torch.searchsorted(rel, torch.arange(graph.n_relations + 1, dtype=rel.dtype, device=rel.device))
    return replace(
        graph,
        head=graph.head.index_select(0, order),
        rel=rel,
        tail=graph.tail.index_select(0, order),
        conf=graph.conf.index_select(0, order),
        rel_offsets=offsets.to(torch.int64),
    )


def as_adjacency(graph: GraphTensors | Adjacency) -> Adjacency:
    """Index a graph once; pass the Adjacency around to avoid re-indexing per call."""
    return graph if isinstance(graph, Adjacency) else Adjacency.from_graph(graph)
