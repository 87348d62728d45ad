"""One sparse max-plus step against the dense definition max_s C[b, s] + M_b(s, o)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.kg import GraphTensors
from pipeline.engine import Adjacency
from pipeline.engine.atoms import AtomParams, RelationMatrix, SumMatrix
from pipeline.engine.maxplus import maxplus


def dense_matrix(n, facts, r, alpha, beta, neg, from_head):
    """(N, N) float64 V(s, o) of one atom by its definition, s = the child side."""

    def f(c):
        cc = np.float32(1) - np.float32(c) if neg else np.float32(c)
        return float(np.float32(beta) * cc) if cc >= np.float32(alpha) else -np.inf

    m = np.full((n, n), f(0.0))
    for h, rr, t, c in facts:
        if rr == r:
            s, o = (h, t) if from_head else (t, h)
            m[s, o] = f(c)
    return m


@st.composite
def case(draw):
    n = draw(st.integers(1, 40))
    dense_cols = draw(st.lists(st.integers(0, n - 1), max_size=3))  # columns whose support is (nearly) all
    facts = {}
    for o in dense_cols:
        for s in range(n):
            if draw(st.integers(0, 9)) > 0:
                facts[(s, 0, o)] = draw(st.sampled_from([0.2, 0.5, 0.9, 1.0]))
    for _ in range(draw(st.integers(0, 3 * n))):
        h, rr, t = draw(st.integers(0, n - 1)), draw(st.integers(0, 1)), draw(st.integers(0, n - 1))
        facts[(h, rr, t)] = draw(st.sampled_from([0.1, 0.3, 0.5, 0.8, 1.0]))
    facts = [(h, rr, t, c) for (h, rr, t), c in facts.items()]
    bsz = draw(st.integers(1, 6))
    # few distinct values: ties are common; -inf entries too
    state = draw(
        st.lists(
            st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, -np.inf]), min_size=n, max_size=n),
            min_size=bsz,
            max_size=bsz,
        )
    )
    atoms = [
        [
            (
                draw(st.integers(0, 1)),
                draw(st.sampled_from([0.0, 0.0, 0.5])),
                draw(st.sampled_from([1.0, 0.5])),
                draw(st.booleans()),
                draw(st.booleans()),
            )
            for _ in range(bsz)
        ]
        for _ in range(draw(st.integers(1, 3)))
    ]
    return n, facts, np.array(state, dtype=np.float32), atoms


# topk=1 and walk=inf: the walk fetches more top entries again and again; walk=0: every covered column
# is finished exactly by masking its support; wide=1 sends every dense row through the transposed
# streaming kernel, wide=99 through the row-wise one
@pytest.mark.parametrize("topk,wide,walk", [(1, 1, 10**9), (16, 99, 0), (2, 3, 3)])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=case())
def test_maxplus_equals_dense(topk, wide, walk, c):
    import pipeline.engine.maxplus as mp

    old, (mp._TOPK, mp._WIDE, mp._WALK) = (mp._TOPK, mp._WIDE, mp._WALK), (topk, wide, walk)
    try:
        n, facts, state, atoms = c
        arr = (
            [np.array(x) for x in zip(*facts, strict=True)]
            if facts
            else [np.zeros(0, np.int64)] * 3 + [np.zeros(0)]
        )
        adj = Adjacency.from_graph(
            GraphTensors.from_arrays(arr[0], arr[1], arr[2], arr[3].astype(np.float32), n, 2)
        )
        parts = []
        expected = np.zeros((len(state), n, n))
        for per_atom in atoms:
            # one orientation per atom position (the plan fixes it), parameters per batch element
            from_head = per_atom[0][4]
            params = AtomParams(
                torch.tensor([a[0] for a in per_atom]),
                torch.tensor([a[1] for a in per_atom]),
                torch.tensor([a[2] for a in per_atom]),
                torch.tensor([a[3] for a in per_atom]),
            )
            parts.append(RelationMatrix(adj, params, from_head))
            for b, (r, alpha, beta, neg, _) in enumerate(per_atom):
                expected[b] += dense_matrix(n, facts, r, alpha, beta, neg, from_head)
        m = parts[0] if len(parts) == 1 else SumMatrix(parts)
        got = maxplus(torch.from_numpy(state), m).double().numpy()
        want = (state.astype(np.float64)[:, :, None] + expected).max(axis=1)
        assert np.array_equal(np.isneginf(got), np.isneginf(want))
        fin = np.isfinite(want)
        assert np.allclose(got[fin], want[fin], atol=1e-6)
    finally:
        mp._TOPK, mp._WIDE, mp._WALK = old
