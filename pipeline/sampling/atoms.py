"""A query as flat atom records (the ``atoms`` column of a query set) and back.

One record per atom: conj (index of its conjunction), head_var | head_eid, relation, tail_var | tail_eid,
alpha, beta, negated. Variables are stored by name without the ``?``.
"""

from __future__ import annotations

from typing import Any

from pipeline.errors import ArtifactError
from pipeline.query.model import Atom, Conjunction, Const, Query, Var


def query_to_records(query: Query) -> list[dict[str, Any]]:
    out = []
    for ci, conj in enumerate(query.conjunctions):
        for a in conj.atoms:
            rec: dict[str, Any] = {
                "conj": ci,
                "relation": int(a.relation),
                "alpha": float(a.alpha),
                "beta": float(a.beta),
                "negated": bool(a.negated),
            }
            for side, term in (("head", a.head), ("tail", a.tail)):
                rec[f"{side}_var"] = term.name if isinstance(term, Var) else None
                rec[f"{side}_eid"] = int(term.eid) if isinstance(term, Const) else None
            out.append(rec)
    return out


def records_to_query(records: list[dict[str, Any]]) -> Query:
    """Inverse of :func:`query_to_records`; ArtifactError on a record that is not one atom."""
    conjs: dict[int, list[Atom]] = {}
    for rec in records:
        try:
            terms = []
            for side in ("head", "tail"):
                var, eid = rec.get(f"{side}_var"), rec.get(f"{side}_eid")
                if (var is None) == (eid is None or eid != eid):  # exactly one of the two (NaN = missing)
                    raise ArtifactError(f"atom record {rec}: needs exactly one of {side}_var, {side}_eid")
                terms.append(Var(str(var)) if var is not None else Const(int(eid)))
            atom = Atom(
                terms[0],
                int(rec["relation"]),
                terms[1],
                float(rec["alpha"]),
                float(rec["beta"]),
                bool(rec["negated"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"malformed atom record {rec}: {exc}") from exc
        conjs.setdefault(int(rec["conj"]), []).append(atom)
    if not conjs:
        raise ArtifactError("a query with no atoms")
    return Query(tuple(Conjunction(tuple(conjs[k])) for k in sorted(conjs)))
