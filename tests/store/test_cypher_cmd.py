"""`pipeline cypher "STATEMENT" [--param NAME=VALUE ...] [--json] [--store URI]` against the embedded store
(started on demand, logged in from its credentials file) and by URI: rows as a table or one JSON document,
parameters typed from JSON, a rejected statement or a bad --param as one line and exit code 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.store import embedded
from pipeline.store.statement import parse_params


def invoke(*args: str):
    return CliRunner().invoke(cli, ["cypher", *args])


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path))
    monkeypatch.delenv("PIPELINE_STORE", raising=False)
    yield tmp_path
    embedded.stop()


def test_writes_then_reads_the_embedded_store_as_a_table_and_as_json(home):
    made = invoke("CREATE (:Query {dataset: $d, text: $t, n: $n})", "--param", "d=ppi5k", "--param",
                  "t=binding(a, ?y)", "--param", "n=3")
    assert made.exit_code == 0, made.output
    assert embedded.status() is not None  # started on demand, logged in by itself
    table = invoke("MATCH (q:Query {dataset: $d}) RETURN q.text AS text, q.n AS n, [1, 2] AS l, q AS node",
                   "--param", "d=ppi5k")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["text", "n", "l", "node"] and set(lines[1]) <= {"-", " "}
    assert lines[2].startswith("binding(a, ?y)  3  [1, 2]  {")
    doc = json.loads(invoke("MATCH (q:Query) RETURN q.text AS text, q.n AS n", "--json").stdout)
    assert doc == [{"text": "binding(a, ?y)", "n": 3}]  # typed from JSON: 3 is a number, the text a string
    # the address `store status` prints works as --store too (the embedded server's own credentials)
    uri = embedded.status().uri + "/pipeline"
    by_uri = invoke("MATCH (q:Query) RETURN count(q) AS n", "--store", uri, "--json")
    assert json.loads(by_uri.stdout) == [{"n": 1}]


def test_a_rejected_statement_is_one_line_and_exit_code_2(home):
    bad = invoke("MATC (n) RETURN n")
    assert bad.exit_code == 2
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: FalkorDB rejected the query") and "MATC" in lines[0]
    assert "Traceback" not in bad.output


def test_bad_params_are_refused_before_the_store_is_started(home):
    for args, needle in (
        (["RETURN $x", "--param", "x"], "NAME=VALUE"),
        (["RETURN $x", "--param", "1x=2"], "NAME=VALUE"),
        (["RETURN $x", "--param", "x=1", "--param", "x=2"], "twice"),
        (["   "], "empty"),
    ):
        res = invoke(*args)
        assert res.exit_code == 2 and needle in res.stderr, res.output
    assert embedded.status() is None


def test_param_values_are_json_when_they_are_json():
    assert parse_params(["a=1", "b=0.5", "c=true", "d=null", 'e=[1, "x"]', 'f="007"', "g=ann", "h="]) == {
        "a": 1, "b": 0.5, "c": True, "d": None, "e": [1, "x"], "f": "007", "g": "ann", "h": "",
    }  # fmt: skip
