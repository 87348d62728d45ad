"""A tiny named uncertain KG taken through the real pipeline once per session, for the store-facing answer
tests (answers from the store, browsing, saved calibrations): ingest --from into a graph of the session's
FalkorDB server, sampled sets (their (:Query) nodes written), a trained UKGE, its export."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.softquery import Vocabulary
from tests.answer.toy import N_ENTITIES, N_RELATIONS
from tests.store.test_user_kg import toy_kg

NAME = "browsekg"
VOCAB = Vocabulary.from_names([f"e{i}" for i in range(N_ENTITIES)], [f"r{i}" for i in range(N_RELATIONS)])


@pytest.fixture()
def toy_named_store(fresh_store):
    """A fresh graph holding the toy's entities and relations with names (e0.., r0..), as ingest leaves them."""
    import numpy as np

    fresh_store.ensure_index("Entity", "eid")
    fresh_store.create_entities("toy", np.arange(N_ENTITIES), VOCAB.entities)
    fresh_store.run(
        "UNWIND $rows AS row CREATE (:Relation {dataset: 'toy', rid: row.rid, name: row.name})",
        {"rows": [{"rid": i, "name": n} for i, n in enumerate(VOCAB.relations)]},
    )
    return fresh_store


def run_cli(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="session")
def tiny_flow_session(falkordb_store, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Built once, under a PIPELINE_HOME of its own: its user data set must not join the registry the rest
    of the session sees (tests that list every data set)."""
    root = tmp_path_factory.mktemp("tiny_flow")
    home = root / "home"
    store = falkordb_store.fresh()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PIPELINE_HOME", str(home))
        uri = store.uri
        f = root / "kg.tsv"
        f.write_text(toy_kg(n_facts=160, seed=3))
        run_cli("ingest", NAME, "--from", str(f), "--store", uri, "--seed", "1")
        sets = {}
        for split, types in (("test", "1p,2p,2i"), ("train", "1p,2p"), ("valid", "1p,2p")):
            doc = json.loads(run_cli("sample", NAME, "--out", str(root / split), "--types", types, "--per-type", "3",
                                     "--split", split, "--store", uri, "--seed", "0", "--json"))
            sets[split] = doc["file"]
        run_cli("train", NAME, "--model", "ukge_logi", "--epochs", "3", "--dim", "8", "--out", str(root / "run"),
                "--device", "cpu", "--seed", "0", "--json")
        run_cli("export", str(root / "run"), "--threshold", "0.05", "--out", str(root / "adj"), "--json", "--allow-dense")
    try:
        yield {"root": root, "home": home, "store": store, "uri": uri, "name": NAME, "sets": sets,
               "run": root / "run", "adj": root / "adj"}
    finally:
        store.drop()
        store.close()


@pytest.fixture
def tiny_flow(tiny_flow_session: dict, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The tiny named KG's flow, with PIPELINE_HOME pointing at its home for the test (its data set is
    known by name there only)."""
    monkeypatch.setenv("PIPELINE_HOME", str(tiny_flow_session["home"]))
    return tiny_flow_session
