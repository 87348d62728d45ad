"""Witnesses: the assignment the engine reports for an answer reproduces the engine's utility, and no
assignment gives more (brute force over every assignment, tests/engine/oracle.py); hand-made cases fix the
branch of a disjunction, the default of a missing fact and the lower bound of a capped cycle."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.engine import solve
from pipeline.engine.witness import find_witnesses
from pipeline.softquery import QueryGraph, Var, parse
from pipeline.softquery.model import FREE, Query
from tests.engine.oracle import atom_value, dense_conf, oracle
from tests.engine.test_oracle import cyclic_query, graph_of, random_query, tiny_kg


def assignment_value(q: Query, branch: int, env: dict[Var, int], conf: np.ndarray) -> float:
    """Independent of the engine: the branch's atoms valued on the dense confidences (float64 sum)."""
    total = 0.0
    for a in q.conjunctions[branch].atoms:
        h = env[a.head] if isinstance(a.head, Var) else a.head.eid
        t = env[a.tail] if isinstance(a.tail, Var) else a.tail.eid
        total += atom_value(a, conf[a.relation, h, t])
    return total


def check_witnesses(q: Query, n: int, r: int, facts: list) -> None:
    g = graph_of(n, r, facts)
    conf = dense_conf(n, r, facts)
    util = solve([q], g).utility[0].double().numpy()
    best = oracle(q, conf)  # the max over every assignment and branch
    entities = [e for e in range(n) if np.isfinite(util[e])]
    for w in find_witnesses(q, g, entities):
        u = util[w.answer]
        assert abs(w.utility - u) <= 1e-6
        assert abs(w.total - u) <= 1e-6, (w, u)
        env = {**w.assignment, FREE: w.answer}
        assert set(w.assignment) == set(q.conjunctions[w.branch].variables()) - {FREE}
        assert abs(assignment_value(q, w.branch, env, conf) - u) <= 1e-6
        assert abs(best[w.answer] - w.total) <= 1e-6  # no other assignment gives more
        for use in w.atoms:  # the confidence shown is the graph's (0 and found=False when missing)
            assert use.confidence == conf[use.atom.relation, use.head, use.tail]
            assert use.found == any(h == use.head and rr == use.atom.relation and t == use.tail
                                    for h, rr, t, _ in facts)
    for w in find_witnesses(q, g, [e for e in range(n) if not np.isfinite(util[e])]):
        assert w.branch == -1 and w.atoms == ()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_witness_reproduces_utility_and_is_optimal(data):
    n, r, facts = data.draw(tiny_kg())
    check_witnesses(data.draw(random_query(n, r)), n, r, facts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_witness_on_cycles(data):
    n, r, facts = data.draw(tiny_kg())
    q = data.draw(cyclic_query(n, r))
    assert QueryGraph(q.conjunctions[0]).has_cycle
    check_witnesses(q, n, r, facts)


def test_two_hop_witness_by_hand():
    # 0 -r0-> 1 (0.9), 0 -r0-> 2 (0.4); 1 -r1-> 3 (0.5), 2 -r1-> 3 (1.0): u(3) = max(1.4, 1.4) -> tie, ?x=1
    facts = [(0, 0, 1, 0.9), (0, 0, 2, 0.4), (1, 1, 3, 0.5), (2, 1, 3, 1.0)]
    g = graph_of(4, 2, facts)
    q = parse("#0(#0, ?x) & #1(?x, ?y)")
    (w,) = find_witnesses(q, g, [3])
    assert w.assignment == {Var("x"): 1}  # ties: the lowest entity id
    assert [(u.head, u.tail, u.confidence) for u in w.atoms] == [(0, 1, np.float32(0.9)), (1, 3, 0.5)]
    assert abs(w.total - 1.4) < 1e-6 and w.branch == 0


def test_disjunction_branch_and_missing_default():
    # branch 0: r0(0, y) = 0.3 for y=1; branch 1: !r1(2, y, 0, 2) with no stored fact = 2 * (1 - 0) = 2
    facts = [(0, 0, 1, 0.3)]
    g = graph_of(3, 2, facts)
    q = parse("#0(#0, ?y) | !#1(#2, ?y, 0, 2)")
    (w,) = find_witnesses(q, g, [1])
    assert w.branch == 1 and w.total == 2.0
    (use,) = w.atoms
    assert not use.found and use.confidence == 0.0 and use.atom.negated and use.value == 2.0


def test_capped_cycle_witness_is_a_lower_bound():
    facts = [(0, 0, 1, 0.5), (1, 0, 2, 0.5), (2, 0, 0, 0.5), (0, 0, 2, 0.9), (2, 0, 1, 0.9), (1, 0, 0, 0.9)]
    g = graph_of(3, 1, facts)
    q = parse("#0(?y, ?x, 0.2) & #0(?x, ?z, 0.2) & #0(?z, ?y, 0.2)")
    exact = oracle(q, dense_conf(3, 1, facts))
    capped = solve([q], g, cycle_cap=1)
    assert bool(capped.approximate[0])
    # Binding ?y to the answer breaks this triangle, so the witness search is exact even under the cap: it
    # may beat the capped (lower-bound) utility, never the exact one.
    for w in find_witnesses(q, g, [0, 1, 2], cycle_cap=1):
        assert capped.utility[0][w.answer] - 1e-6 <= w.total <= exact[w.answer] + 1e-6
        assert abs(w.total - exact[w.answer]) <= 1e-6
    assert all(not w.approximate for w in find_witnesses(q, g, [0, 1, 2]))
