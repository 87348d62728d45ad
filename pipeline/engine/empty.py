"""Why a query has no answer: one line a person can act on, computed from the query and the facts alone.

The search only says "no entity has a finite utility > 0". This module looks at each conjunction the way
a person would check it by hand, cheapest reason first:
1. an anchor with no fact of the atom's relation at its position (`co_occurs(Nobody, ?y)`);
2. a positive atom whose alpha no fact meets (from its anchor, or anywhere when it has none), with the best
   confidence there is, so the user knows how far to lower alpha;
3. a variable that no entity can fill: the positive atoms around it each have facts meeting their alpha,
   but their entities at that variable do not intersect (one-step propagation, not the whole search);
4. otherwise: the atoms join, but no entity's utility is above 0 (answers need u > 0), or the join fails
   further away than one step.
Negated atoms forbid single entities and never empty a query on their own, except between two constants.
Pure: numpy over the engine's index of the graph (:class:`~pipeline.engine.adjacency.Adjacency`: an anchor's
row by head or by tail, a relation's rows, its diagonal), the very index the query was answered with, so a
reason reads no file and costs the rows it looks at (an export's index is kept per export by
:func:`pipeline.formats.engine_index.load_engine_index`); a GraphTensors is indexed first. The `c >= alpha`
test in float32 as the engine makes it (pipeline.engine.atoms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pipeline.core.kg import GraphTensors
from pipeline.engine.adjacency import Adjacency, Oriented, as_adjacency
from pipeline.softquery.model import Atom, Conjunction, Const, Query, Var
from pipeline.softquery.printer import atom_text, format_number, relation_text, term_text
from pipeline.softquery.vocab import Vocabulary


@dataclass(frozen=True)
class EmptyReason:
    """Why one conjunction has no answer. kind: "anchor" (the anchor has no fact of the relation at its
    position; `other_side` = how many it has at the other position), "alpha" (no fact meets the atom's
    alpha; `best` = the highest confidence there is, None without any fact), "join" (no entity fills
    `variable`; `atoms` = the atoms that meet there) or "utility" (no reason found one step at a time)."""

    kind: str
    atom: Atom | None = None
    best: float | None = None
    other_side: int = 0
    variable: Var | None = None
    atoms: tuple[Atom, ...] = ()


def _meets(c: np.ndarray, alpha: float) -> np.ndarray:
    return c >= np.float32(alpha)


def _row(side: Oriented, relation: int, entity: int, n_entities: int) -> slice:
    """The facts of ``relation`` whose ``side.src`` is ``entity``: a slice of ``side``'s arrays."""
    at = relation * n_entities + entity
    return slice(int(side.ptr[at]), int(side.ptr[at + 1]))


