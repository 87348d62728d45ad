"""Floor states and dominated defaults: a max-plus step whose matrix never stores
a value below its default skips the default's walk, and a state that is a constant floor with few
entries above it (alpha 0 upstream) reads its relations' column fronts instead of streaming them
(maxplus._floor_rows). Bit for bit the values of the same engine with both off and of the frozen engine,
and the brute-force oracle's."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.engine.maxplus as mp
import tests.engine.reference.adjacency as ref_adj
import tests.engine.reference.evaluate as ref_eval
from pipeline.engine import Adjacency, search_batch
from pipeline.engine.adjacency import _front_cover
from pipeline.softquery import Atom, Conjunction, Const, Query, Var
from tests.engine.oracle import dense_conf, oracle
from tests.engine.test_multi_edges import atom, graphs
from tests.engine.test_oracle import assert_same, graph_of

X, Y = Var("x"), Var("y")


@st.composite
def shape(draw, n, r):
    """Chains and multi-edges whose child state is a floor: 2p, 2m, im, a leaf multi-edge, a 3-atom
    multi-edge (never a floor: the stream), in drawn orientations."""
    kind = draw(st.sampled_from(["2p", "2m", "im", "leaf", "three"]))
    e1, e2 = Const(draw(st.integers(0, n - 1))), Const(draw(st.integers(0, n - 1)))
    k = {"2p": 1, "three": 3}.get(kind, 2)
    edge = [(X, Y) if draw(st.booleans()) else (Y, X) for _ in range(k)]
    anchors = {"im": [(e1, X), (e2, X)], "leaf": []}.get(kind, [(e1, X)])
    return anchors + edge


@st.composite
def floor_batch(draw, n, r):
    pairs = draw(shape(n, r))
    negation = draw(st.booleans())
    return [
        Query((Conjunction(tuple(atom(draw, h, t, r, negation) for h, t in pairs)),))
        for _ in range(draw(st.integers(1, 9)))
    ]


def with_paths(
    queries: list[Query], adj: Adjacency, floor: bool, dominate: bool, cost: int = 0, front: float = 0.0
) -> torch.Tensor:
    """The engine's values with the floor path and the dominated defaults on or off; cost and front:
    maxplus's _FLOOR_COST and _FRONT_COST (both 0: every ready row on the floor path)."""
    old = mp._FLOOR, mp._DOMINATE, mp._FLOOR_COST, mp._FRONT_COST
    mp._FLOOR, mp._DOMINATE, mp._FLOOR_COST, mp._FRONT_COST = floor, dominate, cost, front
    try:
        with torch.no_grad():
            return search_batch(queries, adj)
    finally:
        mp._FLOOR, mp._DOMINATE, mp._FLOOR_COST, mp._FRONT_COST = old


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([1, 8]))
def test_floor_and_dominance_equal_the_stream_reference_and_oracle(data, wide):
    n, r, facts = data.draw(graphs())
    queries = data.draw(floor_batch(n, r))
    graph = graph_of(n, r, facts)
    adj = Adjacency.from_graph(graph)
    old = mp._WIDE
    mp._WIDE = wide
    try:
        fast = with_paths(queries, adj, floor=True, dominate=True)
        off = with_paths(queries, adj, floor=False, dominate=False)
        gated = with_paths(queries, adj, floor=True, dominate=True, cost=mp._FLOOR_COST, front=mp._FRONT_COST)
        with torch.no_grad():
            ref = ref_eval.evaluate_batch(queries, ref_adj.Adjacency.from_graph(graph))
    finally:
        mp._WIDE = old
    assert torch.equal(fast, off)
    assert torch.equal(fast, gated)
    assert torch.equal(fast, ref)
    conf = dense_conf(n, r, facts)
    for q, u in zip(queries, fast, strict=True):
        assert_same(u, oracle(q, conf))


