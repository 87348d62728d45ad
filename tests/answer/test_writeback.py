"""Answers written back to a real FalkorDB server: exact stored values, replace-never-duplicate, anchors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.core.errors import PipelineError
from pipeline.formats.answers import read_answers, write_answers
from pipeline.formats.queryset import read_query_set
from pipeline.methods import SRC
from pipeline.stages.answer import answer_query_set
from pipeline.stages.writeback import read_back, set_id, write_back
from tests.answer.toy import N_ENTITIES, PREDICTED, write_toy_query_set

COUNT = "MATCH (:Query {dataset: 'toy'})-[a:ANSWER]->(:Entity) RETURN a.method AS method, count(a) AS n ORDER BY method"


def _answers(tmp_path: Path, method: str):
    qs = read_query_set(write_toy_query_set(tmp_path / "toy_test.parquet"))
    frame, _ = answer_query_set(qs, SRC.over(PREDICTED, "toy"), progress=False)
    meta = {"dataset": "toy", "method": method, "backbone": "ukge_logi", "query_set": str(qs.path)}
    return read_answers(write_answers(frame, tmp_path / f"{method}.parquet", meta)), qs


@pytest.fixture()
def store(fresh_store):
    fresh_store.ensure_index("Entity", "eid")  # also creates the graph: the bulk loader refuses a missing one
    fresh_store.create_entities("toy", np.arange(N_ENTITIES), [f"e{i}" for i in range(N_ENTITIES)])
    return fresh_store


def test_stored_answers_by_hand(store, tmp_path: Path) -> None:
    answers, qs = _answers(tmp_path, "SRC")
    # q1 and q2 rank all 6 entities with finite utility, q3 only its 2 entities with confidence >= 0.5
    assert write_back(store, answers, qs) == 14
    got = read_back(store, "toy", set_id(qs), "q1", "ukge_logi SRC")
    assert [r["eid"] for r in got] == [2, 1, 3, 0, 4, 5] and [r["rank"] for r in got] == [1, 2, 3, 4, 5, 6]
    assert [r["utility"] for r in got] == pytest.approx([0.8, 0.5, 0.45, 0.0, 0.0, 0.0])
    assert [r["truth_utility"] for r in got[:3]] == pytest.approx([0.6, 0.9, 0.3]) and got[3][
        "truth_utility"
    ] is None
    anchors = store.run(
        "MATCH (q:Query {dataset: 'toy', set: $set, qid: 'q2'})-[a:ANCHOR]->(e:Entity) "
        "RETURN e.eid AS eid, a.position AS position",
        {"set": set_id(qs)},
    )
    assert anchors == [{"eid": 0, "position": 0}]
    node = store.run("MATCH (q:Query {dataset: 'toy', qid: 'q2'}) RETURN q.type AS type, q.text AS text")
    assert node == [{"type": "2p", "text": qs.frame.set_index("id").loc["q2", "text"]}]


def test_rerun_replaces_and_methods_coexist(store, tmp_path: Path) -> None:
    a, qs = _answers(tmp_path, "SRC")
    b, _ = _answers(tmp_path, "SRC(D)")
    write_back(store, a, qs)
    write_back(store, a, qs)
    assert store.run(COUNT) == [{"method": "ukge_logi SRC", "n": 14}]
    write_back(store, b, qs)
    write_back(store, a, qs)
    assert store.run(COUNT) == [{"method": "ukge_logi SRC", "n": 14}, {"method": "ukge_logi SRC(D)", "n": 14}]
    assert store.run("MATCH (q:Query {dataset: 'toy'}) RETURN count(q) AS n") == [{"n": 3}]
    assert store.run("MATCH (:Query {dataset: 'toy'})-[a:ANCHOR]->() RETURN count(a) AS n") == [{"n": 3}]


def test_write_back_needs_ingested_entities(fresh_store, tmp_path: Path) -> None:
    a, qs = _answers(tmp_path, "SRC")
    with pytest.raises(PipelineError, match="pipeline ingest toy"):
        write_back(fresh_store, a, qs)
