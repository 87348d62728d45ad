"""`pipeline ingest`, `pipeline stats` and `pipeline store` as a user drives them: tables, JSON, one-line
errors with exit code 2, and nothing written on bad input."""

from __future__ import annotations

import json

import pytest

from pipeline.store.embedded import free_port
from tests.cli_checks import invoke, one_line_error
from tests.conftest import require_data


@pytest.fixture
def graph_uri(fresh_store):
    return f"falkordb://127.0.0.1:{fresh_store.server.port}/{fresh_store.graph}"


@pytest.mark.slow
def test_ingest_then_stats_json(graph_uri, fresh_store, ppi5k):
    first = invoke("ingest", "ppi5k", "--store", graph_uri, "--json")
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert (report["facts"], report["skipped"], report["store"]) == (
        len(ppi5k.graph("test")),
        False,
        graph_uri,
    )
    second = invoke("ingest", "ppi5k", "--store", graph_uri)
    assert second.exit_code == 0 and "unchanged" in second.stdout

    stats = invoke("stats", "ppi5k", "--store", graph_uri, "--json")
    assert stats.exit_code == 0, stats.output
    doc = json.loads(stats.stdout)
    assert doc["entities"] == 4999 and doc["facts"]["valid"] == len(ppi5k.graph("valid"))
    binding = doc["per_relation"][0]
    assert binding["name"] == "binding"
    # SQUK's published PPI5k levels of binding (all published rows, duplicates kept)
    assert [binding["p25"], binding["p50"], binding["p75"]] == [0.258, 0.388, 0.558]

    table = invoke("stats", "ppi5k", "--store", graph_uri)
    assert table.exit_code == 0
    assert table.stdout.splitlines()[1].split()[:3] == ["rid", "relation", "train"]


def test_bad_files_write_nothing(tmp_path, graph_uri, fresh_store):
    folder = tmp_path / "ppi5k"
    folder.mkdir()
    for f in require_data("ppi5k").iterdir():
        (folder / f.name).symlink_to(f)
    (folder / "train.tsv").unlink()
    (folder / "train.tsv").write_text("0\t0\t1\t0.5\n")
    one_line_error(
        invoke("ingest", "ppi5k", "--source", str(folder), "--store", graph_uri), "train.tsv", "md5"
    )
    assert fresh_store.run("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]


def test_unknown_dataset_and_store_down_are_one_line_errors(graph_uri):
    one_line_error(invoke("ingest", "ppi5", "--store", graph_uri), "unknown data set 'ppi5'", "ppi5k")
    port = free_port()
    one_line_error(
        invoke("stats", "ppi5k", "--store", f"falkordb://127.0.0.1:{port}"), "cannot reach FalkorDB"
    )
    one_line_error(invoke("stats", "ppi5k", "--store", "ftp://x"), "unknown store URI")
    one_line_error(
        invoke("stats", "ppi5k", "--store", graph_uri), "not in the store", "pipeline ingest ppi5k"
    )
    nope = invoke("stats", "nope", "--store", graph_uri)
    one_line_error(nope, "unknown data set 'nope'", "registered: cn15k, onet20k, ppi5k")
    assert "pipeline ingest" not in nope.stderr


def test_store_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path))
    assert invoke("store", "status").stdout.startswith("not running")
    try:
        started = invoke("store", "start")
        assert started.exit_code == 0 and started.stdout.startswith("started: falkordb://127.0.0.1:")
        assert invoke("store", "start").stdout.startswith("already running")
        status = json.loads(invoke("store", "status", "--json").stdout)
        assert status["running"] is True and status["data_dir"] == str(tmp_path / "store")
    finally:
        assert invoke("store", "stop").stdout.strip() == "stopped"
    assert invoke("store", "stop").stdout.strip() == "not running"


def test_ls_stores_is_the_backends_registry():
    """`pipeline ls stores`: each backend with its schemes and declared differences; an unknown scheme is
    one line naming the accepted forms."""
    rows = {r["name"]: r for r in json.loads(invoke("ls", "stores", "--json").stdout)}
    assert set(rows) == {"embedded", "falkordb", "neo4j"}
    assert set(rows["neo4j"]["schemes"].split(", ")) == {"bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc"}
    assert (rows["neo4j"]["write batch"], rows["neo4j"]["bulk load"], rows["falkordb"]["bulk load"]) == (30, "no", "yes")
    assert "drop graph" in rows["neo4j"]["cannot"]
    table = invoke("ls", "stores").stdout.splitlines()
    assert table[0].split()[:2] == ["name", "uri"] and len(table) == 5
    one_line_error(invoke("stats", "ppi5k", "--store", "redis://h:1"), "unknown store URI", "falkordb://", "bolt://")
