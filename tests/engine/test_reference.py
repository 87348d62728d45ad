"""The export speed work changes no result: pipeline.engine gives bit-for-bit the utilities of
the frozen engine in tests/engine/reference (commit e09fd49), on random tiny KGs (every query graph), on
a dense export-like graph (every query type, hybrid alphas mixed in one batch, the wide and the narrow
streaming paths, calibrated confidences) and on the observed PPI5k/CN15k test graphs (slow)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.engine.maxplus as mp
import tests.engine.reference.adjacency as ref_adj
import tests.engine.reference.evaluate as ref_eval
from pipeline.core.kg import GraphTensors, observed_graph
from pipeline.engine import Adjacency, search_batch
from pipeline.methods.src.affine import AffineCalibration, calibrated_adjacency
from pipeline.methods.src.delta import lower_alphas
from pipeline.softquery import QUERY_TYPES, Query
from tests.engine.test_oracle import graph_of, random_query, tiny_kg


def both(queries: list[Query], graph: GraphTensors) -> tuple[torch.Tensor, torch.Tensor]:
    """(reference, fast) utilities of the queries on graph."""
    with torch.no_grad():
        return (
            ref_eval.evaluate_batch(queries, ref_adj.Adjacency.from_graph(graph)),
            search_batch(queries, Adjacency.from_graph(graph)),
        )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([1, 8]))
def test_tiny_graphs_equal_reference(data, wide):
    """Random query graphs (chains, trees, multi-edges, self-loops, cycles, negation, disjunction) in one
    mixed batch; wide=1 sends every dense group down the transposed streaming path."""
    n, r, facts = data.draw(tiny_kg())
    queries = data.draw(st.lists(random_query(n, r), min_size=1, max_size=6))
    old = mp._WIDE
    mp._WIDE = wide
    try:
        ref, got = both(queries, graph_of(n, r, facts))
    finally:
        mp._WIDE = old
    assert torch.equal(ref, got)


def export_like(n: int = 60, r: int = 4, density: float = 0.35, seed: int = 0) -> GraphTensors:
    """A dense graph shaped like a neural export: scores >= 0.1 on a third of all pairs, float32."""
    rng = np.random.default_rng(seed)
    cells = rng.random((n, r, n)) < density
    h, rel, t = np.nonzero(cells)
    conf = rng.uniform(0.1, 1.0, h.size).astype(np.float32)
    conf[rng.random(h.size) < 0.2] = np.float32(0.5)  # ties at a typical alpha
    order = np.lexsort((t, h, rel))
    return GraphTensors.from_arrays(h[order], rel[order], t[order], conf[order], n, r)


def typed_queries(graph: GraphTensors, count: int, seed: int) -> list[Query]:
    """count queries of every type, hybrid alphas (0 / quartiles of the graph, plus 0.5 exactly), random
    betas, relations and anchors drawn from the graph's facts."""
    rng = np.random.default_rng(seed)
    rel, head = graph.rel.numpy(), graph.head.numpy()
    levels = [0.0, 0.0, *np.percentile(graph.conf.numpy(), [25, 50, 75]).tolist(), 0.5]
    out = []
    for qt in QUERY_TYPES.values():
        for _ in range(count):
            rr = rng.integers(0, graph.n_relations, qt.n_atoms).tolist()
            anchors = []  # the template's anchored atoms come first, in order e1, e2, ...
            for a, x in zip(qt.template.atoms, rr, strict=True):
                if a.variables() != (a.head, a.tail) and len(anchors) < qt.n_anchors:
                    anchors.append(int(head[rng.choice(np.nonzero(rel == x)[0])]))
            alphas = [float(np.float32(levels[rng.integers(len(levels))])) for _ in rr]
            betas = [round(float(rng.uniform(0.1, 1.0)), 1) for _ in rr]
            out.append(qt.build(rr, anchors, alphas, betas))
    return out


@pytest.mark.parametrize("wide", [1, 8, 1 << 30])
def test_export_like_graph_equals_reference(wide, monkeypatch):
    graph = export_like()
    queries = typed_queries(graph, 24, seed=wide % 97)
    monkeypatch.setattr(mp, "_WIDE", wide)
    for delta in (0.0, 0.1):  # calibration D lowers every alpha
        low = [lower_alphas(q, delta) for q in queries]
        ref, got = both(low, graph)
        assert torch.isfinite(got).any()
        assert torch.equal(ref, got)


def test_export_like_graph_calibrated_equals_reference():
    """Calibration L applied to both indexes (the same affine map): still bit-for-bit."""
    graph = export_like(seed=1)
    gen = torch.Generator().manual_seed(0)
    tables = tuple(
        torch.randn(k, 4, generator=gen) for k in (graph.n_entities, graph.n_relations, graph.n_entities)
    )
    calib = AffineCalibration(4, 4)
    with torch.no_grad():
        for p in calib.parameters():
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        queries = typed_queries(graph, 16, seed=3)
        ref = ref_eval.evaluate_batch(
            queries, calibrated_adjacency(ref_adj.Adjacency.from_graph(graph), calib, tables)
        )
        got = search_batch(queries, calibrated_adjacency(Adjacency.from_graph(graph), calib, tables))
    assert torch.equal(ref, got)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ppi5k", "cn15k"])
def test_observed_graphs_equal_reference(name, request):
    """300 random queries per type on the observed test graph, alphas hybrid, with and without D."""
    kg = request.getfixturevalue(name)
    graph = observed_graph(kg, "test")
    queries = typed_queries(graph, 300, seed=7)
    for delta in (0.0, 0.1):
        ref, got = both([lower_alphas(q, delta) for q in queries], graph)
        assert torch.equal(ref, got)


@pytest.mark.parametrize("bound", [50, 1 << 40])
def test_merge_sorted_runs_equals_merge_keys(bound):
    from pipeline.engine.adjacency import merge_keys, merge_sorted_runs

    gen = torch.Generator().manual_seed(bound % 7)
    runs = [torch.unique(torch.randint(0, bound, (k,), generator=gen)) for k in (0, 9, 40, 25)]
    union, where = merge_sorted_runs(runs, bound)
    want, inv = merge_keys(runs, bound)
    assert torch.equal(union, want)
    assert torch.equal(torch.cat(where), inv)


def test_gradients_equal_reference():
    """Calibration L trains through the engine: d(loss)/d(confidences) of alpha-0 train-type queries equal
    the reference's (to 1e-6: where a batch repeats an anchor, the gradient's sum may be added in another
    order; the values of the forward are bit-for-bit)."""
    from dataclasses import replace

    from pipeline.methods.src.delta import zero_alphas

    graph = export_like(n=40, seed=2)
    queries = [zero_alphas(q) for q in typed_queries(graph, 12, seed=5)[: 5 * 12]]  # 1p 2p 2i 2in 2il
    weights = torch.linspace(0.5, 1.5, graph.n_entities)
    grads, values = [], []
    for adjacency, evaluate in (
        (ref_adj.Adjacency.from_graph, ref_eval.evaluate_batch),
        (Adjacency.from_graph, search_batch),
    ):
        conf = graph.conf.clone().requires_grad_(True)
        u = evaluate(queries, adjacency(replace(graph, conf=conf)))
        torch.where(torch.isfinite(u), u * weights, torch.zeros(())).sum().backward()
        grads.append(conf.grad)
        values.append(u.detach())
    assert torch.equal(values[0], values[1])
    assert grads[1].abs().sum() > 0
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=1e-6)
