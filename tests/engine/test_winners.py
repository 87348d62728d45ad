"""The dense rows' maximisers of the differentiable max-plus product (maxplus._dense_winners, calibration
L's gradient routing): the compiled search (engine/_winners_numba) and the torch form find the same
(row, s, o) on random relations with ties, negated atoms, betas 0 and rows of several relations."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline.engine.maxplus as mp
from pipeline.core.kg import GraphTensors
from pipeline.engine import Adjacency
from pipeline.engine.atoms import AtomParams, RelationMatrix
from pipeline.softquery.model import FREE, Atom, Var

pytest.importorskip("numba")
X = Var("x")


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_compiled_and_torch_winners_agree(data: st.DataObject) -> None:
    n, m = data.draw(st.integers(2, 9)), data.draw(st.integers(1, 3))
    cells = data.draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, m - 1), st.integers(0, n - 1)),
                              min_size=1, max_size=40))
    confs = (0.25, 0.5, 0.75, 1.0)
    h, r, t = (np.array(x) for x in zip(*sorted(cells), strict=True))
    c = np.array([data.draw(st.sampled_from(confs)) for _ in h], dtype=np.float32)
    adj = Adjacency.from_graph(GraphTensors.from_arrays(h, r, t, c, n, m))
    rows = data.draw(st.integers(1, 6))
    atoms = [Atom(X, data.draw(st.integers(0, m - 1)), FREE, 0.0, data.draw(st.sampled_from((0.0, 0.5, 1.0))),
                  data.draw(st.booleans())) for _ in range(rows)]
    mat = RelationMatrix(adj, AtomParams.of(atoms, "cpu"), from_head=True)
    state = torch.tensor([[data.draw(st.sampled_from((0.0, 0.25, 0.5, 1.5))) for _ in range(n)] for _ in range(rows)])
    with torch.no_grad():
        out = mp._values(state, mat)
    dense = torch.arange(rows)
    got = []
    for kernel in (mp._winners_kernel(), None):
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(mp._WINNERS, "kernel", kernel)
            got.append(mp._dense_winners(state, mat, out, dense))
    assert mp._winners_kernel() is not None  # the comparison runs the compiled form
    key = lambda w: sorted(zip(*(x.tolist() for x in w), strict=True))  # noqa: E731
    assert key(got[0]) == key(got[1])


def test_the_compiled_search_finds_the_smallest_maximiser_by_hand() -> None:
    """Row 0 (state 0.5, 0.25, 0.25) over r0: facts (0,1) 0.5, (1,1) 0.75, (2,1) 0.75, (2,0) 1.0: column 1's
    best is 1.0 by s = 1 and s = 2 (0.25 + 0.75) and by s = 0 (0.5 + 0.5): the smallest, 0; column 0's
    is s = 2 alone (1.25)."""
    h, r, t = np.array([0, 1, 2, 2]), np.zeros(4, np.int64), np.array([1, 1, 1, 0])
    adj = Adjacency.from_graph(GraphTensors.from_arrays(h, r, t, np.array([0.5, 0.75, 0.75, 1.0], np.float32), 3, 1))
    mat = RelationMatrix(adj, AtomParams.of([Atom(X, 0, FREE, 0.0)], "cpu"), from_head=True)
    state = torch.tensor([[0.5, 0.25, 0.25]])
    out = mp._values(state, mat)
    assert mp._winners_kernel() is not None
    b, s, o = mp._dense_winners(state, mat, out, torch.tensor([0]))
    assert sorted(zip(b.tolist(), s.tolist(), o.tolist(), strict=True)) == [(0, 0, 1), (0, 2, 0)]
