"""The stage end to end: query set file + browsable (:Query) nodes, and the `pipeline sample` /
`pipeline import-squk` commands (one-line errors, exit code 2, same output twice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.formats.queryset import read_query_set
from pipeline.sampling.run import sample_to_dir
from pipeline.stages.writeback import set_id


def test_sample_to_dir_writes_the_set_and_browsable_queries(tiny_kg, tiny_store, tmp_path):
    res = sample_to_dir(tiny_kg, tiny_store, tmp_path, split="test", types=["1p"], per_type=3, alpha="zero", beta="equal", seed=4, progress=False)
    qs = read_query_set(res["file"])
    assert res["file"].endswith("tiny_test_zero_equal.parquet") and len(qs) == 3 == res["browsable"]
    assert qs.meta["dataset"] == "tiny" and qs.meta["types"] == ["1p"] and set(qs.frame["seed"]) == {4}
    count = "MATCH (q:Query {dataset: 'tiny', set: $set})-[a:ANCHOR]->(e:Entity) RETURN q.qid AS qid, q.text AS text, e.eid AS eid, a.position AS pos ORDER BY qid"
    rows = tiny_store.run(count, {"set": set_id(qs)})
    assert [(r["text"], r["eid"], r["pos"]) for r in rows] == [
        (t, q.anchors()[0], 0) for t, q in zip(qs.frame["text"], qs.queries(), strict=True)
    ]
    sample_to_dir(tiny_kg, tiny_store, tmp_path, split="test", types=["1p"], per_type=3, alpha="zero", beta="equal", seed=4, progress=False)
    assert tiny_store.run(count, {"set": set_id(qs)}) == rows  # MERGE: a re-run adds nothing


def test_resampling_makes_a_new_set_and_never_mixes_anchors_or_answers(tiny_kg, tiny_store, tmp_path):
    """Sampling the same file name again with another seed (here into another folder) used to re-use the
    old (:Query) nodes: two anchors at position 0 and the old run's answers on the new queries."""
    from pipeline.core.kg import observed_graph
    from pipeline.formats.answers import read_answers, write_answers
    from pipeline.methods import SRC
    from pipeline.stages.answer import answer_query_set
    from pipeline.stages.writeback import write_back

    first = read_query_set(sample_to_dir(tiny_kg, tiny_store, tmp_path / "a", split="test", types=["1p"], per_type=3, alpha="zero", beta="equal", seed=1, progress=False)["file"])
    frame, _ = answer_query_set(first, SRC.over(observed_graph(tiny_kg, "test"), "tiny", backbone="m"), progress=False)
    meta = {"dataset": "tiny", "method": "m SRC", "query_set": str(first.path)}
    write_back(tiny_store, read_answers(write_answers(frame, tmp_path / "ans.parquet", meta)), first)
    second = read_query_set(sample_to_dir(tiny_kg, tiny_store, tmp_path / "b", split="test", types=["1p"], per_type=3, alpha="zero", beta="equal", seed=2, progress=False)["file"])
    assert Path(first.path).name == Path(second.path).name and set_id(first) != set_id(second)
    per_position = tiny_store.run(
        "MATCH (q:Query {dataset: 'tiny'})-[a:ANCHOR]->() RETURN q.set AS set, q.qid AS qid, a.position AS pos, "
        "count(a) AS n"
    )
    assert per_position and all(r["n"] == 1 for r in per_position)  # one anchor per position, never two
    new_answers = tiny_store.run(
        "MATCH (q:Query {dataset: 'tiny', set: $set})-[a:ANSWER]->() RETURN count(a) AS n", {"set": set_id(second)}
    )
    assert new_answers == [{"n": 0}]  # the first run's answers stay on the first run's queries
    old = tiny_store.run("MATCH (q:Query {set: $set})-[a:ANSWER]->() RETURN count(a) AS n", {"set": set_id(first)})
    assert old[0]["n"] > 0


def test_cli_errors_are_one_line(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["sample", "ppi5k", "--out", str(tmp_path), "--types", "1p,3p"])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "unknown query type '3p'" in res.output
    res = runner.invoke(cli, ["sample", "ppi5k", "--out", str(tmp_path), "--per-type", "-3"])
    assert res.exit_code == 2 and res.output == "error: --per-type -3: must be at least 1\n"
    bad = tmp_path / "test_type0001_soft_efo1_qaa.json"
    bad.write_text('{"(r1(s1,e1))&(r2(e1,f1))": [[{"r1": 0}, {"f1_answers": []}, {"f1_values": []}]]}')
    res = runner.invoke(cli, ["import-squk", "ppi5k", str(bad), "--out", str(tmp_path)])
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "test_type0001_soft_efo1_qaa.json, field 'query 0 of '(r1(s1,e1))&(r2(e1,f1))' s1'" in res.output


@pytest.mark.slow
def test_cli_sample_ppi5k_twice_gives_the_same_set(ppi5k, falkordb_store, tmp_path):
    from pipeline.store.ingest import ingest

    store = falkordb_store.fresh()
    try:
        ingest(ppi5k, store, progress=False)
        uri = f"falkordb://{store.host}:{store.port}/{store.graph}"
        args = [
            "sample",
            "ppi5k",
            "--store",
            uri,
            "--types",
            "2in,ip",
            "--per-type",
            "5",
            "--split",
            "valid",
            "--alpha",
            "low",
            "--beta",
            "random",
            "--seed",
            "3",
            "--json",
        ]
        runner = CliRunner()
        first = runner.invoke(cli, [*args, "--out", str(tmp_path / "a")])
        second = runner.invoke(cli, [*args, "--out", str(tmp_path / "b"), "--no-browse"])
        assert first.exit_code == 0, first.output
        doc = json.loads(first.stdout)
        assert doc["queries"] == 10 and [t["type"] for t in doc["types"]] == ["2in", "ip"]
        a = read_query_set(tmp_path / "a").frame
        b = read_query_set(tmp_path / "b").frame
        assert a.drop(columns="atoms").equals(b.drop(columns="atoms")) and second.exit_code == 0
        assert store.run("MATCH (q:Query {dataset: 'ppi5k'}) RETURN count(q) AS n")[0]["n"] == 10
    finally:
        store.drop()
        store.close()
