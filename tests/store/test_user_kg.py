"""`pipeline ingest NAME --from PATH | --from-store URI` end to end against the embedded FalkorDB: the
record, the store copy, `ls datasets`, pulling a graph the user already has (untouched), and a 16-entity
graph through sample -> train -> export -> query -> answer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.errors import DataFormatError
from pipeline.store.pull import pull_rows


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("PIPELINE_HOME", str(h))
    return h


def _run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout  # progress bars go to stderr


def _fail(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    return res.output


def toy_kg(n_entities: int = 16, n_facts: int = 120, seed: int = 0) -> str:
    """A named uncertain KG (TSV text): a ring keeps every entity connected, then random facts."""
    rng = np.random.default_rng(seed)
    names = [f"node_{i:02d}" for i in range(n_entities)]
    rels = ["links", "feeds", "blocks"]
    lines = [f"{names[i]}\t{rels[i % 3]}\t{names[(i + 1) % n_entities]}\t0.9" for i in range(n_entities)]
    for _ in range(n_facts - n_entities):
        h, t = rng.integers(0, n_entities, 2)
        lines.append(f"{names[h]}\t{rels[rng.integers(0, 3)]}\t{names[t]}\t{rng.uniform(0.05, 1):.3f}")
    return "head\trelation\ttail\tconfidence\n" + "\n".join(lines) + "\n"


def test_ingest_from_file_records_lists_and_loads_the_store(home: Path, fresh_store, tmp_path: Path) -> None:
    f = tmp_path / "kg.tsv"
    f.write_text(toy_kg())
    rep = json.loads(_run("ingest", "tiny", "--from", str(f), "--store", fresh_store.uri, "--seed", "1", "--json"))
    assert rep["entities"] == 16 and rep["relations"] == 3 and not rep["unchanged"]
    assert sum(rep["rows"].values()) == 120 and rep["store_report"]["facts"] > 0
    rows = json.loads(_run("ls", "datasets", "--json"))
    tiny = next(r for r in rows if r["name"] == "tiny")
    assert tiny["kind"] == "user" and tiny["source"] == str(f.resolve()) and tiny["checksum"] == rep["checksum"][:16]
    stats = json.loads(_run("stats", "tiny", "--store", fresh_store.uri, "--json"))
    assert stats["entities"] == 16
    again = json.loads(_run("ingest", "tiny", "--from", str(f), "--store", fresh_store.uri, "--seed", "1", "--json"))
    assert again["unchanged"] and again["store_report"]["skipped"]


def test_failed_ingest_leaves_no_record(home: Path, fresh_store, tmp_path: Path) -> None:
    f = tmp_path / "kg.csv"
    f.write_text("head,relation,tail,confidence\na,r,b,0.5\nb,r,a,1.2\n")
    out = _fail("ingest", "bad", "--from", str(f), "--store", fresh_store.uri)
    assert f"{f}, line 3, field 'confidence'" in out and out.count("\n") == 1
    assert not (home / "datasets" / "bad").exists()
    assert "bad" not in [r["name"] for r in json.loads(_run("ls", "datasets", "--json"))]
    assert "benchmark" in _fail("ingest", "ppi5k", "--from", str(f), "--store", fresh_store.uri)


def _users_graph(store) -> None:
    """What a practitioner already has: their own labels, a confidence property, one untyped extra."""
    store.run(
        "UNWIND $rows AS row MERGE (a:Person {name: row.a}) MERGE (b:Person {name: row.b}) "
        "CREATE (a)-[:TRUSTS {w: row.w, since: 2020}]->(b)",
        {"rows": [
            {"a": "ann", "b": "ben", "w": 0.9}, {"a": "ben", "b": "cy", "w": 0.6}, {"a": "cy", "b": "ann", "w": 0.3},
            {"a": "ann", "b": "cy", "w": 0.75}, {"a": "ben", "b": "ann", "w": 0.5}, {"a": "cy", "b": "ben", "w": 0.2},
        ]},
    )
    store.run("MATCH (a:Person {name: 'ann'}), (b:Person {name: 'ben'}) CREATE (a)-[:MET]->(b)")  # no w: skipped


def _snapshot(store) -> list:
    return store.run(
        "MATCH (a:Person)-[r]->(b:Person) RETURN a.name AS a, type(r) AS t, r.w AS w, b.name AS b ORDER BY a, b, t"
    )


def test_pull_from_store_reads_without_touching(home: Path, fresh_store) -> None:
    _users_graph(fresh_store)
    before = _snapshot(fresh_store)
    rows = pull_rows(fresh_store, "w")
    assert rows.values.tolist() == [
        ["ann", "TRUSTS", "ben", 0.9], ["ann", "TRUSTS", "cy", 0.75], ["ben", "TRUSTS", "ann", 0.5],
        ["ben", "TRUSTS", "cy", 0.6], ["cy", "TRUSTS", "ann", 0.3], ["cy", "TRUSTS", "ben", 0.2],
    ]
    assert pull_rows(fresh_store, "w", ["MET"]).empty
    rep = json.loads(_run(
        "ingest", "people", "--from-store", fresh_store.uri, "--confidence-property", "w",
        "--store", fresh_store.uri, "--split", "1,0,0", "--json",
    ))
    assert rep["entities"] == 3 and rep["rows"] == {"train": 6, "val": 0, "test": 0}
    assert _snapshot(fresh_store) == before  # the user's nodes and relationships are as they were
    # pulling again from the same graph does not read the pipeline's own copy back
    assert len(pull_rows(fresh_store, "w")) == 6
    again = json.loads(_run(
        "ingest", "people", "--from-store", fresh_store.uri, "--confidence-property", "w",
        "--store", fresh_store.uri, "--split", "1,0,0", "--json",
    ))
    assert again["unchanged"]
    fresh_store.run("MATCH (a:Person {name: 'cy'})-[r:TRUSTS]->(b:Person {name: 'ben'}) SET r.w = 0.4")
    changed = json.loads(_run(
        "ingest", "people", "--from-store", fresh_store.uri, "--confidence-property", "w",
        "--store", fresh_store.uri, "--split", "1,0,0", "--json",
    ))
    assert not changed["unchanged"] and changed["store_report"]["replaced"]


def test_pull_bad_confidence_names_the_relationship(home: Path, fresh_store) -> None:
    _users_graph(fresh_store)
    fresh_store.run("MATCH (a:Person {name: 'ann'})-[r:TRUSTS]->(b:Person {name: 'ben'}) SET r.w = 'high'")
    with pytest.raises(DataFormatError, match=r"ann -\[TRUSTS\]-> ben.*not a number"):
        pull_rows(fresh_store, "w")
    fresh_store.run("MATCH (a:Person {name: 'ann'})-[r:TRUSTS]->(b:Person {name: 'ben'}) SET r.w = 1.5")
    out = _fail("ingest", "people", "--from-store", fresh_store.uri, "--confidence-property", "w",
                "--store", fresh_store.uri)
    assert "field 'confidence'" in out and "outside [0, 1]" in out
    assert not (home / "datasets" / "people").exists()


def test_sixteen_entities_sample_train_export_query_answer(home: Path, fresh_store, tmp_path: Path) -> None:
    f = tmp_path / "kg.tsv"
    f.write_text(toy_kg())
    uri = fresh_store.uri
    _run("ingest", "tiny", "--from", str(f), "--store", uri)
    qdir = tmp_path / "queries"
    sample = json.loads(_run("sample", "tiny", "--out", str(qdir), "--types", "1p,2p", "--per-type", "5",
                             "--split", "test", "--store", uri, "--no-browse", "--json"))
    run_dir = tmp_path / "run"
    _run("train", "tiny", "--model", "ukge_logi", "--epochs", "3", "--dim", "8", "--out", str(run_dir),
         "--device", "cpu", "--json")
    # threshold 0.01 keeps nearly every pair: a 16-entity export is 9 KB, kept with a warning (the
    # guard is the export's size against the machine, not its share of pairs)
    kept = CliRunner().invoke(cli, ["export", str(run_dir), "--threshold", "0.01", "--out", str(tmp_path / "adj")])
    assert kept.exit_code == 0 and "the model calls most pairs true" in kept.stderr
    man = json.loads(_run("export", str(run_dir), "--threshold", "0.01", "--out", str(tmp_path / "adj"), "--json",
                          "--allow-dense"))
    assert man["n_entities"] == 16 and man["nnz"] > 0.3 * 16 * 16 * 3
    text = _run("export", str(run_dir), "--threshold", "0.01", "--out", str(tmp_path / "adj"), "--allow-dense")
    assert "% of all (h, r, t) pairs" in text and "134%" not in text
    got = json.loads(_run("query", "links(node_00, ?y)", "--dataset", "tiny", "--adjacency",
                          str(tmp_path / "adj"), "--top", "3", "--json"))
    assert got and all(a["name"].startswith("node_") for a in got)
    truth = json.loads(_run("query", "links(node_00, ?y)", "--dataset", "tiny", "--graph", "train", "--json"))
    assert truth[0]["name"] == "node_01"  # the ring fact, 0.9
    assert sample["queries"] == 10
    _run("answer", sample["file"], "--adjacency", str(tmp_path / "adj"), "--out", str(tmp_path / "ans"))
    answers = [p for p in (tmp_path / "ans").iterdir() if p.suffix == ".parquet"]
    assert answers and pd.read_parquet(answers[0])["query_id"].nunique() == 10
    _check_explained_answers(sample["file"], tmp_path / "adj", tmp_path / "ans_explained")


def _check_explained_answers(queries: str, adj: Path, out: Path) -> None:
    """`answer --explain 3`: names in the answers file, and witnesses whose atom values sum to the file's
    utility for every explained answer (the top 3 answers of each query)."""
    from pipeline.formats.answers import read_answers
    from pipeline.formats.witnesses import read_witnesses

    _run("answer", queries, "--adjacency", str(adj), "--out", str(out), "--explain", "3")
    (path,) = [p for p in out.iterdir() if p.suffix == ".parquet" and "witnesses" not in p.name]
    ans = read_answers(path).frame
    assert ans["entity_name"].str.startswith("node_").all() and ans["query"].str.contains("node_").all()
    wit, meta = read_witnesses(path.with_name(path.stem + ".witnesses.parquet"))
    assert meta["k"] == 3 and set(wit["source"]) <= {"predicted", "missing"}
    top = ans[(ans["rank"] <= 3) & (ans["utility"] > 0)]
    assert len(top) > 0
    got = wit.groupby(["query_id", "entity"])["value"].sum()
    assert len(got) == len(top)
    for qid, e, u in zip(top["query_id"], top["entity"], top["utility"], strict=True):
        assert got[(qid, e)] == pytest.approx(float(u), abs=1e-5)


@pytest.mark.neo4j
def test_pull_over_bolt_equals_native(bolt_and_native) -> None:
    """The pull's Cypher through the official neo4j driver (FalkorDB's Bolt) reads the same rows."""
    bolt, native = bolt_and_native
    _users_graph(native)
    assert pull_rows(bolt, "w").values.tolist() == pull_rows(native, "w").values.tolist()
    assert len(pull_rows(bolt, "w", ["TRUSTS"])) == 6
