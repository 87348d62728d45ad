"""Query graphs as the computation trees of query-embedding models (LogicE, ConE).

A query-embedding model cannot search: it builds one embedding of the answer variable ``?y`` by walking
the query graph from the anchors towards ``?y``. A *plan* is that walk as a nested tuple:

    ("ent", i)            the anchor (head constant) of atom i
    ("all",)              an existential with no incoming atom (the ``?x`` of ``2il``): the whole universe
    ("proj", i, child)    project child through atom i (its relation, alpha and beta)
    ("not", node)         negation (a negated atom is projected, then negated)
    ("and", (n1, n2,..))  intersection of the atoms meeting at one variable
    ("or", (c1, c2,..))   the conjunctions of the DNF

Atom indices count over ``query.atoms`` (all conjunctions, in order), so two queries of the same shape
have the same plan and are batched together; their numbers (anchors, relations, alpha, beta) go in
:class:`PlanParams`. A variable used by two atoms towards ``?y`` (the multi-edge of ``2m``/``im``) is
embedded once per atom: the embedding cannot say that both atoms bind the same entity, the way every
original model treats a DAG. Shapes with no embedding form (an atom pointing away from ``?y``, a constant
tail, a self-loop, a cycle) raise :class:`UnsupportedQuery`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from pipeline.core.errors import PipelineError
from pipeline.softquery.model import FREE, Atom, Conjunction, Const, Query, Var

Plan = tuple[Any, ...]


class UnsupportedQuery(PipelineError):
    """A query shape that a query-embedding model has no operator for."""


@dataclass(frozen=True)
class PlanParams:
    """The numbers of a batch of same-plan queries; every tensor is (B, n_atoms).

    anchor: int64 head entity id of each atom (-1 where the head is a variable); relation: int64;
    alpha, beta: float32."""

    anchor: torch.Tensor
    relation: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor

    @property
    def batch_size(self) -> int:
        return int(self.relation.shape[0])

    def to(self, device: torch.device | str) -> PlanParams:
        return PlanParams(*(t.to(device) for t in (self.anchor, self.relation, self.alpha, self.beta)))


def _conjunction_plan(conj: Conjunction, offset: int) -> Plan:
    used: set[int] = set()

    def var_node(v: Var, path: frozenset[Var]) -> Plan:
        if v in path:
            raise UnsupportedQuery(f"the query graph has a cycle through ?{v.name}")
        incoming = []
        for i, a in enumerate(conj.atoms):
            if a.tail != v:
                continue
            if a.head == v:
                raise UnsupportedQuery(
                    f"self-loop on ?{v.name} (a query-embedding model has no such operator)"
                )
            child = ("ent", offset + i) if isinstance(a.head, Const) else var_node(a.head, path | {v})
            node: Plan = ("proj", offset + i, child)
            incoming.append(("not", node) if a.negated else node)
            used.add(i)
        if not incoming:
            if v == FREE:
                raise UnsupportedQuery("no atom ends at ?y")
            return ("all",)
        return incoming[0] if len(incoming) == 1 else ("and", tuple(incoming))

    root = var_node(FREE, frozenset())
    left = [a for i, a in enumerate(conj.atoms) if i not in used]
    if left:
        raise UnsupportedQuery(
            f"atom(s) {_atom_text(left[0])} point away from ?y or end at a constant "
            "(query-embedding models project towards the answer only)"
        )
    return root


def _atom_text(a: Atom) -> str:
    def term(t: Any) -> str:
        return f"?{t.name}" if isinstance(t, Var) else f"#{t.eid}"

    return f"{'!' if a.negated else ''}#{a.relation}({term(a.head)}, {term(a.tail)})"


def query_plan(query: Query) -> tuple[Plan, list[float | int]]:
    """The plan of a query and its flat numbers ``[anchor, relation, alpha, beta]`` per atom."""
    conj_plans, offset = [], 0
    for conj in query.conjunctions:
        conj_plans.append(_conjunction_plan(conj, offset))
        offset += len(conj.atoms)
    plan = conj_plans[0] if len(conj_plans) == 1 else ("or", tuple(conj_plans))
    numbers: list[float | int] = []
    for a in query.atoms:
        numbers += [a.head.eid if isinstance(a.head, Const) else -1, a.relation, a.alpha, a.beta]
    return plan, numbers


def stack_params(rows: list[list[float | int]]) -> PlanParams:
    """Stack the numbers of same-plan queries (from :func:`query_plan`) into a PlanParams."""
    t = torch.tensor(rows, dtype=torch.float64).reshape(len(rows), -1, 4)
    return PlanParams(
        anchor=t[..., 0].long(),
        relation=t[..., 1].long(),
        alpha=t[..., 2].float(),
        beta=t[..., 3].float(),
    )


def group_by_plan(
    queries: list[Query], ids: list[str] | None = None
) -> dict[Plan, tuple[list[int], PlanParams]]:
    """Queries grouped by plan: {plan: (positions in the list, their PlanParams)}, plans in first-seen order.

    ids (optional, same length) name the query in an UnsupportedQuery message."""
    groups: dict[Plan, tuple[list[int], list[list[float | int]]]] = {}
    for k, q in enumerate(queries):
        try:
            plan, numbers = query_plan(q)
        except UnsupportedQuery as exc:
            name = ids[k] if ids else f"query {k}"
            raise UnsupportedQuery(f"{name}: {exc}") from None
        pos, rows = groups.setdefault(plan, ([], []))
        pos.append(k)
        rows.append(numbers)
    return {p: (pos, stack_params(rows)) for p, (pos, rows) in groups.items()}
