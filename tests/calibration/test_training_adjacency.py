"""Calibration L's training index (training_adjacency: values without autograd, gradients only through
the facts the engine reads) against autograd over every fact (calibrated_adjacency): the same losses
and utilities bit for bit, the same gradients of L's parameters to 1e-6 (absolute plus relative; the
sums over facts run in another order), on random toy graphs and every train shape, ties included."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.kg import GraphTensors
from pipeline.engine import Adjacency, search_batch
from pipeline.methods.src.affine import (
    AffineCalibration,
    ConfBuffers,
    calibrated_adjacency,
    query_relations,
    streamed_relations,
    training_adjacency,
)
from pipeline.methods.src.loss import batch_loss
from pipeline.softquery.model import FREE, Atom, Conjunction, Const, Query, Var

X = Var("x")
# Few distinct confidences and entities, so that sums tie and the engine's first-maximiser rule matters.
CONFS = (0.25, 0.5, 0.75, 0.9, 1.0)


def q(*atoms: Atom) -> Query:
    return Query((Conjunction(atoms),))


def shapes(a: int, b: int, r: int, s: int) -> dict[str, Query]:
    """Every train shape of L (alphas 0, as L trains), anchored at entities a, b, relations r, s."""
    return {
        "1p": q(Atom(Const(a), r, FREE)),
        "2p": q(Atom(Const(a), r, X), Atom(X, s, FREE)),
        "2i": q(Atom(Const(a), r, FREE), Atom(Const(b), s, FREE)),
        "2in": q(Atom(Const(a), r, FREE), Atom(Const(b), s, FREE, negated=True)),
        "2il": q(Atom(Const(a), r, FREE), Atom(X, s, FREE)),
        "2m": q(Atom(Const(a), r, X), Atom(X, s, FREE), Atom(X, r, FREE, beta=0.5)),
        "inv": q(Atom(FREE, r, Const(a)), Atom(X, s, FREE)),
        "loop": q(Atom(Const(a), r, FREE), Atom(FREE, s, FREE)),
    }


@st.composite
def problem(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(3, 7))
    m = draw(st.integers(1, 3))
    cells = draw(
        st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, m - 1), st.integers(0, n - 1)), max_size=30)
    )
    facts = sorted((h, r, t, draw(st.sampled_from(CONFS))) for h, r, t in cells)
    picks = draw(
        st.lists(
            st.tuples(
                st.sampled_from(sorted(shapes(0, 0, 0, 0))),
                st.integers(0, n - 1),
                st.integers(0, n - 1),
                st.integers(0, m - 1),
                st.integers(0, m - 1),
            ),
            min_size=1,
            max_size=6,
        )
    )
    queries = [shapes(a, b, r, s)[name] for name, a, b, r, s in picks]
    seed = draw(st.integers(0, 2**16))
    subset = draw(st.booleans())
    return n, m, facts, queries, seed, subset


def toy(n: int, m: int, facts: list[tuple]) -> GraphTensors:
    if not facts:
        empty = np.zeros(0, np.int64)
        return GraphTensors.from_arrays(empty, empty, empty, np.zeros(0, np.float32), n, m)
    h, r, t, c = (np.array(x) for x in zip(*facts, strict=True))
    return GraphTensors.from_arrays(h, r, t, c.astype(np.float32), n, m)


def random_l(n: int, m: int, seed: int, dim: int = 3) -> tuple[AffineCalibration, tuple[torch.Tensor, ...]]:
    gen = torch.Generator().manual_seed(seed)
    tables = tuple(torch.randn(k, dim, generator=gen) for k in (n, m, n))
    calib = AffineCalibration(dim, dim)
    with torch.no_grad():
        for p in calib.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    return calib, tables


def loss_and_grads(build, adj, calib, tables, queries, relations, true_u) -> tuple:
    calib.zero_grad()
    cal = build(adj, calib, tables, relations)
    pred = search_batch(queries, cal)
    loss = batch_loss(search_batch, queries, cal, true_u, 3, torch.Generator().manual_seed(1))
    loss.backward()
    # None: no fact reached that parameter (the same as a zero gradient to the optimiser)
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in calib.parameters()]
    return pred.detach(), loss.detach(), grads


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=problem())
def test_training_index_equals_autograd_over_every_fact(c) -> None:
    n, m, facts, queries, seed, subset = c
    adj = Adjacency.from_graph(toy(n, m, facts))
    calib, tables = random_l(n, m, seed)
    relations = query_relations(queries) if subset else None
    # targets: the utilities on a perturbed graph (so that the errors, hence the gradients, are not 0)
    rng = np.random.default_rng(seed)
    truth = [(h, r, t, float(rng.choice(CONFS))) for h, r, t, _ in facts]
    with torch.no_grad():
        true_u = search_batch(queries, toy(n, m, truth))
    old = loss_and_grads(calibrated_adjacency, adj, calib, tables, queries, relations, true_u)

    def lazy(adj, calib, tables, relations):  # noqa: ANN001, ANN202
        # as fit_affine builds it: only the streamed relations' arrays filled, the rest read on demand
        return training_adjacency(adj, calib, tables, relations, None, streamed_relations(queries))

    for build in (training_adjacency, lazy):
        new = loss_and_grads(build, adj, calib, tables, queries, relations, true_u)
        assert torch.equal(old[0], new[0])  # utilities bit for bit
        assert torch.equal(old[1], new[1])  # the loss bit for bit
        for a, b in zip(old[2], new[2], strict=True):
            assert torch.allclose(a, b, rtol=1e-6, atol=1e-6), (a, b)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=problem())
def test_routing_only_the_cells_the_loss_reads_gives_the_same_gradients(c) -> None:
    """search(..., need=mask) routes the gradients of the loss's cells alone (L's batch_loss does): the
    utilities and the gradients of L's parameters equal routing every cell, bit for bit, whether the
    dense rows' maximisers are found by streaming the relation or by the read cells' columns."""
    import pipeline.engine.maxplus as mp

    for share in (1, mp._COLUMN_SHARE):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mp, "_COLUMN_SHARE", share)  # 1: every dense row by its columns
            _routes_the_same(c)


def _routes_the_same(c) -> None:  # noqa: ANN001
    n, m, facts, queries, seed, _ = c
    adj = Adjacency.from_graph(toy(n, m, facts))
    calib, tables = random_l(n, m, seed)
    rng = np.random.default_rng(seed)
    true_u = torch.from_numpy(rng.choice([0.0, 0.0, 0.5, 1.0], size=(len(queries), n)).astype(np.float32))
    mask = torch.from_numpy(rng.random((len(queries), n)) < 0.3)
    got = []
    for need in (None, mask):
        calib.zero_grad()
        pred = search_batch(queries, training_adjacency(adj, calib, tables), need=need)
        loss = (pred - true_u).pow(2)[mask & torch.isfinite(pred)].sum()
        if loss.requires_grad:
            loss.backward()
        got.append((pred.detach(), [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in calib.parameters()]))
    assert torch.equal(got[0][0], got[1][0])
    for a, b in zip(got[0][1], got[1][1], strict=True):
        assert torch.equal(a, b), (a, b)


def test_training_index_values_are_calibrated_adjacencys() -> None:
    """Without autograd the two indexes hold the same conf arrays (the fast no-grad calibration is
    calibrate's arithmetic, bit for bit), with or without a relation subset."""
    rng = np.random.default_rng(0)
    n, m = 50, 4
    cells = {(int(h), int(r), int(t)) for h, r, t in rng.integers(0, [n, m, n], size=(400, 3))}
    facts = [(h, r, t, float(rng.random())) for h, r, t in sorted(cells)]
    adj = Adjacency.from_graph(toy(n, m, facts))
    calib, tables = random_l(n, m, 7, dim=5)
    for relations in (None, [1, 3], []):
        with torch.enable_grad():
            ref = calibrated_adjacency(adj, calib, tables, relations)
        with torch.no_grad():
            fast = calibrated_adjacency(adj, calib, tables, relations)
        new = training_adjacency(adj, calib, tables, relations)
        for got in (fast, new):
            assert torch.equal(got.fwd.conf, ref.fwd.conf.detach())
            assert torch.equal(got.bwd.conf, ref.bwd.conf.detach())
            assert torch.equal(got.diag_conf, ref.diag_conf.detach())
        assert not torch.equal(new.fwd.conf, adj.fwd.conf) or relations == []
    # buffers kept across steps (as fit_affine does): each step's arrays equal fresh ones, whatever the
    # relations of the step before
    buffers = ConfBuffers(adj)
    for relations in (None, [1, 3], [], [2], [0, 1], None, [3]):
        fresh = training_adjacency(adj, calib, tables, relations)
        kept = training_adjacency(adj, calib, tables, relations, buffers)
        assert torch.equal(kept.fwd.conf, fresh.fwd.conf) and torch.equal(kept.bwd.conf, fresh.bwd.conf)
        assert torch.equal(kept.diag_conf, fresh.diag_conf)


@pytest.mark.parametrize("relations, d_lambda, d_rho", [({1}, 1.0, 0.7), (None, 5.0, 4.3)])
def test_gradient_of_a_maxplus_winner_by_hand(relations, d_lambda, d_rho) -> None:
    """r0(0, ?x) & r1(?x, ?y) at alpha 0, L the identity (all weights 0): x = 1 (0.9) wins every y, y = 3
    through the stored fact r1(1, 3) (0.9 + 0.7 beats 0.5 + 0.8 and the defaults 0). With only r1
    calibrated, the gradient of the sum of utilities reaches L through that winner alone: d/d lambda = 1
    (one output entry), d/d rho = its confidence 0.7; a dropped winner gives 0. With every relation
    calibrated, the anchor fact r0(0, 1) adds 4 entries (y = 0..3): 5 and 4 * 0.9 + 0.7 = 4.3."""
    graph = toy(4, 2, [(0, 0, 1, 0.9), (0, 0, 2, 0.5), (1, 1, 3, 0.7), (2, 1, 3, 0.8)])
    adj = Adjacency.from_graph(graph)
    calib = AffineCalibration(1, 1)
    tables = (torch.ones(4, 1), torch.ones(2, 1), torch.ones(4, 1))
    query = q(Atom(Const(0), 0, X), Atom(X, 1, FREE))
    u = search_batch([query], training_adjacency(adj, calib, tables, relations))
    assert u.detach()[0].tolist() == pytest.approx([0.9, 0.9, 0.9, 1.6])
    u.sum().backward()
    assert calib.bias.grad.tolist() == pytest.approx([d_rho, d_lambda])
    assert calib.w_head.grad[0].tolist() == pytest.approx([d_rho, d_lambda])  # every feature is 1


def test_fit_affine_learns_what_autograd_over_every_fact_learns_and_shows_its_progress(
    toy_pipeline: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """fit_affine on the toy pipeline's export (3 epochs, batches of 8 mixing 1p, 2i, 2in, 2p): the fitted
    parameters and losses equal those of the same training with calibrated_adjacency's autograd (to 1e-6:
    the gradients differ in float summation order only); the bar shows epoch, batch and loss."""
    import pipeline.core.progress as progress

    monkeypatch.setattr(progress, "terminal", lambda: True)  # bars are drawn on a terminal (pytest captures)
    import pipeline.methods.src.affine as cal
    from pipeline.core.kg import observed_graph
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.formats.queryset import read_query_set
    from pipeline.models import load_run

    graph, _ = load_adjacency(toy_pipeline["export"])
    adj = Adjacency.from_graph(graph)
    model = load_run(toy_pipeline["run"])
    truth = Adjacency.from_graph(observed_graph(toy_pipeline["kg"], "train"))
    train = read_query_set(toy_pipeline["train"]).queries()
    cfg = cal.LConfig(epochs=3, batch_size=8, lr=0.01)
    fitted = []
    def autograd_over_every_fact(adj, calib, tables, relations, buffers=None, streamed=None):  # noqa: ANN001, ANN202
        return cal.calibrated_adjacency(adj, calib, tables, relations)

    for build in (cal.training_adjacency, autograd_over_every_fact):
        monkeypatch.setattr(cal, "training_adjacency", build)
        fitted.append(cal.fit_affine(model, adj, train, truth, search_batch, None, cfg, progress=True))
    (new, h_new), (old, h_old) = fitted
    assert h_new["shapes_used"] == h_old["shapes_used"] and not h_new["shapes_skipped"]
    for a, b in zip(new.parameters(), old.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-6)
        assert not torch.equal(a, torch.zeros_like(a))  # L moved: the comparison is not of two identities
    for e in ("1", "2", "3"):
        assert h_new["epochs"][e]["loss"] == pytest.approx(h_old["epochs"][e]["loss"], rel=1e-6)
    bar = capsys.readouterr().err
    n_batches = -(-len(train) // 8)
    assert "calibration L epoch 3/3" in bar and f"batch={n_batches}/{n_batches}" in bar and "loss=" in bar
