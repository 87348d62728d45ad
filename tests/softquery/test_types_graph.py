"""The 12 query types and the query graph (components, multi-edges, self-loops, cycles)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.errors import PipelineError, UnknownNameError
from pipeline.core.registry import registry_rows
from pipeline.engine import search_query
from pipeline.softquery import (
    QUERY_TYPES,
    TRAIN_TYPES,
    Atom,
    Const,
    QueryGraph,
    Var,
    get_type,
    parse,
    to_text,
    type_of,
)
from tests.cases import ComponentCase
from tests.engine.oracle import dense_conf, oracle
from tests.engine.test_oracle import assert_same, graph_of

EXPECTED = {  # name: (atoms, anchors, conjunctions, negated atoms)
    "1p": (1, 1, 1, 0),
    "2p": (2, 1, 1, 0),
    "2i": (2, 2, 1, 0),
    "2in": (2, 2, 1, 1),
    "2il": (2, 1, 1, 0),
    "2m": (3, 1, 1, 0),
    "2u": (2, 2, 2, 0),
    "3in": (3, 3, 1, 1),
    "ip": (3, 2, 1, 0),
    "im": (4, 2, 1, 0),
    "inp": (3, 2, 1, 1),
    "up": (3, 2, 2, 0),
}


def test_the_twelve_types():
    assert list(QUERY_TYPES) == list(EXPECTED)
    assert TRAIN_TYPES == ("1p", "2p", "2i", "2in", "2il")
    for name, (atoms, anchors, conjs, negs) in EXPECTED.items():
        qt = QUERY_TYPES[name]
        assert (qt.n_atoms, qt.n_anchors, len(qt.template.conjunctions), sum(qt.negated)) == (
            atoms,
            anchors,
            conjs,
            negs,
        )
        assert not any(QueryGraph(c).has_cycle for c in qt.template.conjunctions)


def test_build_and_recognise():
    qt = get_type("inp")
    q = qt.build([5, 6, 7], [100, 200], [0.1, 0.2, 0.3], [1.0, 0.5, 0.2])
    assert to_text(q) == "!#5(#100, ?x, 0.1) & #6(#200, ?x, 0.2, 0.5) & #7(?x, ?y, 0.3, 0.2)"
    assert type_of(q) == "inp" and qt.matches(q)
    assert type_of(parse(to_text(q))) == "inp"
    assert type_of(parse("#0(#1, ?y) & #0(#2, ?y)")) == "2i"
    assert type_of(parse("!#0(#1, ?y) & #0(#2, ?y)")) == "2in"
    assert type_of(parse("#0(#1, ?y) | #0(#2, ?x) & #1(?x, ?y)")) == "up"
    assert type_of(parse("#0(?y, #1)")) is None  # the anchor must be the head
    for qt in QUERY_TYPES.values():  # every type builds into a query of its own type
        q = qt.build(list(range(qt.n_atoms)), list(range(10, 10 + qt.n_anchors)))
        assert type_of(q) == qt.name


def test_build_checks_lengths_and_names():
    with pytest.raises(PipelineError, match="needs 2 relations"):
        get_type("2p").build([1], [2])
    with pytest.raises(UnknownNameError, match="did you mean 2p"):
        get_type("2pp")


def test_ls_query_types_rows():
    rows = registry_rows("query-types")
    assert [r["name"] for r in rows] == list(EXPECTED)
    assert rows[1] == {"name": "2p", "train": "yes", "text": "r1(e1, ?x) & r2(?x, ?y)"}


def test_query_graph():
    g = QueryGraph(
        parse("#0(#1, ?x) & #1(?x, ?y) & #2(?y, ?x) & #3(?x, ?x) & #4(#1, #2) & #5(?z, ?w)").conjunctions[0]
    )
    x, y, z, w = Var("x"), Var("y"), Var("z"), Var("w")
    assert g.variables == (x, y, z, w)
    assert g.anchor_atoms == (0,) and g.self_loops == (3,) and g.constant_atoms == (4,)
    assert g.edges == {frozenset((x, y)): (1, 2), frozenset((z, w)): (5,)}  # a multi-edge, not a cycle
    assert not g.has_cycle
    assert g.components[0][0] == y and {frozenset(c) for c in g.components} == {
        frozenset((x, y)),
        frozenset((z, w)),
    }
    tri = QueryGraph(parse("#0(?y, ?x) & #0(?x, ?z) & #0(?z, ?y) & #0(?z, ?w)").conjunctions[0])
    assert tri.has_cycle and tri.cycle_variables() == (x, z, y)
    assert Atom(Const(1), 0, Var("y")).variables() == (Var("y"),)


class QueryTypeCase(ComponentCase):
    """What every query type satisfies: its template's structure (EXPECTED), recognition of its instances
    after a text round trip, and SRC equal to the brute-force oracle on random instances over random KGs."""

    kind = "query-types"

    def test_structure_and_recognition(self) -> None:
        qt = self.component()
        atoms, anchors, conjs, negs = EXPECTED[self.name]
        assert (qt.n_atoms, qt.n_anchors, len(qt.template.conjunctions), sum(qt.negated)) == (atoms, anchors, conjs, negs)
        q = qt.build(list(range(qt.n_atoms)), list(range(10, 10 + qt.n_anchors)))
        assert type_of(q) == self.name and type_of(parse(to_text(q))) == self.name

    def test_engine_equals_oracle(self) -> None:
        """25 seeded random instances over random tiny KGs (alphas that fail some atoms, betas != 1)."""
        qt = self.component()
        rng = np.random.default_rng(sum(map(ord, self.name)))
        for _ in range(25):
            n, r = int(rng.integers(2, 6)), int(rng.integers(1, 4))
            cells = [(h, rr, t) for h in range(n) for rr in range(r) for t in range(n)]
            picked = rng.choice(len(cells), size=int(rng.integers(0, len(cells) + 1)), replace=False)
            facts = [(*cells[i], float(rng.choice([0.25, 0.5, 0.75, 1.0]))) for i in picked]
            q = qt.build(
                rng.integers(0, r, qt.n_atoms).tolist(),
                rng.integers(0, n, qt.n_anchors).tolist(),
                rng.choice([0.0, 0.3, 0.6], qt.n_atoms).tolist(),
                rng.choice([0.2, 1.0, 2.5], qt.n_atoms).tolist(),
            )
            assert_same(search_query(q, graph_of(n, r, facts)), oracle(q, dense_conf(n, r, facts)))


class Test1p(QueryTypeCase):
    name = "1p"


class Test2p(QueryTypeCase):
    name = "2p"


class Test2i(QueryTypeCase):
    name = "2i"


class Test2in(QueryTypeCase):
    name = "2in"


class Test2il(QueryTypeCase):
    name = "2il"


class Test2m(QueryTypeCase):
    name = "2m"


class Test2u(QueryTypeCase):
    name = "2u"


class Test3in(QueryTypeCase):
    name = "3in"


class TestIp(QueryTypeCase):
    name = "ip"


class TestIm(QueryTypeCase):
    name = "im"


class TestInp(QueryTypeCase):
    name = "inp"


class TestUp(QueryTypeCase):
    name = "up"
