"""`pipeline query` end to end on the real PPI5k data set (no graph store)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.kg import observed_graph
from pipeline.engine import search_query, top_answers
from pipeline.softquery import Vocabulary, parse

TEXT = "binding(394.NGR_c00010, ?x, 0.5, 0.7) & activation(?x, ?y, 0.2) | #0(#1, ?y)"


def run(*args: str):
    return CliRunner().invoke(cli, ["query", *args])


def test_json_equals_engine(ppi5k):
    res = run(TEXT, "--dataset", "ppi5k", "--graph", "valid", "--top", "7", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    u = search_query(parse(TEXT, Vocabulary.from_kg(ppi5k)), observed_graph(ppi5k, "valid"))
    ids, vals = top_answers(u, k=7)
    assert len(rows) == 7
    assert [r["eid"] for r in rows] == ids.tolist()
    assert [r["name"] for r in rows] == [ppi5k.entity_names()[i] for i in ids.tolist()]
    assert [r["utility"] for r in rows] == pytest.approx(vals.tolist(), abs=1e-6)
    assert all(a["utility"] >= b["utility"] > 0 for a, b in zip(rows, rows[1:], strict=False))
    again = run(TEXT, "--dataset", "ppi5k", "--graph", "valid", "--top", "7", "--json")
    assert again.stdout == res.stdout


def test_graphs_differ_and_table_output(ppi5k):
    res = run("binding(394.NGR_c00010, ?y)", "--dataset", "ppi5k", "--graph", "test", "--top", "3")
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert lines[0].startswith("binding(394.NGR_c00010, ?y)   [ppi5k, graph test;")
    assert lines[1].split() == ["rank", "eid", "name", "utility"] and len(lines) == 6


@pytest.mark.parametrize(
    "args,message",
    [
        (["#0(#0, ?y", "--graph", "test"], "column 10"),
        (["bindng(#0, ?y)", "--graph", "test"], "did you mean 'binding'"),
        (["#0(#0, ?y)"], "exactly one of --graph"),
        (["#0(#0, ?y)", "--graph", "test", "--adjacency", "x"], "exactly one of --graph"),
        (["#0(#0, ?y)", "--adjacency", "/nonexistent/export"], "not a neural adjacency export"),
    ],
)
def test_errors_exit_2(ppi5k, args, message):
    res = run(args[0], "--dataset", "ppi5k", *args[1:])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: ") and message in res.stderr
    assert "Traceback" not in res.output


def write_export(folder, kg, threshold: float) -> None:
    """An export directory in pipeline.stages.export's format holding the test graph's facts with c >= threshold
    (a stand-in for a model's predictions: the engine reads both the same way)."""
    import numpy as np
    import pyarrow as pa

    from pipeline.formats.adjacency import FORMAT, SCHEMA, relation_file, write_manifest

    facts = kg.graph("test")
    facts = facts[facts["conf"] >= threshold]
    common = {"format": FORMAT, "dataset": kg.name, "model_hash": "0" * 64}
    rels = []
    for r in range(kg.n_relations):
        part = facts[facts["r"] == r].sort_values(["h", "t"])
        schema = SCHEMA.with_metadata({**common, "threshold": repr(threshold), "relation": str(r)})
        cols = [pa.array(part[c].to_numpy(np.int32)) for c in "ht"] + [
            pa.array(part["conf"].to_numpy(np.float32))
        ]
        with pa.OSFile(str(folder / relation_file(r)), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
            w.write_batch(pa.record_batch(cols, schema=schema))
        rels.append({"relation": r, "file": relation_file(r), "nnz": len(part)})
    manifest = {
        **common,
        "threshold": threshold,
        "n_entities": kg.n_entities,
        "n_relations": kg.n_relations,
        "relations": rels,
    }
    write_manifest(folder, manifest)  # sealed, as the export stage writes it (an unsealed one is refused)


def test_adjacency_source(ppi5k, tmp_path):
    from pipeline.core.kg import GraphTensors

    write_export(tmp_path, ppi5k, 0.5)
    res = run(TEXT, "--dataset", "ppi5k", "--adjacency", str(tmp_path), "--json", "--top", "50")
    assert res.exit_code == 0, res.output
    facts = ppi5k.graph("test")
    kept = GraphTensors.from_frame(facts[facts["conf"] >= 0.5], ppi5k.n_entities, ppi5k.n_relations)
    ids, vals = top_answers(search_query(parse(TEXT, Vocabulary.from_kg(ppi5k)), kept), k=50)
    rows = json.loads(res.stdout)
    assert [r["eid"] for r in rows] == ids.tolist() and len(rows) > 0
    assert [r["utility"] for r in rows] == pytest.approx(vals.tolist(), abs=1e-6)
    # the thresholded graph has fewer answers than the full test graph
    every = ["--top", "5000", "--json"]
    kept_all = json.loads(run(TEXT, "--dataset", "ppi5k", "--adjacency", str(tmp_path), *every).stdout)
    full_all = json.loads(run(TEXT, "--dataset", "ppi5k", "--graph", "test", *every).stdout)
    assert 0 < len(kept_all) < len(full_all)
    wrong = run("#0(#1, ?y)", "--dataset", "cn15k", "--adjacency", str(tmp_path))
    assert wrong.exit_code == 2 and "not 'cn15k'" in wrong.stderr
