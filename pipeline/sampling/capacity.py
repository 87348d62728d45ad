"""How many distinct queries of a type a graph can hold: an upper bound, computed from the graph's counts in
milliseconds, that sample sizes are checked against before any walk.

A query's text is its relations, anchors, alphas and betas, so the distinct queries of a type are at most
the product, over its atoms, of the choices for each atom: an anchored positive atom ``r(e, ?v)`` is a
distinct (head, relation) pair of the graph (walks ground it on a fact); an anchored negated atom any
entity and relation; an atom between two variables any relation. Times the alpha variants (one level per
query: 4 under ``hybrid``, 1 otherwise) and the beta variants (10 per atom under ``random``: 0.1 .. 1.0).
The bound is loose (it counts relation paths the graph may not hold), never low: asking for more than it
cannot be met, so it is refused at once instead of after the walk budget (50 walks per query asked for:
on a 12-entity graph the baselines' 35,000 train queries per type were 37 hours of walks).

:data:`MAX_PER_TYPE` bounds every sample size whatever the graph: twenty times the largest set of the
literature (CN15k's 53,000 train queries per type); sampling that many takes hours already.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pipeline.sampling import MAX_PER_TYPE  # noqa: F401 (the bound whatever the graph, documented above)
from pipeline.sampling.requirements import ALPHA_LEVELS
from pipeline.softquery.model import Const, Var
from pipeline.softquery.types import QUERY_TYPES

BETA_VALUES = 10  # random betas: 0.1, 0.2, ..., 1.0 (pipeline.sampling.requirements.draw_betas)


def most_queries(type_name: str, facts: pd.DataFrame, n_entities: int, alpha: str, beta: str) -> int:
    """An upper bound of the distinct queries of type ``type_name`` on the graph ``facts`` (columns h, r, t)
    under the alpha and beta modes (canonical names)."""
    qt = QUERY_TYPES[type_name]
    n_relations = int(facts["r"].nunique())
    heads = int(len(facts[["h", "r"]].drop_duplicates()))
    total = 1
    for atom in qt.template.atoms:
        if isinstance(atom.head, Const):
            total *= n_entities * n_relations if atom.negated else heads
        elif isinstance(atom.head, Var) and isinstance(atom.tail, Var):
            total *= n_relations
        else:  # a constant tail: any fact of the graph
            total *= len(facts)
    total *= len(ALPHA_LEVELS) if alpha == "hybrid" else 1
    total *= BETA_VALUES ** qt.n_atoms if beta == "random" else 1
    return total


def most_per_type(types: Sequence[str], facts: pd.DataFrame, n_entities: int, alpha: str, beta: str) -> dict[str, int]:
    """{type: :func:`most_queries`} for each type."""
    return {t: most_queries(t, facts, n_entities, alpha, beta) for t in types}


def too_many(per_type: int, types: Sequence[str], facts: pd.DataFrame, n_entities: int, alpha: str,
             beta: str) -> tuple[str, int] | None:
    """(type, its bound) for the type of ``types`` with the smallest bound when ``per_type`` exceeds it;
    None when every type may hold ``per_type`` queries."""
    bounds = most_per_type(types, facts, n_entities, alpha, beta)
    name = min(bounds, key=bounds.__getitem__) if bounds else None
    return (name, bounds[name]) if name is not None and per_type > bounds[name] else None
