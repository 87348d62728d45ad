"""Queries with cycles are bounded by default: an exact answer enumerates, nested, the
candidates of one variable per cycle; above a bound of that work a query without --cycle-cap is refused in
one line that names the option (which `pipeline answer` has now, as `pipeline query` had), instead of
running for hours, also when it comes from a (:Query) node of the store."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.errors import PipelineError
from pipeline.engine import Adjacency
from pipeline.engine.search import CYCLE_WORK_ENV, CycleWorkExceeded, cycle_work, solve
from pipeline.softquery import parse
from tests.engine.test_oracle import graph_of

# relation 0: 0->1, 1->2, 2->0, 0->2, 3->0; a triangle query over it
FACTS = [(0, 0, 1, 0.5), (1, 0, 2, 0.5), (2, 0, 0, 0.5), (0, 0, 2, 0.5), (3, 0, 0, 0.5)]
TRIANGLE = "#0(?a, ?b, 0.1) & #0(?b, ?c, 0.1) & #0(?c, ?a, 0.1) & #0(?a, ?y, 0.1)"


def test_the_cycle_work_by_hand(monkeypatch):
    adj = Adjacency.from_graph(graph_of(4, 1, FACTS))
    q = parse(TRIANGLE)
    # the search enumerates one cycle variable; its candidates must have an out-fact (as ?a/?b head) and an
    # in-fact (as tail): with both alphas > 0 an atom fails without a fact, so entities 0, 1, 2 qualify
    assert cycle_work(q.conjunctions[0], adj) == 3
    assert cycle_work(q.conjunctions[0], adj, cycle_cap=2) == 2
    # a second triangle sharing ?a: enumerating ?a (first in the plan) breaks both at once
    assert cycle_work(parse(TRIANGLE + " & #0(?a, ?d, 0.1) & #0(?d, ?e, 0.1) & #0(?e, ?a, 0.1)").conjunctions[0], adj) == 3
    # two triangles joined by a path: one enumeration per triangle, nested, 3 x 3
    two = parse(TRIANGLE + " & #0(?c, ?d, 0.1) & #0(?d, ?e, 0.1) & #0(?e, ?f, 0.1) & #0(?f, ?d, 0.1)")
    assert cycle_work(two.conjunctions[0], adj) == 9
    assert cycle_work(parse("#0(#0, ?y)").conjunctions[0], adj) == 1
    exact = solve([two], adj)
    monkeypatch.setenv(CYCLE_WORK_ENV, "8")
    with pytest.raises(CycleWorkExceeded, match=r"up to 9 candidate substitutions, more than the bound of 8.*--cycle-cap K"):
        solve([two], adj)
    capped = solve([two], adj, cycle_cap=3)  # a cap of the user's own: answered, bounded by it
    assert bool(capped.approximate[0]) is False and capped.utility.equal(exact.utility)
    monkeypatch.setenv(CYCLE_WORK_ENV, "nine")
    with pytest.raises(PipelineError, match=f"{CYCLE_WORK_ENV}='nine'"):
        solve([two], adj)


def test_a_stored_query_with_heavy_cycles_is_refused_not_hung_and_answer_takes_a_cap(tiny_flow, tmp_path, monkeypatch):
    store, name = tiny_flow["store"], tiny_flow["name"]
    text = ("links(?a, ?b) & links(?b, ?c) & links(?c, ?a) & links(?a, ?d) & links(?d, ?e) & links(?e, ?a) "
            "& links(?a, ?y)")
    store.run("MATCH (q:Query {dataset: $d, set: 'typed'}) DETACH DELETE q", {"d": name})
    store.run("CREATE (:Query {dataset: $d, text: $t})", {"d": name, "t": text})
    monkeypatch.setenv(CYCLE_WORK_ENV, "10")  # a tiny graph: a tiny bound shows the rule
    args = ["answer", "--from-store", "--adjacency", str(tiny_flow["adj"]), "--store", tiny_flow["uri"],
            "--out", str(tmp_path), "--workers", "1"]
    res = CliRunner().invoke(cli, args)
    errors = [ln for ln in res.stderr.replace("\r", "\n").splitlines() if ln.startswith("error:")]
    assert res.exit_code == 2 and len(errors) == 1 and "--cycle-cap K" in errors[0] and "Traceback" not in res.output
    res = CliRunner().invoke(cli, [*args, "--cycle-cap", "2", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["cycle_cap"] == 2 and report["path"]  # recorded with the method's settings
    got = json.loads(CliRunner().invoke(cli, ["query", text, "--dataset", name, "--adjacency", str(tiny_flow["adj"]),
                                              "--cycle-cap", "2", "--json"]).stdout)
    assert isinstance(got, list)
