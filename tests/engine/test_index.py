"""The engine's index with 32-bit ids: the same facts, rows and point lookups as the frozen
index of tests/engine/reference (int64, a sorted key per fact), whatever order the graph's facts come in;
an export loads with int32 ids; the byte-bounded memo keeps each relation pair's union for the whole run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.engine.adjacency as adjacency
import tests.engine.reference.adjacency as ref_adj
from pipeline.core.kg import GraphTensors
from pipeline.engine import Adjacency, search_batch
from pipeline.engine.adjacency import BytesLRU, fact_relations
from pipeline.softquery import QUERY_TYPES
from tests.engine.test_oracle import graph_of, tiny_kg
from tests.engine.test_reference import export_like


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_kg(), st.randoms(use_true_random=False))
def test_index_equals_reference_index(kg, rnd):
    """Rows both ways, diagonal and every point lookup (stored or not) equal the reference index's, the
    ids are int32, and a graph handed over in shuffled order is indexed as its sorted self."""
    n, r, facts = kg
    graph = graph_of(n, r, facts)
    ref = ref_adj.Adjacency.from_graph(graph)
    perm = list(range(graph.nnz))
    rnd.shuffle(perm)
    p = torch.tensor(perm, dtype=torch.int64)
    offsets = graph.rel_offsets  # no longer matching the shuffled order: the index must notice and sort
    shuffled = GraphTensors(
        graph.dataset, n, r, graph.head[p], graph.rel[p], graph.tail[p], graph.conf[p], offsets
    )
    for g in (graph, shuffled):
        adj = Adjacency.from_graph(g)
        for mine, theirs in ((adj.fwd, ref.fwd), (adj.bwd, ref.bwd)):
            assert mine.src.dtype == torch.int32 and mine.dst.dtype == torch.int32
            assert torch.equal(mine.src, theirs.src) and torch.equal(mine.dst, theirs.dst)
            assert torch.equal(mine.conf, theirs.conf) and torch.equal(mine.ptr, theirs.ptr)
            assert torch.equal(fact_relations(mine.ptr, n), theirs.key // (n * n))
        assert torch.equal(adj.diag_ent, ref.diag_ent) and torch.equal(adj.diag_conf, ref.diag_conf)
        assert torch.equal(adj.diag_off, ref.diag_off)
        cells = torch.cartesian_prod(torch.arange(r), torch.arange(n), torch.arange(n))
        for mine, theirs in ((adj.fwd, ref.fwd), (adj.bwd, ref.bwd)):
            f1, c1 = mine.lookup(cells[:, 0], cells[:, 1], cells[:, 2], n)
            f2, c2 = theirs.lookup(cells[:, 0], cells[:, 1], cells[:, 2], n)
            assert torch.equal(f1, f2) and torch.equal(c1, c2)


def test_lookup_in_long_rows():
    """Binary search over rows of every length 0..n on a dense export-like graph: each stored fact is
    found with its confidence, each absent cell is not (brute force over the dense cube)."""
    graph = export_like(n=70, r=3, density=0.5, seed=3)
    n = graph.n_entities
    adj = Adjacency.from_graph(graph)
    dense = torch.zeros(3, n, n)
    present = torch.zeros(3, n, n, dtype=torch.bool)
    dense[graph.rel, graph.head, graph.tail] = graph.conf
    present[graph.rel, graph.head, graph.tail] = True
    cells = torch.cartesian_prod(torch.arange(3), torch.arange(n), torch.arange(n))
    found, conf = adj.fwd.lookup(cells[:, 0], cells[:, 1], cells[:, 2], n)
    assert torch.equal(found, present.reshape(-1)) and torch.equal(conf, dense.reshape(-1))
    found, conf = adj.bwd.lookup(cells[:, 0], cells[:, 2], cells[:, 1], n)
    assert torch.equal(found, present.reshape(-1)) and torch.equal(conf, dense.reshape(-1))


def test_rows_by_head_share_the_exports_arrays():
    """An int32 graph (as an export loads) is indexed without copying its rows by head."""
    graph = export_like(n=30, r=2, seed=1)
    g32 = GraphTensors(
        graph.dataset,
        30,
        2,
        graph.head.int(),
        graph.rel.int(),
        graph.tail.int(),
        graph.conf,
        graph.rel_offsets,
    )
    adj = Adjacency.from_graph(g32)
    assert adj.fwd.src.data_ptr() == g32.head.data_ptr() and adj.fwd.conf.data_ptr() == g32.conf.data_ptr()
    assert torch.equal(adj.bwd.src, Adjacency.from_graph(graph).bwd.src)


def test_bytes_lru_evicts_least_recently_used():
    lru = BytesLRU(100)
    a, b, c = (torch.zeros(10),), (torch.zeros(10),), (torch.zeros(10),)
    lru.put(("a",), a, 40)
    lru.put(("b",), b, 40)
    assert lru.get(("a",)) is a  # a is now the most recent: b leaves first
    lru.put(("c",), c, 40)
    assert ("b",) not in lru and lru.get(("a",)) is a and lru.get(("c",)) is c and lru.used == 80
    lru.put(("big",), a, 101)  # over the whole budget: not kept, nothing evicted for it
    assert ("big",) not in lru and len(lru) == 2
    lru.put(("a",), c, 60)  # replacing a key frees its old size first
    assert lru.used == 100 and lru.get(("a",)) is c and ("c",) in lru


def test_shared_entries_of_a_relation_pair_are_built_once_per_run(monkeypatch):
    """2m batches over one relation pair with other anchor alphas and betas reuse the pair's entries stored
    in both relations (they depend on neither; the split multi-edge step needs no union of supports): one
    merge for the whole run, and the answers equal those of a fresh index per batch. With alpha > 0 on a
    multi-edge atom neither is built (the filtered support of that atom bounds the finite entries)."""
    graph = export_like(n=50, r=2, density=0.4, seed=2)
    adj = Adjacency.from_graph(graph)
    merges = []
    real = adjacency.shared_keys
    monkeypatch.setattr(adjacency, "shared_keys", lambda runs: merges.append(1) or real(runs))
    monkeypatch.setattr(adjacency, "merge_sorted_runs", None)  # no union of supports at all
    rng = np.random.default_rng(0)
    heads = graph.head.numpy()
    for edge_alpha, anchor_alpha in ((0.0, 0.0), (0.0, 0.3), (0.0, 0.6), (0.5, 0.0)):
        qs = [
            QUERY_TYPES["2m"].build(
                [0, 0, 1], [int(rng.choice(heads))], [anchor_alpha, edge_alpha, 0.0], [1.0, float(b), 0.5]
            )
            for b in rng.uniform(0.1, 1.0, 8).round(1)
        ]
        before = len(merges)
        with torch.no_grad():
            got = search_batch(qs, adj)
            built = len(merges) - before
            fresh = search_batch(qs, Adjacency.from_graph(graph))
        first = edge_alpha == 0.0 and anchor_alpha == 0.0
        assert built == (1 if first else 0)  # the run's one merge, at its first batch
        assert len(merges) - before == built + (1 if edge_alpha == 0.0 else 0)  # a fresh index's own
        assert torch.equal(got, fresh)


@pytest.mark.parametrize("n", [5, 40])
def test_exported_graph_loads_with_int32_ids(tmp_path, n):
    """load_adjacency reads an export into int32 ids (as stored) with the same facts in the same order."""
    import pyarrow as pa

    from pipeline.formats.adjacency import FORMAT, SCHEMA, load_adjacency, relation_file, write_manifest

    rng = np.random.default_rng(n)
    rels = []
    want = []
    for r in range(2):
        cells = np.nonzero(rng.random((n, n)) < 0.3)
        h, t = cells[0].astype(np.int32), cells[1].astype(np.int32)
        s = rng.uniform(0.2, 1.0, h.size).astype(np.float32)
        meta = {
            "format": FORMAT,
            "dataset": "toy",
            "model_hash": "x",
            "threshold": "0.2",
            "n_entities": str(n),
        }
        meta["relation"] = str(r)
        table = pa.table([h, t, s], schema=SCHEMA.with_metadata(meta))
        path = tmp_path / relation_file(r)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        rels.append({"relation": r, "file": path.name, "nnz": int(h.size), "bytes": path.stat().st_size})
        want.append((h, np.full(h.size, r), t, s))
    write_manifest(
        tmp_path,
        {
            "format": FORMAT,
            "dataset": "toy",
            "model_hash": "x",
            "threshold": 0.2,
            "n_entities": n,
            "n_relations": 2,
            "relations": rels,
        },
    )
    graph, _ = load_adjacency(tmp_path)
    assert graph.head.dtype == graph.tail.dtype == graph.rel.dtype == torch.int32
    for got, exp in zip(
        (graph.head, graph.rel, graph.tail, graph.conf), zip(*want, strict=True), strict=True
    ):
        assert np.array_equal(got.numpy(), np.concatenate(exp))
    assert graph.rel_offsets.dtype == torch.int64


@pytest.mark.parametrize("alphas", [(0.0,), (0.0, 0.5, 0.0, 0.3)])
def test_dense_gradient_routing_picks_the_same_maximisers(monkeypatch, alphas):
    """Calibration L's gradient routing streams the facts for rows whose state is finite everywhere:
    the same maximisers, in the same order, as the ragged pass over every (row, entity): equal gradients
    (bit for bit) in the state and in the confidences, ties (conf 0.5 repeated) included."""
    import dataclasses

    import pipeline.engine.maxplus as mp
    from pipeline.engine.atoms import AtomParams, RelationMatrix

    graph = export_like(n=40, r=3, density=0.4, seed=5)
    bsz = 12
    gen = torch.Generator().manual_seed(0)
    rel = torch.randint(0, 3, (bsz,), generator=gen)
    alpha = torch.tensor([alphas[i % len(alphas)] for i in range(bsz)], dtype=torch.float32)
    beta = torch.rand(bsz, generator=gen).round(decimals=1) + 0.1
    params = AtomParams(rel, alpha, beta, torch.arange(bsz) % 5 == 4)
    state0 = (torch.rand(bsz, 40, generator=gen) * 4).round() / 4  # ties between state entries too
    state0[1, ::3] = float("-inf")  # one row not finite everywhere: the ragged pass handles it
    weight = torch.randn(bsz, 40, generator=gen)
    grads = []
    for dense in (True, False):
        monkeypatch.setattr(mp, "_DENSE_WINNERS", dense)
        base = Adjacency.from_graph(graph)
        fc, bc = base.fwd.conf.clone().requires_grad_(), base.bwd.conf.clone().requires_grad_()
        adj = dataclasses.replace(
            base, fwd=dataclasses.replace(base.fwd, conf=fc), bwd=dataclasses.replace(base.bwd, conf=bc)
        )
        state = state0.clone().requires_grad_()
        for from_head in (True, False):
            out = mp.maxplus(state, RelationMatrix(adj, params, from_head))
            torch.where(torch.isfinite(out), out * weight, torch.zeros(())).sum().backward()
        grads.append((state.grad, fc.grad, bc.grad))
    for a, b in zip(*grads, strict=True):
        assert torch.equal(a, b)
    assert grads[0][1].abs().sum() > 0 and grads[0][2].abs().sum() > 0
