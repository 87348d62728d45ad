"""The engine equals a brute-force enumeration on random tiny uncertain KGs and random query graphs:
chains, trees, multi-edges, self-loops, cycles, negation, disjunction, alpha 0 and > 0, beta != 1."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.kg import GraphTensors
from pipeline.engine import Adjacency, search_batch, search_query, solve
from pipeline.softquery import Atom, Conjunction, Const, Query, QueryGraph, Var, parse
from tests.engine.oracle import dense_conf, oracle

# Confidences and alphas share values so that facts exactly at the threshold occur often.
LEVELS = [0.1, 0.25, 0.5, 0.7, 1.0]
ALPHAS = [0.0, 0.0, 0.25, 0.5, 0.7, 1.0]
BETAS = [1.0, 0.1, 0.5, 2.0, 3.0]
VARS = [Var("y"), Var("x"), Var("z"), Var("w")]


@st.composite
def tiny_kg(draw):
    n = draw(st.integers(2, 5))
    r = draw(st.integers(1, 3))
    cells = [(h, rr, t) for h in range(n) for rr in range(r) for t in range(n)]
    chosen = draw(st.lists(st.sampled_from(cells), unique=True, max_size=min(len(cells), 3 * n * r)))
    conf = draw(
        st.lists(
            st.one_of(st.sampled_from(LEVELS), st.floats(0.0625, 1.0, width=32)),
            min_size=len(chosen),
            max_size=len(chosen),
        )
    )
    return n, r, [(h, rr, t, c) for (h, rr, t), c in zip(chosen, conf, strict=True)]


def term(draw, n, n_vars):
    if draw(st.integers(0, 4)) == 0:
        return Const(draw(st.integers(0, n - 1)))
    return VARS[draw(st.integers(0, n_vars - 1))]


@st.composite
def random_query(draw, n, r):
    n_vars = draw(st.integers(1, 4 if n <= 3 else 3))  # bounds the oracle's N^vars enumeration
    conjs = []
    for _ in range(draw(st.integers(1, 2))):
        atoms = []
        for _ in range(draw(st.integers(1, 5))):
            atoms.append(
                Atom(
                    term(draw, n, n_vars),
                    draw(st.integers(0, r - 1)),
                    term(draw, n, n_vars),
                    draw(st.sampled_from(ALPHAS)),
                    draw(st.sampled_from(BETAS)),
                    draw(st.booleans()),
                )
            )
        conjs.append(Conjunction(tuple(atoms)))
    return Query(tuple(conjs))


@st.composite
def cyclic_query(draw, n, r):
    """A ring over 3 (or 4) variables, random orientations, plus a few random atoms."""
    k = draw(st.integers(3, 4 if n <= 3 else 3))
    ring = VARS[:k]
    atoms = []
    for i in range(k):
        a, b = ring[i], ring[(i + 1) % k]
        if draw(st.booleans()):
            a, b = b, a
        atoms.append(
            Atom(
                a,
                draw(st.integers(0, r - 1)),
                b,
                draw(st.sampled_from(ALPHAS)),
                draw(st.sampled_from(BETAS)),
                draw(st.booleans()),
            )
        )
    for _ in range(draw(st.integers(0, 2))):
        atoms.append(
            Atom(
                term(draw, n, k),
                draw(st.integers(0, r - 1)),
                term(draw, n, k),
                draw(st.sampled_from(ALPHAS)),
                draw(st.sampled_from(BETAS)),
                draw(st.booleans()),
            )
        )
    order = draw(st.permutations(range(len(atoms))))
    return Query((Conjunction(tuple(atoms[i] for i in order)),))


def graph_of(n, r, facts) -> GraphTensors:
    if not facts:
        e = np.zeros(0, dtype=np.int64)
        return GraphTensors.from_arrays(e, e, e, np.zeros(0, np.float32), n, r)
    h, rr, t, c = (np.array(x) for x in zip(*facts, strict=True))
    return GraphTensors.from_arrays(h, rr, t, c.astype(np.float32), n, r)


def assert_same(engine: torch.Tensor, expected: np.ndarray) -> None:
    got = engine.double().numpy()
    assert np.array_equal(np.isneginf(got), np.isneginf(expected)), (got, expected)
    fin = np.isfinite(expected)
    # the engine sums in float32: a utility near 8.45 is off by up to a few of its ulps (~1e-6), so the
    # tolerance grows with the value (rtol 1e-6: about eight float32 ulps); the oracle sums in float64
    assert np.allclose(got[fin], expected[fin], atol=1e-6, rtol=1e-6), (got, expected)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_engine_equals_oracle(data):
    n, r, facts = data.draw(tiny_kg())
    q = data.draw(random_query(n, r))
    assert_same(search_query(q, graph_of(n, r, facts)), oracle(q, dense_conf(n, r, facts)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_engine_equals_oracle_on_cycles(data):
    n, r, facts = data.draw(tiny_kg())
    q = data.draw(cyclic_query(n, r))
    assert QueryGraph(q.conjunctions[0]).has_cycle
    assert_same(search_query(q, graph_of(n, r, facts)), oracle(q, dense_conf(n, r, facts)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_batch_of_one_shape_equals_oracle(data):
    """Same structure, different relations/anchors/alphas/betas/negations per query: one batched run."""
    n, r, facts = data.draw(tiny_kg())
    q0 = data.draw(random_query(n, r))
    queries = [q0]
    for _ in range(data.draw(st.integers(1, 6))):
        queries.append(
            Query(
                tuple(
                    Conjunction(
                        tuple(
                            Atom(
                                a.head
                                if isinstance(a.head, Var)
                                else Const(data.draw(st.integers(0, n - 1))),
                                data.draw(st.integers(0, r - 1)),
                                a.tail
                                if isinstance(a.tail, Var)
                                else Const(data.draw(st.integers(0, n - 1))),
                                data.draw(st.sampled_from(ALPHAS)),
                                data.draw(st.sampled_from(BETAS)),
                                data.draw(st.booleans()),
                            )
                            for a in c.atoms
                        )
                    )
                    for c in q0.conjunctions
                )
            )
        )
    conf = dense_conf(n, r, facts)
    got = search_batch(queries, Adjacency.from_graph(graph_of(n, r, facts)))
    assert got.shape == (len(queries), n)
    for q, row in zip(queries, got, strict=True):
        assert_same(row, oracle(q, conf))


def test_cycle_cap_marks_result_approximate():
    # a triangle ?y-?x-?z: ?x has 3 finite candidates; a cap of 1 keeps one and must say so
    facts = [(0, 0, 1, 0.5), (1, 0, 2, 0.5), (2, 0, 0, 0.5), (0, 0, 2, 0.9), (2, 0, 1, 0.9), (1, 0, 0, 0.9)]
    g = graph_of(3, 1, facts)
    q = parse("#0(?y, ?x, 0.2) & #0(?x, ?z, 0.2) & #0(?z, ?y, 0.2)")
    assert QueryGraph(q.conjunctions[0]).has_cycle
    exact = solve([q], g)
    assert not bool(exact.approximate[0])
    assert_same(exact.utility[0], oracle(q, dense_conf(3, 1, facts)))
    capped = solve([q], g, cycle_cap=1)
    assert bool(capped.approximate[0])
    assert bool((capped.utility[0] <= exact.utility[0]).all())
    assert bool((capped.utility[0] < exact.utility[0]).any())


def test_nested_cycles_show_one_progress_bar(monkeypatch) -> None:
    """A cycle whose candidates still hold a cycle used to open a new bar per inner enumeration (the bar
    restarted over and over); only the outermost enumeration may show one."""
    import pipeline.engine.search as search

    shown: list[str] = []

    class Recorder:
        def __init__(self, iterable, desc="", disable=False, **kw):
            self.it = iterable
            if not disable:
                shown.append(desc)

        def __iter__(self):
            return iter(self.it)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    import pipeline.core.progress as progress

    monkeypatch.setattr(progress, "_bar_class", lambda: (Recorder, False))  # every bar is made there
    monkeypatch.setattr(progress, "terminal", lambda: True)  # bars as a terminal draws them (pytest captures)
    monkeypatch.setattr(search, "MAX_BATCH", 1)  # every enumeration is "long" enough for a bar
    n = 5
    facts = [(h, 0, t, 0.5 + 0.1 * ((h + t) % 3)) for h in range(n) for t in range(n) if h != t]
    # two triangles sharing ?a: enumerating ?a leaves a cycle through ?c, ?d
    q = parse("#0(?a, ?b) & #0(?b, ?y) & #0(?y, ?a) & #0(?a, ?c) & #0(?c, ?d) & #0(?d, ?a)")
    u = search_query(q, graph_of(n, 1, facts))
    assert_same(u, oracle(q, dense_conf(n, 1, facts)))
    assert len(shown) == 1 and shown[0].startswith("cycle ?")
