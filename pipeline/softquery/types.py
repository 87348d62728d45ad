"""The 12 query types of the literature (design section 1) as named templates.

A template is written in the query grammar with placeholder relations r1..r4 and anchors e1..e3; atom k
(in text order) uses relation r(k+1). :meth:`QueryType.build` instantiates it with real ids and per-atom
alpha/beta. Train types: 1p 2p 2i 2in 2il; the rest appear only in valid/test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.core.errors import PipelineError
from pipeline.core.registry import Registry
from pipeline.softquery.model import Atom, Conjunction, Const, Query, Var
from pipeline.softquery.parser import parse
from pipeline.softquery.vocab import Vocabulary

_PLACEHOLDERS = Vocabulary(("e1", "e2", "e3"), ("r1", "r2", "r3", "r4"))


@dataclass(frozen=True)
class QueryType:
    """A named query shape. text: the template in the query grammar (placeholders r1.., e1..)."""

    name: str
    train: bool
    text: str
    template: Query = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "template", parse(self.text, _PLACEHOLDERS))

    @property
    def n_atoms(self) -> int:
        return len(self.template.atoms)

    @property
    def n_anchors(self) -> int:
        return len(set(self.template.anchors()))

    @property
    def negated(self) -> tuple[bool, ...]:
        """Per atom (text order): is it negated."""
        return tuple(a.negated for a in self.template.atoms)

    def build(
        self,
        relations: Sequence[int],
        anchors: Sequence[int],
        alphas: Sequence[float] | None = None,
        betas: Sequence[float] | None = None,
    ) -> Query:
        """Instantiate: relations (n_atoms,) ids, anchors (n_anchors,) entity ids for e1.., alphas/betas
        (n_atoms,) per atom in text order (defaults 0 and 1)."""
        k = self.n_atoms
        alphas = [0.0] * k if alphas is None else list(alphas)
        betas = [1.0] * k if betas is None else list(betas)
        if len(relations) != k or len(alphas) != k or len(betas) != k or len(anchors) != self.n_anchors:
            raise PipelineError(
                f"query type {self.name} needs {k} relations/alphas/betas and {self.n_anchors} anchors, got "
                f"{len(relations)}/{len(alphas)}/{len(betas)} and {len(anchors)}"
            )
        it = iter(range(k))

        def sub(t):
            return Const(int(anchors[t.eid])) if isinstance(t, Const) else t

        conjs = []
        for c in self.template.conjunctions:
            atoms = []
            for a in c.atoms:
                i = next(it)
                atoms.append(
                    Atom(
                        sub(a.head),
                        int(relations[i]),
                        sub(a.tail),
                        float(alphas[i]),
                        float(betas[i]),
                        a.negated,
                    )
                )
            conjs.append(Conjunction(tuple(atoms)))
        return Query(tuple(conjs))

    def matches(self, query: Query) -> bool:
        """True when query has this type's shape (same atoms, variables, negations and anchor pattern
        up to renaming of ids and existential variables)."""
        return shape_key(query) == shape_key(self.template)


def shape_key(query: Query) -> tuple:
    """The structure of a query with ids, alphas and betas abstracted away (anchors as bare constants,
    existential variables by first appearance, ?y kept)."""
    return tuple(conjunction_shape(c) for c in query.conjunctions)


def conjunction_shape(conj: Conjunction, negations: bool = True) -> tuple:
    """The structure of one conjunction: per atom (head, tail[, negated]) with anchors as bare constants,
    existential variables numbered by first appearance and ?y kept. Without ``negations`` it is the engine's
    batching key (negated and positive atoms of one structure run in one batch)."""
    names: dict[str, int] = {}

    def key(t):
        if isinstance(t, Var):
            return ("y",) if t.name == "y" else ("v", names.setdefault(t.name, len(names)))
        return ("c",)

    if negations:
        return tuple((key(a.head), key(a.tail), a.negated) for a in conj.atoms)
    return tuple((key(a.head), key(a.tail)) for a in conj.atoms)


def type_of(query: Query) -> str | None:
    """The name of the query type query belongs to, or None."""
    k = shape_key(query)
    for qt in QUERY_TYPES.values():
        if shape_key(qt.template) == k:
            return qt.name
    return None


def get_type(name: str) -> QueryType:
    return QUERY_TYPES.get(name)


_DEFS = [
    ("1p", True, "r1(e1, ?y)"),
    ("2p", True, "r1(e1, ?x) & r2(?x, ?y)"),
    ("2i", True, "r1(e1, ?y) & r2(e2, ?y)"),
    ("2in", True, "!r1(e1, ?y) & r2(e2, ?y)"),
    ("2il", True, "r1(e1, ?y) & r2(?x, ?y)"),
    ("2m", False, "r1(e1, ?x) & r2(?x, ?y) & r3(?x, ?y)"),
    ("2u", False, "r1(e1, ?y) | r2(e2, ?y)"),
    ("3in", False, "!r1(e1, ?y) & r2(e2, ?y) & r3(e3, ?y)"),
    ("ip", False, "r1(e1, ?x) & r2(e2, ?x) & r3(?x, ?y)"),
    ("im", False, "r1(e1, ?x) & r2(e2, ?x) & r3(?x, ?y) & r4(?x, ?y)"),
    ("inp", False, "!r1(e1, ?x) & r2(e2, ?x) & r3(?x, ?y)"),
    ("up", False, "r1(e1, ?y) | r2(e2, ?x) & r3(?x, ?y)"),
]

# The paper's column order; SQUK files number the types 0..11 in this order too.
QUERY_TYPES: Registry[QueryType] = Registry(
    "query type",
    (QueryType(name, train, text) for name, train, text in _DEFS),
    row=lambda qt: {"name": qt.name, "train": "yes" if qt.train else "", "text": qt.text},
)
TRAIN_TYPES: tuple[str, ...] = tuple(n for n, qt in QUERY_TYPES.items() if qt.train)


def ordered_types(types: list[str] | set[str]) -> list[str]:
    """Types in the paper's column order (:data:`QUERY_TYPES`), unknown ones after them sorted: the order of
    every table's columns."""
    known = [t for t in QUERY_TYPES if t in types]
    return known + sorted(set(types) - set(QUERY_TYPES))
