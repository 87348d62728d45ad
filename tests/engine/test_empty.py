"""Why a query has no answer (pipeline.engine.empty), on a hand-made graph where every reason is checked
by hand, and each query is confirmed empty by the engine itself."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.kg import GraphTensors
from pipeline.engine.adjacency import as_adjacency
from pipeline.engine.empty import EmptyReason, _other_side, _positions, empty_reason_text, empty_reasons
from pipeline.engine.search import solve, top_answers
from pipeline.softquery import Vocabulary, parse
from pipeline.softquery.model import Atom, Const, Var

# entities: 0 ann, 1 ben, 2 cy, 3 dee, 4 eve (eve has no fact); relations: 0 knows, 1 likes
ENTITIES = ["ann", "ben", "cy", "dee", "eve"]
RELATIONS = ["knows", "likes"]
FACTS = [  # h, r, t, conf
    (0, 0, 1, 0.9),  # ann knows ben
    (0, 0, 2, 0.4),  # ann knows cy
    (1, 0, 3, 0.3),  # ben knows dee
    (2, 1, 3, 0.8),  # cy likes dee
    (3, 1, 0, 0.6),  # dee likes ann
]


@pytest.fixture(scope="module")
def graph() -> GraphTensors:
    df = pd.DataFrame(FACTS, columns=["h", "r", "t", "conf"])
    return GraphTensors.from_frame(df, len(ENTITIES), len(RELATIONS), "hand")


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary(ENTITIES, RELATIONS)


def _empty(text: str, graph: GraphTensors, vocab: Vocabulary) -> list[EmptyReason]:
    q = parse(text, vocab)
    ids, _ = top_answers(solve([q], as_adjacency(graph)).utility[0], k=len(ENTITIES))
    assert ids.numel() == 0, f"{text} has answers: the reason would be a lie"
    return empty_reasons(q, graph)


def test_an_anchor_without_facts_is_named_with_the_other_direction(graph, vocab) -> None:
    # dee is the tail of two facts but the head of only `likes`: knows(dee, ?y) has no fact
    (r,) = _empty("knows(dee, ?y)", graph, vocab)
    assert (r.kind, r.other_side) == ("anchor", 1)  # ben knows dee: dee is a tail once
    text = empty_reason_text(parse("knows(dee, ?y)", vocab), graph, vocab, "on graph test")
    assert text == ("no answer: anchor dee has no knows fact as head on graph test (in knows(dee, ?y)); "
                    "it has 1 as tail: try the atom the other way round")
    (r,) = _empty("likes(?y, eve)", graph, vocab)
    assert (r.kind, r.other_side) == ("anchor", 0)


def test_an_alpha_no_fact_meets_gives_the_best_confidence(graph, vocab) -> None:
    (r,) = _empty("knows(ann, ?y, 0.95)", graph, vocab)
    assert r.kind == "alpha" and r.best == pytest.approx(0.9)
    text = empty_reason_text(parse("knows(ann, ?y, 0.95)", vocab), graph, vocab, "on graph test")
    assert text.endswith("no fact meets alpha 0.95 on graph test (best confidence 0.9); try alpha <= 0.9")
    # without an anchor: the best over the whole relation (likes: 0.8)
    (r,) = _empty("likes(?x, ?y, 0.85)", graph, vocab)
    assert r.kind == "alpha" and r.best == pytest.approx(0.8)


def test_an_alpha_the_best_fact_meets_exactly_is_the_suggestion(graph, vocab) -> None:
    # 0.3 in float32 is below the float 0.3: the suggestion must be an alpha the fact really meets
    (r,) = _empty("knows(ben, ?y, 0.5)", graph, vocab)
    assert r.best == pytest.approx(0.3)
    text = empty_reason_text(parse("knows(ben, ?y, 0.5)", vocab), graph, vocab)
    assert "try alpha <= 0.3" in text
    assert parse("knows(ben, ?y, 0.3)", vocab)  # and that query has its answer
    util = solve([parse("knows(ben, ?y, 0.3)", vocab)], as_adjacency(graph)).utility[0]
    assert float(util[3]) == pytest.approx(0.3)


def test_a_variable_no_entity_fills(graph, vocab) -> None:
    # ann knows ben (0.9) and cy (0.4); with alpha 0.5 only ben; ben likes nobody
    (r,) = _empty("knows(ann, ?x, 0.5) & likes(?x, ?y, 0.5)", graph, vocab)
    assert r.kind == "join" and r.variable.name == "x" and len(r.atoms) == 2
    text = empty_reason_text(parse("knows(ann, ?x, 0.5) & likes(?x, ?y, 0.5)", vocab), graph, vocab, "on graph test")
    assert text == ("no answer: no entity for ?x meets all of knows(ann, ?x, 0.5), likes(?x, ?y, 0.5) on graph "
                    "test; lower one of their alphas")
    # the same atoms at alpha 0.3 join through cy
    util = solve([parse("knows(ann, ?x, 0.3) & likes(?x, ?y, 0.5)", vocab)], as_adjacency(graph)).utility[0]
    assert float(util[3]) == pytest.approx(0.4 + 0.8)


def test_a_self_loop_reads_the_diagonal(graph, vocab) -> None:
    (r,) = _empty("knows(?y, ?y, 0.1)", graph, vocab)
    assert r.kind == "alpha" and r.best is None
    assert "no knows fact from an entity to itself" in empty_reason_text(parse("knows(?y, ?y, 0.1)", vocab), graph, vocab)


def test_no_positive_utility(graph, vocab) -> None:
    (r,) = _empty("knows(ann, ?y, 0, 0)", graph, vocab)  # beta 0: every utility is 0
    assert r.kind == "utility"


def test_a_negated_atom_between_constants(graph, vocab) -> None:
    # ann knows ben at 0.9: !knows(ann, ben, 0.5) needs 1 - 0.9 >= 0.5
    (r,) = _empty("!knows(ann, ben, 0.5) & likes(dee, ?y)", graph, vocab)
    assert r.kind == "alpha" and r.atom.negated and r.best == pytest.approx(0.9)


def test_a_disjunction_gives_one_reason_per_branch(graph, vocab) -> None:
    q = "knows(ann, ?y, 0.95) | knows(dee, ?y)"
    assert [r.kind for r in _empty(q, graph, vocab)] == ["alpha", "anchor"]
    text = empty_reason_text(parse(q, vocab), graph, vocab)
    assert text.startswith("no answer: branch 1: knows(ann, ?y, 0.95): ") and "; branch 2: anchor dee" in text


@st.composite
def _graph_and_atom(draw):
    """A random graph (self-loops and repeated heads included) and an atom over it: each of head and tail a
    constant or a variable, the same variable at both ends (a self-loop) or two."""
    n, n_rel = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    cells = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n_rel - 1), st.integers(0, n - 1)),
                          max_size=25, unique=True))
    confs = draw(st.lists(st.floats(0.0625, 1.0, width=32), min_size=len(cells), max_size=len(cells)))
    facts = [(h, r, t, c) for (h, r, t), c in zip(cells, confs, strict=True)]
    x, y = Var("x"), Var("y")
    head = draw(st.sampled_from([x, *map(Const, range(n))]))
    tail = draw(st.sampled_from([x, y, *map(Const, range(n))]))
    return n, n_rel, facts, Atom(head, draw(st.integers(0, n_rel - 1)), tail)


@given(_graph_and_atom())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_index_reads_the_facts_a_scan_finds(case) -> None:
    """The reason reads an anchor's row, a relation's rows or its diagonal from the engine's index; the
    same facts as a scan of every fact (the reading it replaced), and the other-side count likewise."""
    n, n_rel, facts, a = case
    frame = pd.DataFrame(facts or None, columns=["h", "r", "t", "conf"]).astype(
        {"h": "int64", "r": "int64", "t": "int64", "conf": "float32"})
    adj = as_adjacency(GraphTensors.from_frame(frame, n, n_rel, "random"))

    def fits(h: int, t: int) -> bool:
        ends = ((a.head, h), (a.tail, t))
        if any(isinstance(term, Const) and term.eid != e for term, e in ends):
            return False
        return not (isinstance(a.head, Var) and a.head == a.tail and h != t)

    scan = sorted((h, t, np.float32(c)) for h, r, t, c in facts if r == a.relation and fits(h, t))
    h, t, c = _positions(adj, a)
    assert c.dtype == np.float32
    assert sorted(zip(h.tolist(), t.tolist(), c.tolist(), strict=True)) == [(x, y, float(z)) for x, y, z in scan]
    for anchor in (x for x in a.terms if isinstance(x, Const)):
        other = [f for f in facts if f[1] == a.relation and f[2 if isinstance(a.head, Const) else 0] == anchor.eid]
        assert _other_side(adj, a, anchor) == len(other)
