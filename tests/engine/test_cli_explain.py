"""`pipeline query --explain` end to end on the real PPI5k data set: the JSON witnesses reproduce the
utilities `pipeline query --json` prints, with names, sources and the branch of a disjunction."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli

TEXT = "binding(394.NGR_c00010, ?x, 0.5, 0.7) & activation(?x, ?y, 0.2) | !inhibition(#1, ?y, 0, 0.3) & #0(#1, ?y)"


def run(*args: str):
    return CliRunner().invoke(cli, ["query", *args])


def test_json_witnesses_reproduce_utilities(ppi5k):
    base = ["--dataset", "ppi5k", "--graph", "valid", "--top", "8", "--json"]
    plain = json.loads(run(TEXT, *base).stdout)
    res = run(TEXT, *base, "--explain")
    assert res.exit_code == 0, res.output
    recs = json.loads(res.stdout)
    assert [(r["eid"], r["name"], r["utility"]) for r in recs] == [
        (r["eid"], r["name"], r["utility"]) for r in plain
    ]
    names, rels = ppi5k.entity_names(), set(ppi5k.relation_names())
    facts = ppi5k.graph("valid")
    stored = {
        (rels_h, r, t): c
        for rels_h, r, t, c in zip(facts["h"], facts["r"], facts["t"], facts["conf"], strict=True)
    }
    rel_names = ppi5k.relation_names()
    for rec in recs:
        assert set(rec) >= {"eid", "name", "utility", "witness", "atoms", "branch"}
        assert sum(a["value"] for a in rec["atoms"]) == pytest.approx(rec["utility"], abs=1e-5)
        for v, x in rec["witness"].items():
            assert v.startswith("?") and names[x["eid"]] == x["name"]
        for a in rec["atoms"]:
            assert a["relation"] in rels and a["source"] in {"observed", "missing"}
            key = (names.index(a["head"]), rel_names.index(a["relation"]), names.index(a["tail"]))
            if a["source"] == "observed":
                assert a["confidence"] == pytest.approx(stored[key], abs=1e-6)
            else:
                assert key not in stored and a["confidence"] == 0.0
            if a.get("negated"):
                assert a["forbids"].startswith(f"{a['relation']}({a['head']}, {a['tail']})")
    assert {r["branch"] for r in recs} <= {0, 1}


def test_terminal_explanation_names_the_facts(ppi5k):
    res = run("binding(394.NGR_c00010, ?x, 0.5) & activation(?x, ?y)", "--dataset", "ppi5k",
              "--graph", "test", "--top", "2", "--explain")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[1].startswith("#1 ") and "utility" in lines[1]
    assert lines[2].startswith("   where ?x = ")
    assert lines[3].lstrip().startswith("binding(394.NGR_c00010, ") and "observed" in lines[3]


def test_explain_takes_a_number_as_answer_and_the_api_do(ppi5k):
    """`pipeline query --explain` was a flag while `answer --explain K` and `pl.query(explain=K)` take a number:
    now `--explain K` explains the top K answers shown (as pl.query does), `--explain` alone every one shown."""
    import pipeline as pl

    text = "binding(394.NGR_c00010, ?x, 0.5) & activation(?x, ?y)"
    base = ["--dataset", "ppi5k", "--graph", "test", "--top", "3", "--json"]
    every = json.loads(run(text, *base, "--explain").stdout)
    two = json.loads(run(text, *base, "--explain", "2").stdout)
    assert len(every) == 3 and two == every[:2]
    api = pl.query(text, dataset="ppi5k", graph="test", top=3, explain=2)
    assert [e.record for e in api.explanations] == two
    res = run(text, *base, "--explain", "-1")
    assert res.exit_code == 2 and "-1" in res.output
