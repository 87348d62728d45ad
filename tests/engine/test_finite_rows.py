"""The sparse rows of a multi-edge where every atom needs a fact: where each
part's default is -inf (a positive atom with alpha > 0), SumMatrix.finite_rows intersects the parts'
gathered rows after the alpha tests instead of merging their union. Checked against rows() (the union
path) entry for entry and bit for bit, by hand, and end to end against the brute-force oracle; and the
numpy column maxima and front covers of the floor path against their torch versions."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.engine.adjacency as adjacency
from pipeline.engine import Adjacency, search_batch
from pipeline.engine.atoms import AtomParams, RelationMatrix, SumMatrix
from pipeline.softquery import Atom, Conjunction, Const, Query, Var
from tests.engine.oracle import dense_conf, oracle
from tests.engine.test_multi_edges import graphs
from tests.engine.test_oracle import assert_same, graph_of

X, Y = Var("x"), Var("y")
ALPHAS = [0.0, 0.25, 0.5, 0.5, 0.75]
BETAS = [0.0, 0.5, 1.0, 2.0, float("inf")]


def entries(pair: torch.Tensor, o: torch.Tensor, val: torch.Tensor) -> list[tuple[int, int, int]]:
    """The entries as sorted (pair, o, float32 bit pattern of the value): equality is bit for bit."""
    bits = val.contiguous().view(torch.int32).tolist()
    return sorted(zip(pair.tolist(), o.tolist(), bits, strict=True))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.data())
def test_finite_rows_are_the_finite_entries_of_the_union(g, data):
    """Random graphs, 2 or 3 parts in any orientation, per batch element a drawn relation, alpha,
    beta (an infinite one too) and negation; random rows (b, s), repeats allowed."""
    n, r, facts = g
    adj = Adjacency.from_graph(graph_of(n, r, facts))
    bsz = data.draw(st.integers(1, 4))
    parts = []
    for _ in range(data.draw(st.integers(2, 3))):
        params = AtomParams(
            torch.tensor(data.draw(st.lists(st.integers(0, r - 1), min_size=bsz, max_size=bsz))),
            torch.tensor(data.draw(st.lists(st.sampled_from(ALPHAS), min_size=bsz, max_size=bsz))),
            torch.tensor(data.draw(st.lists(st.sampled_from(BETAS), min_size=bsz, max_size=bsz))),
            torch.tensor(data.draw(st.lists(st.booleans(), min_size=bsz, max_size=bsz))),
        )
        parts.append(RelationMatrix(adj, params, data.draw(st.booleans())))
    m = SumMatrix(parts)
    k = data.draw(st.integers(0, 8))
    b = torch.tensor(data.draw(st.lists(st.integers(0, bsz - 1), min_size=k, max_size=k)), dtype=torch.int64)
    s = torch.tensor(data.draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k)), dtype=torch.int64)
    pair, o, val = m.rows(b, s)
    fin = ~torch.isneginf(val)
    want = entries(pair[fin], o[fin], val[fin])
    got_pair, got_o, got_val = m.finite_rows(b, s)
    got = entries(got_pair, got_o, got_val)
    # rows whose parts all need a fact give exactly their finite entries; the others all of rows()
    need = torch.ones(b.shape, dtype=torch.bool)
    for p in parts:
        need &= torch.isinf(p.default[b]) & torch.isfinite(p.params.beta[b])
    rest = entries(*(x[~need[pair] & ~fin] for x in (pair, o, val)))
    assert got == sorted(want + rest)


def test_an_entry_missing_a_part_or_below_an_alpha_is_dropped_by_hand():
    """r0: (0, 1) 0.9, (0, 2) 0.9, (0, 3) 0.9; r1: (0, 1) 0.6, (0, 3) 0.2. With alpha 0.5 on both atoms
    (betas 1 and 2), from row s = 0: column 1 is stored in both and passes (0.9 + 1.2 = 2.1), column 2
    misses r1, column 3 fails r1's alpha: only (0, 1) is left."""
    adj = Adjacency.from_graph(
        graph_of(4, 2, [(0, 0, 1, 0.9), (0, 0, 2, 0.9), (0, 0, 3, 0.9), (0, 1, 1, 0.6), (0, 1, 3, 0.2)])
    )

    def part(rel: int, beta: float) -> RelationMatrix:
        one = torch.tensor([rel]), torch.tensor([0.5]), torch.tensor([beta]), torch.tensor([False])
        return RelationMatrix(adj, AtomParams(*one), True)

    m = SumMatrix([part(0, 1.0), part(1, 2.0)])
    pair, o, val = m.finite_rows(torch.tensor([0]), torch.tensor([0]))
    assert (pair.tolist(), o.tolist()) == ([0], [1])
    assert val.item() == np.float32(0.9) + np.float32(2.0) * np.float32(0.6)
    assert m.rows(torch.tensor([0]), torch.tensor([0]))[1].tolist() == [1, 2, 3]  # the union path


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.data())
def test_2m_with_required_atoms_matches_the_oracle(g, data):
    """2m queries with alpha > 0 on the multi-edge (its rows go through finite_rows when the anchor's
    state is sparse), beside alpha-0 ones in the same batch: the brute-force oracle's utilities."""
    n, r, facts = g
    graph = graph_of(n, r, facts)
    queries = []
    for _ in range(data.draw(st.integers(1, 6))):
        e = Const(data.draw(st.integers(0, n - 1)))
        atoms = [Atom(e, data.draw(st.integers(0, r - 1)), X, data.draw(st.sampled_from(ALPHAS)), 1.0)]
        for _ in range(2):
            h, t = (X, Y) if data.draw(st.booleans()) else (Y, X)
            atoms.append(
                Atom(
                    h,
                    data.draw(st.integers(0, r - 1)),
                    t,
                    data.draw(st.sampled_from(ALPHAS)),
                    data.draw(st.sampled_from(BETAS[:4])),
                )
            )
        queries.append(Query((Conjunction(tuple(atoms)),)))
    got = search_batch(queries, Adjacency.from_graph(graph))
    conf = dense_conf(n, r, facts)
    for q, row in zip(queries, got, strict=True):
        assert_same(row, oracle(q, conf))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 4),
            st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0]),
            st.sampled_from([0.0, 0.25, 0.5, 1.0]),
        ),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_front_cover_numpy_equals_torch(points, rnd):
    """The numpy cover (groups in runs, the CPU path) keeps the same positions as the torch one (any
    device, any order of the groups), equal points and -0.0 included; shuffled points keep the same."""
    points = sorted(points, key=lambda p: p[0])
    g = torch.tensor([p[0] for p in points], dtype=torch.int64)
    x = torch.tensor([p[1] for p in points], dtype=torch.float32)
    y = torch.tensor([p[2] for p in points], dtype=torch.float32)
    got = adjacency._front_cover(g, x, y)
    assert got.tolist() == adjacency._front_cover_torch(g, x, y).tolist()
    perm = list(range(len(points)))
    rnd.shuffle(perm)
    p = torch.tensor(perm)
    shuffled = adjacency._front_cover(g[p], x[p], y[p])  # groups out of order: the torch path
    assert sorted(p[shuffled].tolist()) == got.tolist()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.data())
def test_column_max_is_each_columns_largest_confidence(g, data):
    """_column_max (runs of the index, numpy): the columns with a fact and their largest confidence,
    by brute force over the facts, both orientations."""
    n, r, facts = g
    adj = Adjacency.from_graph(graph_of(n, r, facts))
    from_head, rel = data.draw(st.booleans()), data.draw(st.integers(0, r - 1))
    best: dict[int, float] = {}
    for h, rr, t, c in facts:
        if rr == rel:
            o = t if from_head else h
            best[o] = max(best.get(o, -1.0), float(np.float32(c)))
    cols, got = adj._column_max(from_head, rel)
    assert cols.dtype == torch.int64 and got.dtype == torch.float32
    assert dict(zip(cols.tolist(), got.tolist(), strict=True)) == best
    assert cols.tolist() == sorted(best)
