"""Easy answers by Cypher: the store computes a typed query's answers on one observed graph with the
``cypher/ground_<type>.cypher`` patterns, independently of the engine (the two must agree).

Only for queries whose atoms all have alpha > 0: then a missing fact fails a positive atom (so a MATCH
over stored facts sees every candidate), and a negated atom over a missing fact (c = 0) is worth beta,
which OPTIONAL MATCH + coalesce expresses.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.core.errors import PipelineError
from pipeline.sampling.walks import cypher
from pipeline.softquery.model import Const, Query
from pipeline.softquery.types import QUERY_TYPES


def parameters(query: Query, type_name: str) -> tuple[dict[str, float | int], list[int]]:
    """($e1.., $a1.., $b1..) of a query of type_name, and its relation ids r1.. (atom text order)."""
    qt = QUERY_TYPES[type_name]
    if not qt.matches(query):
        raise PipelineError(f"query is not of type {type_name}")
    params: dict[str, float | int] = {}
    for k, (t_atom, q_atom) in enumerate(zip(qt.template.atoms, query.atoms, strict=True), start=1):
        if not q_atom.alpha > 0:
            raise PipelineError(
                f"Cypher grounding needs alpha > 0 on every atom; atom {k} has alpha {q_atom.alpha}"
            )
        params[f"a{k}"] = float(q_atom.alpha)
        params[f"b{k}"] = float(q_atom.beta)
        for t_term, q_term in zip(t_atom.terms, q_atom.terms, strict=True):
            if isinstance(t_term, Const):
                params[f"e{t_term.eid + 1}"] = int(q_term.eid)  # type: ignore[union-attr]
    return params, [a.relation for a in query.atoms]


def cypher_answers(
    store, dataset: str, query: Query, type_name: str, relation_types: Sequence[str], graph: str = "train"
) -> list[tuple[int, float]]:
    """(entity id, utility) of every answer (finite u > 0) of query on the store's graph, best first,
    ties by entity id. relation_types[rid] is the relationship type the store gives relation rid."""
    params, rels = parameters(query, type_name)
    text = cypher(
        f"ground_{type_name}", graph, {f"R{k}": relation_types[r] for k, r in enumerate(rels, start=1)}
    )
    rows = store.run(text, {"dataset": dataset, **params})
    return [(int(r["eid"]), float(r["u"])) for r in rows]