def test_floor_path_runs_and_reads_no_relation(monkeypatch):
    """2p at alpha 0 from an anchor: the state is 0 except on the anchor's row, so the step takes the
    floor path (and never streams the relation); u(y) by hand."""
    # r0: 0 -> 1 (0.5), 0 -> 2 (0.25); r1: 1 -> 3 (1.0), 2 -> 3 (0.5), 4 -> 3 (0.75), 4 -> 0 (0.5)
    facts = [(0, 0, 1, 0.5), (0, 0, 2, 0.25), (1, 1, 3, 1.0), (2, 1, 3, 0.5), (4, 1, 3, 0.75), (4, 1, 0, 0.5)]
    adj = Adjacency.from_graph(graph_of(5, 2, facts))
    q = Query((Conjunction((Atom(Const(0), 0, X, 0.0, 1.0), Atom(X, 1, Y, 0.0, 1.0))),))
    calls = []
    real = mp._floor_rows
    monkeypatch.setattr(mp, "_floor_rows", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(mp, "_dense_rows", lambda *a: (_ for _ in ()).throw(AssertionError("streamed")))
    got = with_paths([q], adj, floor=True, dominate=True)[0]
    # y = 3: x = 1 gives 0.5 + 1.0 = 1.5 (x = 4 at the floor: 0 + 0.75); y = 0: x = 4 gives 0.5;
    # elsewhere the best x alone: 0.5 (x = 1) + 0 (no fact)
    assert calls and got.tolist() == [0.5, 0.5, 0.5, 1.5, 0.5]


def test_column_front_by_hand():
    """Column y = 1 holds (c_r0, c_r1) = (0.5, 0.5) [both], (0.7, 0) [r0 alone], (0, 0.6) [r1 alone] and
    (0.25, 0.25) [both]: the listed points are each relation's best, (0.7, 0) and (0, 0.6), and the
    shared front (0.5, 0.5); (0.25, 0.25) is beaten by (0.5, 0.5)."""
    facts = [(0, 0, 1, 0.5), (0, 1, 1, 0.5), (2, 0, 1, 0.7), (3, 1, 1, 0.6), (4, 0, 1, 0.25), (4, 1, 1, 0.25)]
    adj = Adjacency.from_graph(graph_of(5, 2, facts))
    o, c = adj.column_front(((True, 0), (True, 1)))
    assert sorted(zip(o.tolist(), c[0].tolist(), c[1].tolist(), strict=True)) == [
        (1, 0.0, 0.6000000238418579),
        (1, 0.5, 0.5),
        (1, 0.699999988079071, 0.0),
    ]


def test_front_cover_by_hand():
    """One group: (1.0, 0.1) and (0.1, 1.0) are the corners; (0.05, 0.05) is below a corner and dropped;
    (0.5, 0.5) is on the front; (0.4, 0.4) is beaten only by (0.5, 0.5), no corner, so the cover keeps it
    (the exact front would not). A second group of one point keeps it."""
    pts = [(0, 1.0, 0.1), (0, 0.05, 0.05), (0, 0.5, 0.5), (0, 0.4, 0.4), (0, 0.1, 1.0), (1, 0.3, 0.0)]
    g, x, y = (torch.tensor(c) for c in zip(*pts, strict=True))
    assert _front_cover(g, x.float(), y.float()).tolist() == [0, 2, 3, 4, 5]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3), st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.sampled_from([0.0, 0.25, 0.5, 1.0])
        ),
        max_size=30,
    )
)
def test_front_cover_covers_the_brute_force_front(points):
    """_front_cover keeps only given points, among them every point of each group's Pareto front (no
    other point of the group >= in both coordinates, equal points aside), and every point of a group is
    <= some kept point of its group in both coordinates."""
    points = sorted(points, key=lambda p: p[0])
    g = torch.tensor([p[0] for p in points], dtype=torch.int64)
    x = torch.tensor([p[1] for p in points], dtype=torch.float32)
    y = torch.tensor([p[2] for p in points], dtype=torch.float32)
    pos = _front_cover(g, x, y).tolist()
    assert pos == sorted(set(pos))
    kept = [points[i] for i in pos]
    front = {
        p
        for p in points
        if not any(q[0] == p[0] and q != p and q[1] >= p[1] and q[2] >= p[2] for q in points)
    }
    assert front <= set(kept)
    for p in points:
        assert any(q[0] == p[0] and q[1] >= p[1] and q[2] >= p[2] for q in kept)


def test_negated_atom_keeps_the_walk():
    """Where a stored value can be below the default (negation: beta * (1 - c) <= beta), the default's
    walk stays: u(y) by hand with the best x stored in y's column, every combination of the paths."""
    # x: anchor row 0 -> {0: 1.0, 1: 0.5}; r1 facts 0 -> 0 (1.0)
    adj = Adjacency.from_graph(graph_of(2, 2, [(0, 0, 0, 1.0), (0, 0, 1, 0.5), (0, 1, 0, 1.0)]))
    q = Query((Conjunction((Atom(Const(0), 0, X, 0.0, 1.0), Atom(X, 1, Y, 0.0, 1.0, True))),))
    got = with_paths([q], adj, floor=True, dominate=True)[0]
    # y = 0: x = 0 gives 1.0 + (1 - 1.0) = 1.0, x = 1 gives 0.5 + 1 = 1.5; y = 1: x = 0 gives 1.0 + 1 = 2.0
    assert got.tolist() == [1.5, 2.0]
    for flags in itertools.product([False, True], repeat=2):
        assert torch.equal(with_paths([q], adj, *flags)[0], got)


