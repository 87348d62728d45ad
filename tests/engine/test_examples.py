"""Hand-computed examples (design section 1 semantics), including a job-candidate query in the spirit of
the paper's motivating example."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipeline.core.errors import PipelineError
from pipeline.core.kg import GraphTensors
from pipeline.engine import search_batch, search_query, top_answers
from pipeline.softquery import Atom, Const, Query, Vocabulary, parse

NAMES = ["alice", "bob", "carol", "python", "leadership", "dev ops"]
VOCAB = Vocabulary.from_names(NAMES, ["hasskill", "knows"])
FACTS = [  # (head, relation, tail, confidence)
    ("alice", "hasskill", "python", 0.9),
    ("alice", "hasskill", "leadership", 0.4),
    ("alice", "hasskill", "dev ops", 0.8),
    ("bob", "hasskill", "python", 0.6),
    ("bob", "hasskill", "leadership", 0.8),
    ("carol", "hasskill", "python", 0.3),
    ("carol", "hasskill", "leadership", 0.9),
    ("carol", "hasskill", "dev ops", 0.2),
    ("alice", "knows", "bob", 1.0),
    ("carol", "knows", "alice", 0.5),
]
NEG = -math.inf


@pytest.fixture(scope="module")
def jobs() -> GraphTensors:
    e = {n: i for i, n in enumerate(NAMES)}
    r = {"hasskill": 0, "knows": 1}
    h, rr, t, c = zip(*[(e[a], r[b], e[d], x) for a, b, d, x in FACTS], strict=True)
    return GraphTensors.from_arrays(np.array(h), np.array(rr), np.array(t), np.array(c, np.float32), 6, 2)


# Needs python (alpha .25, beta 3), leadership (alpha 0, beta 2), and NOT dev ops (alpha .5, beta 1):
#   alice: 3*.9 + 2*.4 + (1-.8 = .2 < .5 -> -inf)      = -inf
#   bob:   3*.6 + 2*.8 + (dev ops missing: 1*(1-0))     = 1.8 + 1.6 + 1 = 4.4
#   carol: 3*.3 + 2*.9 + 1*(1-.2)                        = .9 + 1.8 + .8 = 3.5
#   skills: hasskill(skill, python) missing, 0 < .25    = -inf
HIRE = 'hasskill(?y, python, 0.25, 3) & hasskill(?y, leadership, 0, 2) & !hasskill(?y, "dev ops", 0.5, 1)'
# Knows someone with leadership >= .6 (beta 2); knows has alpha 0, so a missing `knows` adds 0:
#   alice: knows bob 1 + 2*.8 = 2.6;  everyone: x = carol (not known) 0 + 2*.9 = 1.8, x = bob 0 + 1.6
REFER = "knows(?y, ?x) & hasskill(?x, leadership, 0.6, 2)"


def test_job_candidates(jobs):
    u = search_query(parse(HIRE, VOCAB), jobs)
    assert u.tolist() == pytest.approx([NEG, 4.4, 3.5, NEG, NEG, NEG], abs=1e-6)


def test_referral_existential_with_default(jobs):
    u = search_query(parse(REFER, VOCAB), jobs)
    assert u.tolist() == pytest.approx([2.6, 1.8, 1.8, 1.8, 1.8, 1.8], abs=1e-6)


def test_disjunction_and_answers(jobs):
    u = search_query(parse(f"{HIRE} | {REFER}", VOCAB), jobs)
    assert u.tolist() == pytest.approx([2.6, 4.4, 3.5, 1.8, 1.8, 1.8], abs=1e-6)
    ids, vals = top_answers(u)
    assert ids.tolist() == [1, 2, 0, 3, 4, 5]  # ties at 1.8 by entity id
    assert vals.tolist() == pytest.approx([4.4, 3.5, 2.6, 1.8, 1.8, 1.8], abs=1e-6)
    assert top_answers(u, k=2)[0].tolist() == [1, 2]


def test_alpha_is_inclusive_and_missing_fact_fails_with_alpha(jobs):
    # bob's leadership is exactly .8: c >= alpha keeps it; with alpha > 0 a missing fact is -inf
    u = search_query(parse("hasskill(?y, leadership, 0.8, 0.5)", VOCAB), jobs)
    assert u.tolist() == pytest.approx([NEG, 0.4, 0.45, NEG, NEG, NEG], abs=1e-6)


def test_negated_atom_values(jobs):
    # !hasskill(?y, python) with alpha .2: 1-c >= .2 needed; missing -> beta*1
    u = search_query(parse("!hasskill(?y, python, 0.2, 2)", VOCAB), jobs)
    assert u.tolist() == pytest.approx([NEG, 0.8, 1.4, 2.0, 2.0, 2.0], abs=1e-6)


def test_constant_atom_and_free_variable_absent(jobs):
    # no ?y (the parser refuses it for users; the engine defines it): the same value for every entity;
    # knows(alice, bob) = 1 (beta .5), knows(bob, alice) missing
    alice, bob, knows = NAMES.index("alice"), NAMES.index("bob"), 1
    q = Query.of([Atom(Const(alice), knows, Const(bob), 0.0, 0.5), Atom(Const(bob), knows, Const(alice), negated=True)])
    assert search_query(q, jobs).tolist() == pytest.approx([1.5] * 6, abs=1e-6)
    u = search_query(Query.of([Atom(Const(bob), knows, Const(alice), 0.1)]), jobs)
    assert torch.isneginf(u).all()


def test_batch_matches_single(jobs):
    texts = [HIRE, REFER, f"{HIRE} | {REFER}", "hasskill(?y, python)", "hasskill(?x, ?y) & knows(?y, ?x)"]
    qs = [parse(t, VOCAB) for t in texts]
    batch = search_batch(qs, jobs)
    for q, row in zip(qs, batch, strict=True):
        assert torch.equal(row, search_query(q, jobs))


def test_top_answers_excludes_nonpositive_and_inf():
    u = torch.tensor([0.0, -1.0, NEG, 0.5, 2.0, 0.5])
    ids, vals = top_answers(u)
    assert ids.tolist() == [4, 3, 5] and vals.tolist() == [2.0, 0.5, 0.5]


def test_out_of_range_ids_are_errors(jobs):
    with pytest.raises(PipelineError, match="entity id #99"):
        search_query(parse("#0(#99, ?y)"), jobs)
    with pytest.raises(PipelineError, match="relation id #7"):
        search_query(parse("#7(#0, ?y)"), jobs)


def test_replaced_confidences_never_reuse_the_memo(jobs):
    """An Adjacency with new confidences (dataclasses.replace, as calibration does) must not see arrays
    memoised from the old ones."""
    from dataclasses import replace

    from pipeline.engine import Adjacency

    adj = Adjacency.from_graph(jobs)
    qs = [parse(REFER, VOCAB)] * 8 + [parse("hasskill(?x, ?y) & knows(?x, ?y, 0, 2)", VOCAB)] * 8
    before = search_batch(qs, adj)  # warms the memo (8 rows of one relation take the wide path)
    halved = replace(
        adj, fwd=replace(adj.fwd, conf=adj.fwd.conf / 2), bwd=replace(adj.bwd, conf=adj.bwd.conf / 2)
    )
    half_graph = GraphTensors.from_arrays(
        jobs.head.numpy(), jobs.rel.numpy(), jobs.tail.numpy(), jobs.conf.numpy() / 2, 6, 2
    )
    assert torch.equal(search_batch(qs, halved), search_batch(qs, half_graph))
    assert not torch.equal(search_batch(qs, halved), before)


@pytest.mark.parametrize("copies", [1, 16])  # 16 rows of one relation take the wide streaming path
@pytest.mark.parametrize(
    "text", [REFER.replace("0.6", "0"), "hasskill(?x, ?y) & knows(?x, ?y, 0, 2) & knows(alice, ?x)"]
)
def test_utilities_are_differentiable_in_the_confidences(jobs, text, copies):
    """Calibration L trains through the engine. With alpha 0 and positive atoms, u(w * c) = w * u(c),
    so d sum(u) / dw at w = 1 is sum(u)."""
    from dataclasses import replace

    from pipeline.engine import Adjacency

    adj = Adjacency.from_graph(jobs)
    w = torch.ones((), requires_grad=True)
    scaled = replace(
        adj,
        fwd=replace(adj.fwd, conf=adj.fwd.conf * w),
        bwd=replace(adj.bwd, conf=adj.bwd.conf * w),
        diag_conf=adj.diag_conf * w,
    )
    u = search_batch([parse(text, VOCAB)] * copies, scaled)
    assert torch.isfinite(u).all()
    u.sum().backward()
    assert float(w.grad) == pytest.approx(float(u.sum().detach()), rel=1e-5)
