"""Gradients through the engine (calibration L trains through it): with respect to the fact confidences
they equal finite differences and the hand-computed argmax gradient, for every step (anchor folding,
max-plus leaf elimination, intersections, DNF max), and a batch of several shapes supports backward.
The values computed with autograd are exactly those of the no-grad path."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

from pipeline.core.kg import GraphTensors
from pipeline.engine import Adjacency, search_batch
from pipeline.engine.atoms import AtomParams, RelationMatrix, SumMatrix
from pipeline.engine.maxplus import maxplus
from pipeline.softquery.model import FREE, Atom, Conjunction, Const, Query, Var
from tests.engine.test_maxplus import case, dense_matrix

X = Var("x")


def q(*conjs: tuple[Atom, ...]) -> Query:
    return Query(tuple(Conjunction(c) for c in conjs))


# A tiny KG: relation 0 from entity 0, relation 1 onwards; confidences distinct, no near-ties of sums.
FACTS = [
    (0, 0, 1, 0.9),
    (0, 0, 2, 0.5),
    (3, 0, 4, 0.4),
    (1, 1, 3, 0.7),
    (1, 1, 4, 0.6),
    (2, 1, 3, 0.8),
    (2, 1, 5, 0.35),
    (3, 2, 5, 0.55),
    (0, 2, 2, 0.65),
    (4, 2, 2, 0.25),
]
N, R = 6, 3


def graph() -> GraphTensors:
    h, r, t, c = (np.array(x) for x in zip(*FACTS, strict=True))
    return GraphTensors.from_arrays(h, r, t, c.astype(np.float32), N, R)


def utilities(queries: list[Query], conf: torch.Tensor) -> torch.Tensor:
    return search_batch(queries, Adjacency.from_graph(replace(graph(), conf=conf)))


QUERIES = {
    "1p": q((Atom(Const(0), 0, FREE, beta=0.5),)),
    "2p": q((Atom(Const(0), 0, X), Atom(X, 1, FREE, beta=0.7))),
    "2i": q((Atom(Const(1), 1, FREE), Atom(Const(0), 2, FREE, negated=True))),
    "2il": q((Atom(Const(0), 2, FREE), Atom(X, 1, FREE))),
    "ip": q((Atom(Const(0), 0, X), Atom(Const(4), 2, X, beta=0.3), Atom(X, 1, FREE))),
    "2u": q((Atom(Const(1), 1, FREE),), (Atom(Const(0), 0, X), Atom(X, 1, FREE, beta=0.5))),
    "multi": q((Atom(Const(0), 0, X), Atom(X, 1, FREE), Atom(X, 2, FREE, beta=0.5))),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_gradient_equals_finite_differences(name):
    query = QUERIES[name]
    conf0 = graph().conf
    weights = torch.linspace(0.5, 1.5, N)  # distinct weights: each entity's gradient counts separately

    def objective(conf: torch.Tensor) -> torch.Tensor:
        u = utilities([query], conf)[0]
        return torch.where(torch.isfinite(u), u * weights, torch.zeros(())).sum()

    conf = conf0.clone().requires_grad_(True)
    objective(conf).backward()
    eps = 1e-3
    fd = torch.zeros_like(conf0)
    with torch.no_grad():
        for i in range(conf0.numel()):
            up, down = conf0.clone(), conf0.clone()
            up[i] += eps
            down[i] -= eps
            fd[i] = (objective(up) - objective(down)) / (2 * eps)
    assert torch.allclose(conf.grad, fd, atol=2e-3), (conf.grad, fd)
    assert conf.grad.abs().sum() > 0


def test_two_path_gradient_by_hand():
    """2p r0(0, x) & 0.7 r1(x, y): every y is reached best through x = 1 (conf 0.9); y = 3 and 4 also use
    r1(1, y). d/dc(0,0,1) = 6 entities; d/dc(1,1,3) = d/dc(1,1,4) = 0.7; nothing else."""
    g = graph()
    conf = g.conf.clone().requires_grad_(True)
    u = utilities([QUERIES["2p"]], conf)[0]
    assert torch.isfinite(u).all()
    u.sum().backward()
    want = {(0, 0, 1): 6.0, (1, 1, 3): 0.7, (1, 1, 4): 0.7}
    for h, r, t, grad in zip(
        g.head.tolist(), g.rel.tolist(), g.tail.tolist(), conf.grad.tolist(), strict=True
    ):
        assert grad == pytest.approx(want.get((h, r, t), 0.0), abs=1e-6), (h, r, t)


def test_batch_of_several_shapes_supports_backward():
    queries = [QUERIES[k] for k in ("1p", "2p", "2il", "2p", "ip", "2u")]
    conf = graph().conf.clone().requires_grad_(True)
    u = utilities(queries, conf)
    with torch.no_grad():
        plain = utilities(queries, graph().conf)
    assert torch.equal(u.detach(), plain)  # autograd changes no value
    loss = torch.where(torch.isfinite(u), u, torch.zeros(())).pow(2).sum()
    loss.backward()
    # the sum of per-query gradients: the batch is the same computation as one query at a time
    total = torch.zeros_like(conf)
    for query in queries:
        c = graph().conf.clone().requires_grad_(True)
        v = utilities([query], c)
        torch.where(torch.isfinite(v), v, torch.zeros(())).pow(2).sum().backward()
        total += c.grad
    assert torch.allclose(conf.grad, total, atol=1e-5)


# entries=1: every batch row is examined alone when routing gradients
@pytest.mark.parametrize("entries", [1 << 22, 1])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=case())
def test_maxplus_gradient_routes_each_entry_to_a_maximiser(entries, c):
    """Values with autograd equal the fast path's; d out[b, o] / d state is one unit at a maximiser s, so
    row b of d(sum of finite out)/d state sums to its number of finite entries, on maximisers only."""
    import pipeline.engine.maxplus as mp

    old, mp._GRAD_ENTRIES = mp._GRAD_ENTRIES, entries
    try:
        _check_routing(c)
    finally:
        mp._GRAD_ENTRIES = old


def _check_routing(c):
    n, facts, state, atoms = c
    arr = (
        [np.array(x) for x in zip(*facts, strict=True)]
        if facts
        else [np.zeros(0, np.int64)] * 3 + [np.zeros(0)]
    )
    adj = Adjacency.from_graph(
        GraphTensors.from_arrays(arr[0], arr[1], arr[2], arr[3].astype(np.float32), n, 2)
    )
    parts, dense = [], np.zeros((len(state), n, n))
    for per_atom in atoms:
        from_head = per_atom[0][4]
        params = AtomParams(*(torch.tensor([a[i] for a in per_atom]) for i in range(4)))
        parts.append(RelationMatrix(adj, params, from_head))
        for b, (r, alpha, beta, neg, _) in enumerate(per_atom):
            dense[b] += dense_matrix(n, facts, r, alpha, beta, neg, from_head)
    m = parts[0] if len(parts) == 1 else SumMatrix(parts)
    s0 = torch.from_numpy(state)
    with torch.no_grad():
        plain = maxplus(s0, m)
    st = s0.clone().requires_grad_(True)
    out = maxplus(st, m)
    assert torch.equal(out.detach(), plain)
    fin = torch.isfinite(out)
    if not fin.any():
        return
    out[fin].sum().backward()
    grad = st.grad.numpy()
    assert np.allclose(grad.sum(1), fin.sum(1).numpy())
    terms = state.astype(np.float64)[:, :, None] + dense  # (B, s, o)
    best = terms.max(axis=1)
    is_max = np.isclose(terms, best[:, None, :], atol=1e-5) & np.isfinite(best)[:, None, :]
    assert (grad >= 0).all()
    assert not (grad > 0)[~is_max.any(axis=2)].any()
