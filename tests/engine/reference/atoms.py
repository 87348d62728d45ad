"""Soft atoms as batched matrices "default + sparse exceptions" (design sections 1 and 2).

Confidences are float32 and the `c >= alpha` test is made in float32 (alpha rounded to float32), so the
engine, the oracle in the tests and any direct computation agree on facts at the threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pipeline.softquery.model import Atom
from tests.engine.reference.adjacency import Adjacency, merge_keys

NEG_INF = float("-inf")


@dataclass(frozen=True)
class AtomParams:
    """One atom position over a batch of B queries: rel (B,) int64, alpha/beta (B,) float32, neg (B,) bool."""

    rel: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor
    neg: torch.Tensor

    @classmethod
    def of(cls, atoms: Sequence[Atom], device: torch.device | str) -> AtomParams:
        return cls(
            torch.tensor([a.relation for a in atoms], dtype=torch.int64, device=device),
            torch.tensor([a.alpha for a in atoms], dtype=torch.float32, device=device),
            torch.tensor([a.beta for a in atoms], dtype=torch.float32, device=device),
            torch.tensor([a.negated for a in atoms], dtype=torch.bool, device=device),
        )

    def value(self, conf: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        """Atom values for confidences conf (T,) of batch elements b (T,) (None: conf is (B,) aligned)."""
        alpha, beta, neg = (
            (self.alpha, self.beta, self.neg) if b is None else (self.alpha[b], self.beta[b], self.neg[b])
        )
        cc = torch.where(neg, 1.0 - conf, conf)
        return torch.where(cc >= alpha, beta * cc, torch.full_like(cc, NEG_INF))

    def default(self) -> torch.Tensor:
        """(B,) the value of a fact that is not stored (c = 0): 0 / beta, or -inf when alpha forbids it."""
        return self.value(torch.zeros_like(self.alpha))


class RelationMatrix:
    """V_b(s, o) of one atom per batch element, oriented so that s is the child variable: from_head=True
    means s is the atom's head (rows by head)."""

    def __init__(self, adj: Adjacency, params: AtomParams, from_head: bool) -> None:
        self.adj, self.params, self.ori, self.from_head = adj, params, adj.oriented(from_head), from_head
        self.default = params.default()

    def rows(self, b: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Stored entries of rows (b[i], s[i]): (pair (T,), o (T,), value (T,)), grouped by pair, o sorted."""
        pair, o, conf = self.ori.rows(self.params.rel[b], s, self.adj.n_entities)
        return pair, o, self.params.value(conf, b[pair])

    def contains(self, b: torch.Tensor, s: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        return self.ori.lookup(self.params.rel[b], s, o, self.adj.n_entities)[0]

    def entry(self, b: torch.Tensor, s: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        """(T,) V_b(s, o) at points (b[i], s[i], o[i]): the stored value or the default; differentiable in
        the stored confidences."""
        found, conf = self.ori.lookup(self.params.rel[b], s, o, self.adj.n_entities)
        return torch.where(found, self.params.value(conf, b), self.default[b])

    def column(self, b: torch.Tensor, o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Support of columns (b[i], o[i]): (pair (T,), s (T,)) of every stored (s, o)."""
        pair, s, _ = self.adj.oriented(not self.from_head).rows(self.params.rel[b], o, self.adj.n_entities)
        return pair, s


class SumMatrix:
    """The sum of several atoms between the same two variables (a multi-edge): default = sum of defaults,
    exceptions = the union of their supports, each atom contributing its stored value or its default."""

    def __init__(self, parts: Sequence[RelationMatrix]) -> None:
        self.parts = list(parts)
        self.n = parts[0].adj.n_entities
        self.default = torch.stack([p.default for p in parts]).sum(0)

    def rows(self, b: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Entries of the union of the parts' supports: (pair (T,), o (T,), value (T,)), grouped by pair, o
        sorted; each value is the sum, in part order, of every part's stored value or its default."""
        got = [p.rows(b, s) for p in self.parts]
        # One sort of all the parts' keys finds the union and where each part's entries fall in it (a
        # merge; two searchsorted passes per part cost more than this one sort).
        union, inv = merge_keys([pair * self.n + o for pair, o, _ in got], b.numel() * self.n)
        pair = union // self.n
        bu = b[pair]
        total, lo = None, 0
        for p, (_, _, val) in zip(self.parts, got, strict=True):
            x = p.default[bu]
            x[inv[lo : lo + val.numel()]] = val
            lo += val.numel()
            total = x if total is None else total.add_(x)
        return pair, union - pair * self.n, total

    def column(self, b: torch.Tensor, o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Union of the parts' column supports (repeats allowed): (pair (T,), s (T,))."""
        got = [p.column(b, o) for p in self.parts]
        return torch.cat([g[0] for g in got]), torch.cat([g[1] for g in got])

    def entry(self, b: torch.Tensor, s: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        """(T,) the sum of the parts' values at points (b[i], s[i], o[i])."""
        return torch.stack([p.entry(b, s, o) for p in self.parts]).sum(0)

    def contains(self, b: torch.Tensor, s: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        out = self.parts[0].contains(b, s, o)
        for p in self.parts[1:]:
            out |= p.contains(b, s, o)
        return out


def fold_anchor(adj: Adjacency, params: AtomParams, anchor: torch.Tensor, var_is_tail: bool) -> torch.Tensor:
    """(B, N): the row V(e, .) (var is the tail) or the column V(., e) (var is the head) of each query."""
    m = RelationMatrix(adj, params, from_head=var_is_tail)
    bsz = anchor.numel()
    out = m.default[:, None].expand(bsz, adj.n_entities).clone()
    b = torch.arange(bsz, device=anchor.device)
    pair, o, val = m.rows(b, anchor)
    out[pair, o] = val
    return out


def fold_diagonal(adj: Adjacency, params: AtomParams) -> torch.Tensor:
    """(B, N): diag V for a self-loop atom r(?x, ?x)."""
    from tests.engine.reference.adjacency import expand

    bsz = params.rel.numel()
    out = params.default()[:, None].expand(bsz, adj.n_entities).clone()
    start = adj.diag_off[params.rel]
    pair, ent, conf = expand(start, adj.diag_off[params.rel + 1] - start, adj.diag_ent, adj.diag_conf)
    out[pair, ent] = params.value(conf, pair)
    return out


def constant_value(
    adj: Adjacency, params: AtomParams, head: torch.Tensor, tail: torch.Tensor
) -> torch.Tensor:
    """(B,): the value of an atom between two constants."""
    found, conf = adj.fwd.lookup(params.rel, head, tail, adj.n_entities)
    return torch.where(found, params.value(conf), params.default())
