"""Backward random walks over the store (the BetaE/FIT way): ground a query type from an answer entity.

Start at the free variable ``?y`` bound to a drawn answer entity and walk the type's atoms backwards: an
atom whose tail is bound picks one of the facts pointing at the tail's entity (Cypher
``sample_in_edges``), which fixes its relation and binds its head (an anchor or an existential); an atom
whose two ends are already bound (a multi-edge such as 2m's r3) picks a relation among the facts between
them (``sample_between``). Negated atoms are walked the same way, so their anchor really has a fact to the
entity the negation constrains: the negation is informative. Only the split's graph is walked: a fact is
visible when its ``conf_<graph>`` property is set.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from pipeline.core.errors import PipelineError
from pipeline.softquery.model import Query, Var
from pipeline.softquery.types import QueryType

GRAPH_PROPERTY = {"train": "conf_train", "valid": "conf_valid", "test": "conf_test"}


def cypher(name: str, graph: str, relation_types: dict[str, str] | None = None) -> str:
    """The text of cypher/<name>.cypher with its placeholders filled: ``{CONF}`` by the graph's
    confidence property and ``{Rk}`` by relation types (``relation_types`` keyed ``R1``, ``R2``, ...). Both
    come from fixed vocabularies (never from user text), which is why they may be formatted into the query."""
    from pipeline.store.base import quote_rel_type
    from pipeline.store.cypher import cypher_text, fill

    if graph not in GRAPH_PROPERTY:
        raise PipelineError(f"unknown graph '{graph}'; expected one of {', '.join(GRAPH_PROPERTY)}")
    types = {key: quote_rel_type(rtype) for key, rtype in (relation_types or {}).items()}
    return fill(cypher_text(name), {"CONF": GRAPH_PROPERTY[graph], **types})


@dataclass
class WalkStats:
    """Counters of one sampling run: Cypher round trips and seconds spent in the store."""

    store_calls: int = 0
    store_seconds: float = 0.0
    dead_ends: int = 0
    degenerate: int = 0


@dataclass
class StoreWalker:
    """Backward steps over one data set's graph in the store; in-edge lists are cached per entity,
    since walks revisit hubs often (the cache lives as long as the walker: one sampling run)."""

    store: object
    dataset: str
    graph: str
    stats: WalkStats = field(default_factory=WalkStats)
    _in: dict[int, list[tuple[int, int]]] = field(default_factory=dict, repr=False)
    _between: dict[tuple[int, int], list[int]] = field(default_factory=dict, repr=False)
    _texts: dict[str, str] = field(default_factory=dict, repr=False)

    def _run(self, name: str, params: dict) -> list[dict]:
        if name not in self._texts:
            self._texts[name] = cypher(name, self.graph)
        t0 = time.perf_counter()
        rows = self.store.run(self._texts[name], {"dataset": self.dataset, **params})
        self.stats.store_seconds += time.perf_counter() - t0
        self.stats.store_calls += 1
        return rows

    def answer_pool(self) -> np.ndarray:
        """(n,) int64: entities with at least one incoming fact in the graph, ascending."""
        rows = self._run("sample_answers", {})
        return np.asarray([int(r["eid"]) for r in rows], dtype=np.int64)

    def in_edges(self, eid: int) -> list[tuple[int, int]]:
        """(head, relation) of every fact pointing at eid, ordered by (relation, head)."""
        if eid not in self._in:
            self._in[eid] = [
                (int(r["head"]), int(r["rid"])) for r in self._run("sample_in_edges", {"eid": int(eid)})
            ]
        return self._in[eid]

    def between(self, head: int, tail: int) -> list[int]:
        """Relations of the facts head -> tail, ascending."""
        key = (int(head), int(tail))
        if key not in self._between:
            self._between[key] = [
                int(r["rid"]) for r in self._run("sample_between", {"head": key[0], "tail": key[1]})
            ]
        return self._between[key]


@dataclass(frozen=True)
class Grounding:
    """relations: one id per atom of the type (text order); anchors: one entity id per anchor e1.."""

    relations: tuple[int, ...]
    anchors: tuple[int, ...]


def ground(qt: QueryType, walker: StoreWalker, answer: int, rng: np.random.Generator) -> Grounding | None:
    """Ground qt by a backward walk from answer; None when the walk hits an entity without incoming
    facts or gives a degenerate query (two identical atoms in a conjunction, or identical branches)."""
    template = qt.template
    relations: list[int | None] = [None] * qt.n_atoms
    anchors: dict[int, int] = {}  # placeholder index (Const eid in the template) -> entity id
    index = 0
    for conj in template.conjunctions:
        atoms = list(enumerate(conj.atoms, start=index))
        index += len(atoms)
        bound: dict[Var, int] = {Var("y"): int(answer)}  # existentials are local to a conjunction

        todo = list(atoms)
        while todo:
            step = next(((i, a) for i, a in todo if _entity(a.tail, bound, anchors) is not None), None)
            if step is None:  # the type has a part not reachable backwards from ?y
                raise PipelineError(
                    f"query type {qt.name}: atoms {[str(a) for _, a in todo]} cannot be walked from ?y"
                )
            todo.remove(step)
            i, atom = step
            tail = _entity(atom.tail, bound, anchors)
            head = _entity(atom.head, bound, anchors)
            if head is None:
                edges = walker.in_edges(tail)
                if not edges:
                    walker.stats.dead_ends += 1
                    return None
                h, r = edges[int(rng.integers(len(edges)))]
                if isinstance(atom.head, Var):
                    bound[atom.head] = h
                else:
                    anchors[atom.head.eid] = h
            else:
                # a multi-edge: another relation than the atoms already on the same two terms use,
                # since a repeated atom would be a smaller type in disguise
                used = {relations[j] for j, a in atoms if relations[j] is not None and a.terms == atom.terms}
                rels = [r for r in walker.between(head, tail) if r not in used]
                if not rels:
                    walker.stats.dead_ends += 1
                    return None
                r = rels[int(rng.integers(len(rels)))]
            relations[i] = r
    grounding = Grounding(tuple(int(r) for r in relations), tuple(anchors[k] for k in range(qt.n_anchors)))
    if degenerate(qt.build(grounding.relations, grounding.anchors)):
        walker.stats.degenerate += 1
        return None
    return grounding


def _entity(term, bound: dict[Var, int], anchors: dict[int, int]) -> int | None:
    """The entity a template term is bound to so far (None = not yet)."""
    return bound.get(term) if isinstance(term, Var) else anchors.get(term.eid)


def degenerate(query: Query) -> bool:
    """True when a conjunction repeats an atom (same head, relation, tail, whatever the sign) or two
    conjunctions are the same: such a query is a smaller type in disguise."""
    conj_keys = []
    for conj in query.conjunctions:
        keys = [(a.head, a.relation, a.tail) for a in conj.atoms]
        if len(set(keys)) < len(keys):
            return True
        conj_keys.append(frozenset(keys))
    return len(set(conj_keys)) < len(conj_keys)


__all__ = ["GRAPH_PROPERTY", "Grounding", "StoreWalker", "WalkStats", "cypher", "degenerate", "ground"]
