"""What a query type needs of a graph, checked on the split's facts before any walk.

A backward walk (:mod:`.walks`) can ground a type only where the graph holds its shape: 2i's answer needs
two different incoming facts, 2p's ``?x`` an incoming fact and a fact into the answer, 2m's ``(?x, ?y)``
two relations joining the same entity pair. :func:`missing_shape` derives these needs from the type's
template (so a new type needs no entry here) and checks them with a few pandas/numpy passes over the
split's distinct facts: milliseconds, where 10,000 walks that can never succeed cost seconds and end in
"0 of 5 queries".

The check is a necessary condition, not a sufficient one: a type it passes may still find too few
*useful* queries within the walk budget (the sampler says so then).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd

from pipeline.softquery.model import Const, Var
from pipeline.softquery.types import QueryType


def _in_count(need: int) -> str:
    return "an incoming fact" if need == 1 else f"{need} different incoming facts"


def missing_shapes(types: Sequence[QueryType], facts: pd.DataFrame, n_entities: int) -> dict[str, str]:
    """{type name: what the graph lacks} for the types it cannot hold (:func:`missing_shape`), the
    graph's counts computed once."""
    shape = _Shape(facts, n_entities)
    return {qt.name: why for qt in types if (why := missing_shape(qt, facts, n_entities, shape)) is not None}


class _Shape:
    """The counts the checks read: distinct incoming facts per entity, relations per (head, tail) pair."""

    def __init__(self, facts: pd.DataFrame, n_entities: int) -> None:
        self.facts = facts
        self.h = facts["h"].to_numpy(np.int64)
        self.t = facts["t"].to_numpy(np.int64)
        self.indeg = np.bincount(self.t, minlength=n_entities)  # the facts are distinct (h, r, t)
        self._pairs: pd.Series | None = None

    @property
    def pairs(self) -> pd.Series:
        if self._pairs is None:
            self._pairs = self.facts.groupby(["h", "t"])["r"].nunique()
        return self._pairs


def missing_shape(qt: QueryType, facts: pd.DataFrame, n_entities: int, shape: _Shape | None = None) -> str | None:
    """None when the graph may hold a grounding of ``qt``; else what it lacks, in words (``"an entity pair
    joined by 2 different relations"``). facts: the split's distinct facts, columns h, r, t."""
    shape = shape or _Shape(facts, n_entities)
    h, t, indeg = shape.h, shape.t, shape.indeg
    conjunctions = qt.template.conjunctions
    # single-atom branches into ?y (2u, up's first branch) are distinct only with distinct facts
    single = sum(1 for c in conjunctions if len(c.atoms) == 1 and isinstance(c.atoms[0].head, Const))
    answers = np.ones(n_entities, dtype=bool)
    for conj in conjunctions:
        anchors: Counter[Var] = Counter()
        from_vars: dict[Var, Counter[Var]] = {}
        for atom in conj.atoms:
            tail = atom.tail
            if not isinstance(tail, Var):  # no type of ours binds a constant tail; nothing to require
                continue
            if isinstance(atom.head, Const):
                anchors[tail] += 1
            else:
                from_vars.setdefault(tail, Counter())[atom.head] += 1
        if len(conj.atoms) == 1 and single > 1:
            anchors[Var("y")] = single
        can: dict[Var, np.ndarray] = {}
        need_of: dict[Var, int] = {}
        todo = sorted(set(anchors) | set(from_vars))
        while todo:
            # leaves first: a variable once every variable pointing into it is settled
            v = next((v for v in todo if all(u in can for u in from_vars.get(v, {}))), None)
            if v is None:  # a cycle of variables: not a shape the walks ground; leave it to them
                return None
            todo.remove(v)
            need = max(anchors[v], 1)
            ok = indeg >= need
            if not ok.any():
                return f"an entity with {_in_count(need)}"
            for u, m in from_vars.get(v, Counter()).items():
                if m == 1:
                    heads, tails = h, t
                else:
                    hit = shape.pairs[shape.pairs >= m]
                    if hit.empty:
                        return f"an entity pair joined by {m} different relations"
                    heads = hit.index.get_level_values(0).to_numpy(np.int64)
                    tails = hit.index.get_level_values(1).to_numpy(np.int64)
                reach = np.zeros(n_entities, dtype=bool)
                reach[tails[can[u][heads]]] = True
                ok &= reach
                if not ok.any():
                    what = "a fact" if m == 1 else f"an entity pair joined by {m} different relations"
                    return f"{what} from an entity with {_in_count(need_of[u])} into an entity with {_in_count(need)}"
            can[v], need_of[v] = ok, need
        if Var("y") in can:
            answers &= can[Var("y")]
    if not answers.any():
        return "an entity that answers every branch"
    return None


__all__ = ["missing_shape", "missing_shapes"]
