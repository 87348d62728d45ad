"""The soft query model (design section 1): terms, soft atoms, conjunctions and DNF queries.

All values are frozen dataclasses, so queries hash, compare and can key caches. Entities and relations are
integer ids here; names live only in the text form (see :mod:`pipeline.softquery.vocab`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pipeline.core.errors import PipelineError

VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The answers of a query: the entities of finite utility > 0, best first, capped at the top 100 (design
# section 1; the whole tie group where it crosses the cap). The ground truth (pipeline.sampling.truth), the
# engine's top_answers and the answers files (pipeline.formats.answers) read this one constant.
TOP_K = 100


@dataclass(frozen=True, order=True)
class Var:
    """A variable `?name`; `?y` is the free variable, every other one is existential."""

    name: str

    def __post_init__(self) -> None:
        if not VAR_NAME.fullmatch(str(self.name)):
            raise PipelineError(f"variable name {self.name!r} must match {VAR_NAME.pattern}")


@dataclass(frozen=True, order=True)
class Const:
    """An entity constant (anchor), by entity id."""

    eid: int


Term = Var | Const

FREE = Var("y")


# the largest importance an atom may have: a sum of a thousand such atoms stays far inside float32
MAX_BETA = 1e6


@dataclass(frozen=True)
class Atom:
    """A soft atom `relation(head, tail, alpha, beta)`, optionally negated.

    Value for a substitution with confidence c: positive `beta*c` if `c >= alpha`, else -inf;
    negated `beta*(1-c)` if `1-c >= alpha`, else -inf. alpha is the necessity in [0, 1], beta the
    importance (a finite weight >= 0)."""

    head: Term
    relation: int
    tail: Term
    alpha: float = 0.0
    beta: float = 1.0
    negated: bool = False

    def __post_init__(self) -> None:
        # Checked here so that every way of building a query (parser, templates, records) agrees.
        if not isinstance(self.head, Var | Const) or not isinstance(self.tail, Var | Const):
            raise PipelineError(f"atom terms must be Var or Const, got {self.head!r}, {self.tail!r}")
        if not (0.0 <= float(self.alpha) <= 1.0):
            raise PipelineError(f"alpha {self.alpha} is outside [0, 1]")
        if not (math.isfinite(float(self.beta)) and 0.0 <= float(self.beta) <= MAX_BETA):
            # the bound the query text has (pipeline.softquery.parser): past float32's range (1e39) every
            # utility would be inf; every way of building an atom (a query set file too) is held to it
            raise PipelineError(f"beta {self.beta} must be a finite number in [0, {MAX_BETA:g}]")
        if int(self.relation) < 0:
            raise PipelineError(f"relation id {self.relation} is negative")

    @property
    def terms(self) -> tuple[Term, Term]:
        return (self.head, self.tail)

    def variables(self) -> tuple[Var, ...]:
        return tuple(t for t in self.terms if isinstance(t, Var))


@dataclass(frozen=True)
class Conjunction:
    """Atoms joined by `&`; utility = sum of atom values (-inf absorbs), existentials maximised."""

    atoms: tuple[Atom, ...]

    def __post_init__(self) -> None:
        if not self.atoms:
            raise PipelineError("a conjunction needs at least one atom")
        object.__setattr__(self, "atoms", tuple(self.atoms))

    def variables(self) -> tuple[Var, ...]:
        """Distinct variables in order of first appearance."""
        seen: dict[Var, None] = {}
        for a in self.atoms:
            for v in a.variables():
                seen.setdefault(v, None)
        return tuple(seen)


@dataclass(frozen=True)
class Query:
    """A soft query in disjunctive normal form with the free variable `?y`: max over conjunctions."""

    conjunctions: tuple[Conjunction, ...]

    def __post_init__(self) -> None:
        if not self.conjunctions:
            raise PipelineError("a query needs at least one conjunction")
        object.__setattr__(self, "conjunctions", tuple(self.conjunctions))

    @classmethod
    def of(cls, *conjunctions: tuple[Atom, ...] | list[Atom] | Conjunction) -> Query:
        """Query.of([a1, a2], [a3]) is (a1 & a2) | a3."""
        return cls(tuple(c if isinstance(c, Conjunction) else Conjunction(tuple(c)) for c in conjunctions))

    @property
    def atoms(self) -> tuple[Atom, ...]:
        return tuple(a for c in self.conjunctions for a in c.atoms)

    def anchors(self) -> tuple[int, ...]:
        """Entity ids of the constants, in order of appearance (with repeats)."""
        return tuple(t.eid for a in self.atoms for t in a.terms if isinstance(t, Const))

    def relations(self) -> tuple[int, ...]:
        return tuple(a.relation for a in self.atoms)
