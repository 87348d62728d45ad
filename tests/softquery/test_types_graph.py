"""The 12 query types and the query graph (components, multi-edges, self-loops, cycles)."""

from __future__ import annotations

import pytest

from pipeline.core.errors import PipelineError, UnknownNameError
from pipeline.core.registry import registry_rows
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
from tests.cases import QUERY_TYPE_STRUCTURE, QueryTypeCase

EXPECTED = QUERY_TYPE_STRUCTURE  # name: (atoms, anchors, conjunctions, negated atoms)


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