def _numpy(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


def _positions(adj: Adjacency, a: Atom) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Heads, tails and confidences (float32) of relation a.relation's facts, restricted to a's constants:
    an anchor's row (by head, or by tail), a self-loop's diagonal, else the relation's rows by head."""
    r, n = a.relation, adj.n_entities
    if isinstance(a.head, Var) and a.head == a.tail:  # a self-loop reads the diagonal only
        lo, hi = int(adj.diag_off[r]), int(adj.diag_off[r + 1])
        ent = _numpy(adj.diag_ent[lo:hi])
        return ent, ent, _numpy(adj.diag_conf[lo:hi]).astype(np.float32)
    if isinstance(a.head, Const):
        rows = _row(adj.fwd, r, a.head.eid, n)
        t, c = _numpy(adj.fwd.dst[rows]), _numpy(adj.fwd.conf[rows]).astype(np.float32)
        h = np.full(len(t), a.head.eid, dtype=t.dtype)
        if isinstance(a.tail, Const):
            keep = t == a.tail.eid
            h, t, c = h[keep], t[keep], c[keep]
        return h, t, c
    if isinstance(a.tail, Const):
        rows = _row(adj.bwd, r, a.tail.eid, n)
        h, c = _numpy(adj.bwd.dst[rows]), _numpy(adj.bwd.conf[rows]).astype(np.float32)
        return h, np.full(len(h), a.tail.eid, dtype=h.dtype), c
    rows = slice(int(adj.fwd.ptr[r * n]), int(adj.fwd.ptr[(r + 1) * n]))
    return _numpy(adj.fwd.src[rows]), _numpy(adj.fwd.dst[rows]), _numpy(adj.fwd.conf[rows]).astype(np.float32)


def _other_side(adj: Adjacency, a: Atom, anchor: Const) -> int:
    """Facts of a's relation that hold `anchor` at the other position (a hint: the atom may be reversed)."""
    side = adj.bwd if isinstance(a.head, Const) else adj.fwd
    rows = _row(side, a.relation, anchor.eid, adj.n_entities)
    return rows.stop - rows.start


def conjunction_reason(conj: Conjunction, graph: GraphTensors | Adjacency) -> EmptyReason:
    """The first reason conj has no answer on `graph`, in the order of the module docstring."""
    graph = as_adjacency(graph)
    candidates: dict[Var, tuple[np.ndarray, list[Atom]]] = {}
    for a in conj.atoms:
        h, t, c = _positions(graph, a)
        anchors = [x for x in a.terms if isinstance(x, Const)]
        if a.negated:
            if len(anchors) == 2 and len(c) and not (1.0 - c[0] >= np.float32(a.alpha)):
                return EmptyReason("alpha", a, best=float(c[0]))
            continue
        if len(anchors) == 1 and len(c) == 0:
            return EmptyReason("anchor", a, other_side=_other_side(graph, a, anchors[0]))
        if a.alpha <= 0:
            continue  # never fails
        ok = _meets(c, a.alpha)
        if not ok.any():
            return EmptyReason("alpha", a, best=float(c.max()) if len(c) else None)
        for term, ends in ((a.head, h), (a.tail, t)):
            if isinstance(term, Var):
                ents = np.unique(ends[ok])
                if term in candidates:
                    prev, by = candidates[term]
                    candidates[term] = (np.intersect1d(prev, ents), [*by, a])
                else:
                    candidates[term] = (ents, [a])
                if len(candidates[term][0]) == 0:
                    return EmptyReason("join", variable=term, atoms=tuple(candidates[term][1]))
    return EmptyReason("utility")


def empty_reasons(query: Query, graph: GraphTensors | Adjacency) -> list[EmptyReason]:
    """One reason per conjunction (a disjunction is empty only when every branch is); a GraphTensors is
    indexed once for them all."""
    adj = as_adjacency(graph)
    return [conjunction_reason(c, adj) for c in query.conjunctions]


def _why(r: EmptyReason, vocab: Vocabulary | None, where: str) -> str:
    if r.kind == "anchor":
        assert r.atom is not None
        anchor = next(x for x in r.atom.terms if isinstance(x, Const))
        pos = "head" if isinstance(r.atom.head, Const) else "tail"
        text = (f"anchor {term_text(anchor, vocab)} has no {relation_text(r.atom.relation, vocab)} fact as {pos} "
                f"{where} (in {atom_text(r.atom, vocab)})")
        if r.other_side:
            other = "tail" if pos == "head" else "head"
            text += f"; it has {r.other_side} as {other}: try the atom the other way round"
        return text
    if r.kind == "alpha":
        assert r.atom is not None
        if r.best is None:
            loop = " from an entity to itself" if r.atom.head == r.atom.tail else ""
            return f"{atom_text(r.atom, vocab)}: no {relation_text(r.atom.relation, vocab)} fact{loop} {where}"
        if r.atom.negated:
            return (f"{atom_text(r.atom, vocab)}: the fact's confidence {format_number(round(r.best, 6))} "
                    f"is above 1 - alpha {where}; lower its alpha")
        return (f"{atom_text(r.atom, vocab)}: no fact meets alpha {format_number(r.atom.alpha)} {where} "
                f"(best confidence {format_number(round(r.best, 6))}); try alpha <= {format_number(_floor(r.best))}")
    if r.kind == "join":
        assert r.variable is not None
        names = ", ".join(atom_text(a, vocab) for a in r.atoms)
        return (f"no entity for {term_text(r.variable, vocab)} meets all of {names} {where}; "
                "lower one of their alphas")
    return (f"no entity reaches a utility above 0 {where} (each atom and each variable has facts meeting "
            "the alphas, but they do not combine into a positive utility); lower alphas or raise betas")


def _floor(x: float) -> float:
    """The largest 4-decimal alpha that a fact of confidence x still meets (in float32, as the engine)."""
    a = round(x, 4)
    while np.float32(x) < np.float32(a):
        a = round(a - 1e-4, 4)
    return a


def empty_reason_text(query: Query, graph: GraphTensors | Adjacency, vocab: Vocabulary | None = None, where: str = "") -> str:
    """One line: why `query` has no answer on `graph` (`where` names it, e.g. "on graph test"). A
    disjunction gives one reason per branch, `;`-joined."""
    reasons = empty_reasons(query, graph)
    parts = [_why(r, vocab, where).replace("  ", " ").strip() for r in reasons]
    if len(parts) == 1:
        return f"no answer: {parts[0]}"
    return "no answer: " + "; ".join(f"branch {i + 1}: {p}" for i, p in enumerate(parts))


__all__ = ["EmptyReason", "conjunction_reason", "empty_reason_text", "empty_reasons"]