def test_a_cold_front_goes_floor_only_where_its_rows_pay_for_it(monkeypatch):
    """2m at alpha 0: r1 and r2 hold 41 facts each (rows 10..19 -> 0..3, and 5 -> 6), the anchor's row in
    r0 one entry above the floor (x = 5, one fact in each relation). Gathered 2 facts x 16 = 32 < 82
    streamed, but the pair's front, not built yet, costs 82 more (_FRONT_COST = 1 row streamed): the row
    streams (split path). Once the front is memoised the same row takes the floor path. Values equal
    either way."""
    facts = [(0, 0, 5, 0.5), (5, 1, 6, 0.5), (5, 2, 6, 0.25)]
    facts += [(s, r, o, 0.75) for r in (1, 2) for s in range(10, 20) for o in range(4)]
    adj = Adjacency.from_graph(graph_of(20, 3, facts))
    q = Query(
        (Conjunction((Atom(Const(0), 0, X, 0.0, 1.0), Atom(X, 1, Y, 0.0, 1.0), Atom(X, 2, Y, 0.0, 1.0))),)
    )
    calls = []
    real = mp._floor_rows
    monkeypatch.setattr(mp, "_floor_rows", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad():
        cold = search_batch([q], adj)
        assert calls == []
        adj.column_front(((True, 1), (True, 2)))
        warm = search_batch([q], adj)
    assert calls == [1]
    assert torch.equal(cold, warm)
    # y = 6: 0.5 + 0.5 + 0.25; y in 0..3: 0 (floor) + 0.75 + 0.75; elsewhere 0.5 (x = 5 adds its default)
    assert cold[0, 6].item() == 1.25 and cold[0, 0].item() == 1.5 and cold[0, 7].item() == 0.5


def _eight_anchors() -> tuple[Adjacency, list[Query]]:
    """Eight 2p queries at alpha 0 whose middle states are floors with one entity above (x = 10 + i, 0.5
    from anchor i in r0), each x holding 2 facts of r1 among its 66: per row 2 facts gathered x 16 = 32
    < 66 streamed (the floor path, row by row), 8 rows x 32 = 256 > one stream of 66 for all eight."""
    facts = [(i, 0, 10 + i, 0.5) for i in range(8)]
    facts += [(10 + i, 1, o, 0.25 + 0.0625 * i) for i in range(8) for o in (20, 21 + i)]
    facts += [(s, 1, o, 0.75) for s in range(20, 30) for o in range(25)][:50]
    adj = Adjacency.from_graph(graph_of(30, 2, facts))
    queries = [Query((Conjunction((Atom(Const(i), 0, X, 0.0, 1.0), Atom(X, 1, Y, 0.0, 1.0))),)) for i in range(8)]
    return adj, queries


def test_rows_that_share_a_compiled_stream_stream_together(monkeypatch):
    """The compiled stream reads an entry once for eight rows: the eight floor rows of one relation
    stream together (its 66 facts once) instead of gathering 256 facts' worth; in the torch form (a pass
    per row) each row takes the floor path. Values equal either way."""
    pytest.importorskip("numba")
    from pipeline.engine import kernels

    assert kernels.load()
    adj, queries = _eight_anchors()
    calls = []
    real = mp._floor_rows
    monkeypatch.setattr(mp, "_floor_rows", lambda *a: calls.append(a[2].numel()) or real(*a))
    with torch.no_grad():
        monkeypatch.setattr(kernels, "MIN_WORK", 0)
        compiled = search_batch(queries, adj)
        assert calls == []  # every row streams
        monkeypatch.setenv("PIPELINE_KERNELS", "torch")
        torch_form = search_batch(queries, adj)
    assert calls == [8]  # every row on the floor path
    assert torch.equal(compiled, torch_form)
    # y = 21 + i: the anchor's 0.5 + r1's 0.25 + 0.0625 i; y = 20 from anchor 7: 0.5 + 0.6875 (x = 17)
    assert compiled[3, 24].item() == 0.5 + 0.25 + 0.0625 * 3 and compiled[7, 20].item() == 0.5 + 0.6875


def test_rows_cost_counts_passes_of_vectors(monkeypatch):
    pytest.importorskip("numba")
    from pipeline.engine import kernels

    cpu = torch.device("cpu")
    assert kernels.load()
    monkeypatch.setattr(kernels, "MIN_WORK", 0)
    got = [kernels.rows_cost(cpu, rows, 1000) for rows in (0, 1, 8, 9, 16, 24, 32, 33, 64)]
    assert got == pytest.approx([0, 0.6, 0.6, 0.75, 0.75, 0.9, 1.05, 1.65, 2.1])
    monkeypatch.setattr(kernels, "MIN_WORK", 1 << 20)  # below MIN_WORK the torch form runs: a pass per row
    assert kernels.rows_cost(cpu, 9, 1000) == 9.0
    monkeypatch.setenv("PIPELINE_KERNELS", "torch")
    monkeypatch.setattr(kernels, "MIN_WORK", 0)
    assert kernels.rows_cost(cpu, 9, 1000) == 9.0
