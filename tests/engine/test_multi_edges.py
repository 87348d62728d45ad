"""Multi-edges without the union of supports: for atoms that are all positive at
alpha <= 0 with betas >= 0, the max-plus step over a multi-edge is the max of each relation's own stream
and of the full sum on the entries stored in several relations (maxplus._split_multi_edges). Bit for bit
the union path's values (the frozen engine and the same engine with the split off), the brute-force
oracle's, and the same gradients of calibration L."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.engine.adjacency as adjacency
import pipeline.engine.maxplus as mp
import tests.engine.reference.adjacency as ref_adj
import tests.engine.reference.evaluate as ref_eval
from pipeline.engine import Adjacency, search_batch
from pipeline.methods.src.affine import AffineCalibration, calibrated_adjacency
from pipeline.softquery import Atom, Conjunction, Const, Query, Var, parse
from tests.engine.oracle import dense_conf, oracle
from tests.engine.test_oracle import assert_same, graph_of

X, Y, Z = Var("x"), Var("y"), Var("z")
# few distinct values: ties between confidences, between betas, and sums that tie a single term
LEVELS = [0.25, 0.5, 0.5, 0.75, 1.0]
ALPHAS = [0.0, 0.0, 0.0, 0.5]
BETAS = [0.0, 0.5, 1.0, 1.0, 2.0]


@st.composite
def graphs(draw):
    """A toy graph with overlapping relations (so supports meet), some relations possibly empty,
    self-loops allowed."""
    n = draw(st.integers(2, 5))
    r = draw(st.integers(2, 4))
    cells = [(h, rr, t) for h in range(n) for rr in range(r) for t in range(n)]
    chosen = draw(st.lists(st.sampled_from(cells), unique=True, max_size=min(len(cells), 4 * n * r)))
    conf = draw(st.lists(st.sampled_from(LEVELS), min_size=len(chosen), max_size=len(chosen)))
    return n, r, [(h, rr, t, c) for (h, rr, t), c in zip(chosen, conf, strict=True)]


def atom(draw, head, tail, r, negation: bool = False) -> Atom:
    """An atom with drawn relation, alpha, beta (negated only where allowed and drawn)."""
    return Atom(
        head,
        draw(st.integers(0, r - 1)),
        tail,
        draw(st.sampled_from(ALPHAS)),
        draw(st.sampled_from(BETAS)),
        negation and draw(st.integers(0, 5)) == 0,
    )


@st.composite
def multi_edge_shape(draw, n, r):
    """A structure with one or two multi-edges: 2m, im, a leaf multi-edge (state 0 everywhere: the dense
    path without an anchor), a 3-atom multi-edge, mixed orientations, a self-loop on x."""
    kind = draw(st.sampled_from(["2m", "im", "leaf", "three", "two_edges"]))
    e1, e2 = Const(draw(st.integers(0, n - 1))), Const(draw(st.integers(0, n - 1)))
    k = 3 if kind == "three" else 2

    def edge(a, b):  # k atoms between a and b, each in a drawn orientation
        return [(a, b) if draw(st.booleans()) else (b, a) for _ in range(k)]

    pairs = []
    if kind in ("2m", "three"):
        pairs = [(e1, X), *edge(X, Y)]
    elif kind == "im":
        pairs = [(e1, X), (e2, X), *edge(X, Y)]
    elif kind == "leaf":
        pairs = edge(X, Y)
    elif kind == "two_edges":
        pairs = [*edge(Z, X), *edge(X, Y)]
    if draw(st.booleans()):
        pairs.append((X, X))
    return pairs


@st.composite
def batch(draw, n, r):
    """Several queries of one shape (one batch, grouped by (relation, alpha)), alphas mixed across them."""
    pairs = draw(multi_edge_shape(n, r))
    size = draw(st.integers(1, 9))
    negation = draw(st.booleans())
    return [
        Query((Conjunction(tuple(atom(draw, h, t, r, negation) for h, t in pairs)),)) for _ in range(size)
    ]


def fast_and_union(queries: list[Query], graph) -> tuple[torch.Tensor, torch.Tensor]:
    """(split path, union path) utilities of the same engine on one index."""
    adj = Adjacency.from_graph(graph)
    with torch.no_grad():
        fast = search_batch(queries, adj)
        mp._SPLIT_MULTI_EDGES = False
        try:
            union = search_batch(queries, adj)
        finally:
            mp._SPLIT_MULTI_EDGES = True
    return fast, union


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([1, 8]))
def test_split_multi_edges_equal_union_reference_and_oracle(data, wide):
    """Random toy graphs x batches of 2m / im / leaf / 3-atom / two multi-edges: the split path equals the
    union path and the frozen engine bit for bit, and the brute force to 1e-6."""
    n, r, facts = data.draw(graphs())
    queries = data.draw(batch(n, r))
    graph = graph_of(n, r, facts)
    old = mp._WIDE
    mp._WIDE = wide  # 1: every dense group through the transposed stream; 8: small groups narrow
    try:
        fast, union = fast_and_union(queries, graph)
        with torch.no_grad():
            ref = ref_eval.evaluate_batch(queries, ref_adj.Adjacency.from_graph(graph))
    finally:
        mp._WIDE = old
    assert torch.equal(fast, union)
    assert torch.equal(fast, ref)
    conf = dense_conf(n, r, facts)
    for q, u in zip(queries, fast, strict=True):
        assert_same(u, oracle(q, conf))


def test_shared_entry_wins_by_hand():
    """r0(?x, ?y) & r1(?x, ?y), ?x a leaf (state 0 everywhere). Column y = 1 holds r0(0,1) = r1(0,1) = 0.5,
    r0(1,1) = 0.7, r1(2,1) = 0.6: the union's values there are 1.0, 0.7, 0.6, so u(1) = 1.0, which only the
    entry stored in both relations gives (without it: 0.7); u(0) = u(2) = 0 (nothing stored: defaults)."""
    graph = graph_of(3, 2, [(0, 0, 1, 0.5), (0, 1, 1, 0.5), (1, 0, 1, 0.7), (2, 1, 1, 0.6)])
    q = Query((Conjunction((Atom(X, 0, Y), Atom(X, 1, Y))),))
    fast, union = fast_and_union([q], graph)
    assert fast[0].tolist() == [0.0, 1.0, 0.0]
    assert torch.equal(fast, union)


def test_shared_entry_wins_by_hand_with_betas_in_a_batch():
    """The same column with betas 2 and 0.5 (2 * 0.5 + 0.5 * 0.5 = 1.25; alone: 2 * 0.7 = 1.4 and
    0.5 * 0.6 = 0.3), and beta 0 on r0 (0.5 * 0.5 = 0.25 shared vs 0.3 alone), in one wide batch."""
    graph = graph_of(3, 2, [(0, 0, 1, 0.5), (0, 1, 1, 0.5), (1, 0, 1, 0.7), (2, 1, 1, 0.6)])
    queries = [
        Query((Conjunction((Atom(X, 0, Y, 0.0, b0), Atom(X, 1, Y, 0.0, b1))),))
        for b0, b1 in [(2.0, 0.5), (0.0, 0.5), (1.0, 1.0)] * 3
    ]
    old = mp._WIDE
    mp._WIDE = 1
    try:
        fast, union = fast_and_union(queries, graph)
    finally:
        mp._WIDE = old
    f = np.float32
    want = [f(2) * f(0.7), f(0.5) * f(0.6), f(1.0)]  # the shared entry wins only in the third
    assert fast[:3, 1].tolist() == [float(w) for w in want]
    assert torch.equal(fast, union)


def test_split_path_builds_no_union(monkeypatch):
    """Alpha-0 positive multi-edges never merge whole relations; the shared entries are memoised per
    relation pair (built once for a batch and for the next one)."""
    rng = np.random.default_rng(0)
    n = 30
    facts = [
        (int(h), int(r), int(t), 0.5)
        for h, r, t in zip(*np.nonzero(rng.random((n, 2, n)) < 0.3), strict=True)
    ]
    graph = graph_of(n, 2, facts)
    adj = Adjacency.from_graph(graph)

    def no_merge(*args):
        raise AssertionError("a union of supports was built")

    monkeypatch.setattr(adjacency, "merge_sorted_runs", no_merge)
    built = []
    real = adjacency.shared_keys
    monkeypatch.setattr(adjacency, "shared_keys", lambda runs: built.append(1) or real(runs))
    q = parse("#0(#1, ?x) & #0(?x, ?y) & #1(?x, ?y)")
    with torch.no_grad():
        first = search_batch([q], adj)
        again = search_batch([q, q], adj)
    assert len(built) == 1
    assert torch.equal(first[0], again[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), unique=True), st.lists(st.integers(0, 40), unique=True))
def test_sorted_intersection_is_the_set_intersection(a, b):
    got = adjacency.shared_keys([torch.tensor(sorted(x), dtype=torch.int32) for x in (a, b)])[0]
    assert got.tolist() == sorted(set(a) & set(b))
    assert got.dtype == torch.int32


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.data())
def test_shared_facts_are_the_entries_in_two_relations(g, data):
    """shared_facts: (s, o) stored in >= 2 of the parts, sorted by (o, s), each part's confidence (0 if
    absent), by brute force over the facts; any orientation per part, 2 or 3 parts."""
    n, r, facts = g
    adj = Adjacency.from_graph(graph_of(n, r, facts))
    parts = tuple(
        (data.draw(st.booleans()), data.draw(st.integers(0, r - 1)))
        for _ in range(data.draw(st.integers(2, 3)))
    )
    conf = {(h, rr, t): c for h, rr, t, c in facts}
    cells = {}
    for p, (from_head, rel) in enumerate(parts):
        for (h, rr, t), c in conf.items():
            if rr == rel:
                s, o = (h, t) if from_head else (t, h)
                cells.setdefault((o, s), {})[p] = c
    want = sorted(k for k, v in cells.items() if len(v) >= 2)
    s, o, cc = adj.shared_facts(parts)
    assert list(zip(o.tolist(), s.tolist(), strict=True)) == want
    for i, key in enumerate(want):
        assert cc[:, i].tolist() == [float(np.float32(cells[key].get(p, 0.0))) for p in range(len(parts))]


def test_gradients_of_l_unchanged():
    """Calibration L through an alpha-0 2m and im batch: same utilities and same gradients bit for bit
    with the split on and off (the split computes values only; the winners' routing reads them)."""
    rng = np.random.default_rng(1)
    n, r = 25, 3
    cells = np.nonzero(rng.random((n, r, n)) < 0.4)
    conf = rng.choice([0.25, 0.5, 0.75], size=cells[0].size).astype(np.float32)
    graph = graph_of(
        n, r, [(int(h), int(rr), int(t), float(c)) for h, rr, t, c in zip(*cells, conf, strict=True)]
    )
    gen = torch.Generator().manual_seed(0)
    tables = tuple(torch.randn(k, 4, generator=gen) for k in (n, r, n))
    queries = [
        parse("#0(#1, ?x) & #1(?x, ?y) & #2(?x, ?y, 0, 0.5)"),
        parse("#1(#3, ?x) & #0(?y, ?x, 0, 2) & #2(?x, ?y)"),
        parse("#0(#1, ?x) & #2(#4, ?x) & #1(?x, ?y) & #0(?x, ?y)"),
    ]
    results = []
    for split in (True, False):
        calib = AffineCalibration(4, 4)
        with torch.no_grad():
            for p in calib.parameters():
                p.copy_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(2)))
        mp._SPLIT_MULTI_EDGES = split
        try:
            util = search_batch(queries, calibrated_adjacency(Adjacency.from_graph(graph), calib, tables))
        finally:
            mp._SPLIT_MULTI_EDGES = True
        loss = util[torch.isfinite(util)].square().sum()
        loss.backward()
        results.append((util.detach(), [p.grad.clone() for p in calib.parameters()]))
    (u1, g1), (u2, g2) = results
    assert torch.equal(u1, u2)
    assert any(bool(g.abs().sum() > 0) for g in g1)
    for a, b in zip(g1, g2, strict=True):
        assert torch.equal(a, b)


