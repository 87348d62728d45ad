"""Per-relation "default + sparse exceptions" access to one graph's facts (design section 2).

:class:`Adjacency` indexes a :class:`~pipeline.core.kg.GraphTensors` both ways (rows by head and rows by
tail, CSR-style with pointers per (relation, entity)) plus each relation's diagonal, so the engine reads
one row, one column, or one (h, r, t) lookup without ever forming a dense |E| x |E| matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pipeline.core.kg import GraphTensors

_MEMO_BYTES = 256 << 20  # derived arrays kept per Adjacency


@dataclass(frozen=True)
class Oriented:
    """All facts sorted by (rel, src, dst). src/dst: (nnz,) int64, conf: (nnz,) float32;
    ptr: (n_relations * n_entities + 1,) int64, facts of (r, s) are [ptr[r*N + s], ptr[r*N + s + 1]);
    key: (nnz,) int64 sorted, (r*N + s)*N + dst, for point lookups."""

    src: torch.Tensor
    dst: torch.Tensor
    conf: torch.Tensor
    ptr: torch.Tensor
    key: torch.Tensor

    @classmethod
    def build(
        cls,
        rel: torch.Tensor,
        src: torch.Tensor,
        dst: torch.Tensor,
        conf: torch.Tensor,
        n_entities: int,
        n_relations: int,
    ) -> Oriented:
        n = n_entities
        key = (rel * n + src) * n + dst
        key, order = torch.sort(key)
        src, dst, conf = src[order], dst[order], conf[order]
        row = key // n
        ptr = torch.searchsorted(row, torch.arange(n_relations * n + 1, device=rel.device))
        return cls(src, dst, conf, ptr, key)

    def rows(
        self, rel: torch.Tensor, s: torch.Tensor, n_entities: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Facts of the rows (rel[i], s[i]) for P pairs: (pair (T,), dst (T,), conf (T,)), grouped by pair
        in order and sorted by dst within a pair."""
        k = rel * n_entities + s
        start = self.ptr[k]
        count = self.ptr[k + 1] - start
        return expand(start, count, self.dst, self.conf)

    def lookup(
        self, rel: torch.Tensor, s: torch.Tensor, o: torch.Tensor, n_entities: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Point lookups: (found (P,) bool, conf (P,) float32, 0 where not found)."""
        q = (rel * n_entities + s) * n_entities + o
        if self.key.numel() == 0:
            return torch.zeros_like(q, dtype=torch.bool), torch.zeros(q.shape, device=q.device)
        pos = torch.searchsorted(self.key, q).clamp_(max=self.key.numel() - 1)
        found = self.key[pos] == q
        return found, torch.where(found, self.conf[pos], torch.zeros((), device=q.device))

    def nbytes(self) -> int:
        return sum(x.element_size() * x.numel() for x in (self.src, self.dst, self.conf, self.ptr, self.key))


def expand(start: torch.Tensor, count: torch.Tensor, *arrays: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Ragged gather: for P ranges [start, start+count), the pair index (T,) of every element and each
    array gathered at those positions. T = count.sum()."""
    total = int(count.sum())
    dev = start.device
    pair = torch.repeat_interleave(torch.arange(count.numel(), device=dev), count, output_size=total)
    first = torch.cumsum(count, 0) - count
    pos = start[pair] + torch.arange(total, device=dev) - first[pair]
    return (pair, *(a[pos] for a in arrays))


def merge_keys(keys: list[torch.Tensor], bound: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The sorted union (U,) int64 of key arrays with every key in [0, bound), and the position in it (T,)
    of each element of their concatenation (T = total length): one sort, no binary searches."""
    cat = torch.cat(keys)
    if bound <= 1 << 31:
        cat = cat.to(torch.int32)  # 32-bit keys sort about three times faster
    union, inv = torch.unique(cat, return_inverse=True)
    return union.to(torch.int64), inv


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
    # memo of derived arrays (relation slices filtered by alpha, unions of supports); never changes a
    # result. init=False: dataclasses.replace (e.g. new confidences) starts a fresh memo, never a stale one
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_graph(cls, graph: GraphTensors) -> Adjacency:
        n, r = graph.n_entities, graph.n_relations
        fwd = Oriented.build(graph.rel, graph.head, graph.tail, graph.conf, n, r)
        bwd = Oriented.build(graph.rel, graph.tail, graph.head, graph.conf, n, r)
        loop = graph.head == graph.tail
        drel, dent, dconf = graph.rel[loop], graph.head[loop], graph.conf[loop]  # sorted by rel already
        doff = torch.searchsorted(drel, torch.arange(r + 1, device=drel.device))
        return cls(n, r, fwd, bwd, dent, dconf, doff, graph.dataset)

    @property
    def device(self) -> torch.device:
        return self.fwd.conf.device

    def oriented(self, from_head: bool) -> Oriented:
        return self.fwd if from_head else self.bwd

    def finite_facts(
        self, parts: tuple[tuple[bool, int, bool, float], ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The stored entries of a sum of atoms (one atom or a multi-edge) whose value is finite.

        parts: per atom (from_head, relation, negated, alpha), from_head meaning s is the atom's head.
        Returns s, o (U,) int64 sorted by o, and cc (P, U) float32: per atom c (or 1 - c when negated) with
        c = 0 where that atom has no fact, so V(s, o) = sum_p beta_p * cc[p]. Entries where some atom's
        cc < alpha (compared in float32) are dropped: their value is -inf. Memoised (bounded by bytes):
        a batch reuses the few alpha levels of each relation."""
        got = self._memo.get(parts)
        if got is not None:
            return got
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

    def _union(self, parts: tuple[tuple[bool, int], ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The union of the relations' supports sorted by (o, s) (s on the head side when from_head):
        s, o (U,) int64 and each relation's confidence there (P, U), 0 where it has no fact. Memoised: it
        does not depend on alpha, beta or negation."""
        got = self._memo.get(("union", parts))
        if got is not None:
            return got
        n = self.n_entities
        spans = []
        for from_head, rel in parts:
            ori = self.oriented(not from_head)  # rows by o: (o, s) sorted
            lo, hi = int(ori.ptr[rel * n]), int(ori.ptr[(rel + 1) * n])
            spans.append((ori, lo, hi))
        if len(parts) == 1:  # slices of the index: nothing to build or remember
            ori, lo, hi = spans[0]
            return ori.dst[lo:hi], ori.src[lo:hi], ori.conf[lo:hi][None, :]
        union, inv = merge_keys([ori.src[lo:hi] * n + ori.dst[lo:hi] for ori, lo, hi in spans], n * n)
        conf = torch.zeros((len(parts), union.numel()), dtype=torch.float32, device=union.device)
        at = 0
        for p, (ori, lo, hi) in enumerate(spans):
            conf[p, inv[at : at + hi - lo]] = ori.conf[lo:hi]
            at += hi - lo
        o = union // n
        return self._remember(("union", parts), (union - o * n, o, conf))

    def _remember(self, key: tuple, value: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        if any(x.requires_grad for x in value):
            return value  # part of an autograd graph (calibration): valid for this computation only
        size = sum(x.element_size() * x.numel() for x in value)
        used = self._memo.get("bytes", 0) + size
        if used > _MEMO_BYTES:
            self._memo.clear()
            used = size
        self._memo["bytes"] = used
        self._memo[key] = value
        return value

    def nbytes(self) -> int:
        return (
            self.fwd.nbytes()
            + self.bwd.nbytes()
            + sum(x.element_size() * x.numel() for x in (self.diag_ent, self.diag_conf, self.diag_off))
        )


def as_adjacency(graph: GraphTensors | Adjacency) -> Adjacency:
    """Index a graph once; pass the Adjacency around to avoid re-indexing per call."""
    return graph if isinstance(graph, Adjacency) else Adjacency.from_graph(graph)
