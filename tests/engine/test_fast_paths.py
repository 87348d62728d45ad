"""The engine's fast paths change no result: mixed batches merged row by row, the
sorted merge of a multi-edge's rows, 32-bit key merges, and max-plus steps that reuse their buffers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.engine.maxplus as mp
from pipeline.engine import Adjacency, search_batch, search_query
from pipeline.engine.adjacency import merge_keys
from pipeline.engine.atoms import AtomParams, RelationMatrix, SumMatrix
from pipeline.engine.maxplus import maxplus
from tests.engine.test_oracle import graph_of, random_query, tiny_kg


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 3))
def test_mixed_batch_equals_each_query_alone(data, max_batch):
    """Several shapes, repeated queries and disjunctions whose conjunctions share a shape, split into
    small chunks (so rows are merged into rows already written): each row equals the query alone."""
    import sys

    mod = sys.modules["pipeline.engine.search"]
    n, r, facts = data.draw(tiny_kg())
    queries = data.draw(st.lists(random_query(n, r), min_size=1, max_size=5))
    queries = queries + data.draw(st.lists(st.sampled_from(queries), max_size=3))  # repeats
    adj = Adjacency.from_graph(graph_of(n, r, facts))
    old = mod.MAX_BATCH
    mod.MAX_BATCH = max_batch
    try:
        got = search_batch(queries, adj)
    finally:
        mod.MAX_BATCH = old
    for q, row in zip(queries, got, strict=True):
        assert torch.equal(row, search_query(q, adj))


def test_merge_keys_matches_unique():
    gen = torch.Generator().manual_seed(0)
    for bound in (50, 1 << 40):  # 32-bit and 64-bit keys
        keys = [torch.unique(torch.randint(0, bound, (k,), generator=gen)) for k in (0, 7, 300)]
        union, inv = merge_keys(keys, bound)
        want = torch.unique(torch.cat(keys))
        assert union.dtype == torch.int64 and torch.equal(union, want)
        assert torch.equal(union[inv], torch.cat(keys))


@pytest.mark.parametrize("seed", range(5))
def test_sum_matrix_rows_are_sorted_sums(seed):
    """Each entry of the union once, grouped by pair with o ascending, valued as the sum (in part order)
    of each part's stored value or default."""
    rng = np.random.default_rng(seed)
    n, r = 7, 3
    cells = {(int(h), int(rr), int(t)) for h, rr, t in rng.integers(0, [n, r, n], size=(40, 3))}
    facts = [(h, rr, t, float(np.float32(rng.choice([0.2, 0.5, 0.9, 1.0])))) for h, rr, t in sorted(cells)]
    adj = Adjacency.from_graph(graph_of(n, r, facts))
    bsz = 4
    parts = [
        RelationMatrix(
            adj,
            AtomParams(
                torch.tensor(rng.integers(0, r, bsz)),
                torch.tensor(rng.choice([0.0, 0.5], bsz), dtype=torch.float32),
                torch.tensor(rng.choice([1.0, 0.5], bsz), dtype=torch.float32),
                torch.tensor(rng.integers(0, 2, bsz).astype(bool)),
            ),
            from_head=bool(rng.integers(0, 2)),
        )
        for _ in range(3)
    ]
    m = SumMatrix(parts)
    b = torch.tensor(rng.integers(0, bsz, 12))
    s = torch.tensor(rng.integers(0, n, 12))
    pair, o, val = m.rows(b, s)
    key = pair * n + o
    assert torch.equal(key, torch.unique(key))  # sorted, no repeats
    for p_, o_, v_ in zip(pair.tolist(), o.tolist(), val.tolist(), strict=True):
        bb, ss = b[p_ : p_ + 1], s[p_ : p_ + 1]
        terms = [p.entry(bb, ss, torch.tensor([o_]))[0] for p in parts]
        want = terms[0]
        for t in terms[1:]:
            want = want + t
        assert v_ == float(want) or (np.isneginf(v_) and np.isneginf(float(want)))
    # every stored entry of a part in these rows is in the union
    for p in parts:
        pp, oo, _ = p.rows(b, s)
        assert set((pp * n + oo).tolist()) <= set(key.tolist())


@pytest.mark.parametrize("bsz", [1, 3, 9, 20])
def test_maxplus_leaves_its_state_unchanged(bsz, monkeypatch):
    """The wide path reuses its transposed copy of the state for the result: never the state itself
    (a batch of one transposes to the same memory)."""
    rng = np.random.default_rng(bsz)
    n, r = 30, 2
    cells = {(int(h), int(rr), int(t)) for h, rr, t in rng.integers(0, [n, r, n], size=(200, 3))}
    adj = Adjacency.from_graph(graph_of(n, r, [(h, rr, t, 0.5) for h, rr, t in sorted(cells)]))
    params = AtomParams(
        torch.zeros(bsz, dtype=torch.int64),
        torch.zeros(bsz),
        torch.ones(bsz),
        torch.zeros(bsz, dtype=torch.bool),
    )
    m = RelationMatrix(adj, params, from_head=True)
    monkeypatch.setattr(mp, "_WIDE", 1)  # every batch size takes the wide path
    state = torch.rand(bsz, n, generator=torch.Generator().manual_seed(bsz))
    before = state.clone()
    out = maxplus(state, m)
    assert torch.equal(state, before)
    assert out.data_ptr() != state.data_ptr()