def test_betas_that_are_not_nonnegative_numbers_take_the_union():
    """A negative (or -0.0, NaN) beta would break the dominance argument: _splittable refuses it (queries
    reject negative betas; -0.0 passes their check and takes the union, with the same results)."""
    key = ((True, 0, False, 0.0), (True, 1, False, 0.0))
    one = torch.tensor([1.0])
    for bad in (-1.0, -0.0, float("nan"), float("inf")):
        assert not mp._splittable(key, [torch.tensor([bad]), one])
    assert mp._splittable(key, [torch.tensor([0.0]), one])
    assert not mp._splittable(((True, 0, True, 0.0), (True, 1, False, 0.0)), [one, one])  # negated
    assert not mp._splittable(((True, 0, False, 0.5), (True, 1, False, 0.0)), [one, one])  # alpha > 0
    graph = graph_of(3, 2, [(0, 0, 1, 0.5), (0, 1, 1, 0.5), (1, 0, 1, 0.7), (2, 1, 1, 0.6)])
    q = Query((Conjunction((Atom(X, 0, Y, 0.0, -0.0), Atom(X, 1, Y))),))
    fast, union = fast_and_union([q], graph)
    assert torch.equal(fast, union)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), unique=True), min_size=2, max_size=4))
def test_shared_keys_merge_equals_the_torch_path(runs):
    """The CPU merge (two runs, or more) and the any-device torch.unique path give the same arrays, and
    they are the keys in >= 2 runs with each run's positions (-1 where absent)."""
    tensors = [torch.tensor(sorted(r), dtype=torch.int32) for r in runs]
    shared, where = adjacency.shared_keys(tensors)
    t_shared, t_where = adjacency._shared_keys_torch(tensors)
    assert shared.tolist() == t_shared.tolist()
    assert [w.tolist() for w in where] == [w.tolist() for w in t_where]
    flat = [k for r in runs for k in r]
    assert shared.tolist() == sorted(k for k in set(flat) if flat.count(k) >= 2)
    for r, w in zip(runs, where, strict=True):
        srt = sorted(r)
        assert w.tolist() == [srt.index(k) if k in r else -1 for k in shared.tolist()]
