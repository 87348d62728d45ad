"""Query -> text, the inverse of :func:`pipeline.softquery.parser.parse` (parse(to_text(q)) == q)."""

from __future__ import annotations

import numpy as np

from pipeline.softquery.model import Atom, Const, Query, Term, Var
from pipeline.softquery.parser import BARE
from pipeline.softquery.vocab import Vocabulary


def format_number(x: float) -> str:
    """Shortest positional text that parses back to the same float (no exponent: '+' is not a name char)."""
    return np.format_float_positional(float(x), unique=True, trim="-")


def format_name(name: str) -> str:
    if BARE.fullmatch(name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def term_text(t: Term, vocab: Vocabulary | None = None) -> str:
    if isinstance(t, Var):
        return f"?{t.name}"
    if vocab is not None and 0 <= t.eid < len(vocab.entities) and vocab.entity_unique(t.eid):
        return format_name(vocab.entities[t.eid])
    return f"#{t.eid}"


def relation_text(rid: int, vocab: Vocabulary | None = None) -> str:
    if vocab is not None and 0 <= rid < len(vocab.relations) and vocab.relation_unique(rid):
        return format_name(vocab.relations[rid])
    return f"#{rid}"


def atom_text(a: Atom, vocab: Vocabulary | None = None) -> str:
    args = [term_text(a.head, vocab), term_text(a.tail, vocab)]
    if a.alpha != 0.0 or a.beta != 1.0:
        args.append(format_number(a.alpha))
    if a.beta != 1.0:
        args.append(format_number(a.beta))
    return ("!" if a.negated else "") + f"{relation_text(a.relation, vocab)}({', '.join(args)})"


def to_text(query: Query, vocab: Vocabulary | None = None) -> str:
    """The text form: conjunctions joined by ' | ', atoms by ' & '. Names where vocab makes them
    unambiguous, `#id` otherwise."""
    return " | ".join(" & ".join(atom_text(a, vocab) for a in c.atoms) for c in query.conjunctions)


__all__ = ["Const", "format_name", "format_number", "to_text"]
