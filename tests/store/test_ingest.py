"""Ingest into a real FalkorDB server, through both the GRAPH.BULK path and the portable UNWIND Cypher
path: exact contents, injection safety, idempotence, a killed-then-rerun load, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.errors import DataFormatError, PipelineError
from pipeline.store.ingest import content_key, ingest, schema_indexes, staging_name
from tests.store.kgs import NASTY, TINY_FACTS, expected_facts, make_kg, snapshot


@pytest.fixture(params=["bulk", "cypher"])
def store(request, fresh_store):
    fresh_store.bulk = request.param == "bulk"
    return fresh_store


def test_ingest_stores_the_nested_graphs_exactly(store):
    kg = make_kg("tiny")
    report = ingest(kg, store, batch_size=2, progress=False)
    assert (report.entities, report.relations, report.facts, report.skipped) == (5, 2, 6, False)
    snap = snapshot(store, "tiny")
    assert snap["entities"] == [{"eid": i, "name": f"ent{i}"} for i in range(5)]
    assert snap["relations"] == [
        {"rid": 0, "name": "rel0", "type": "rel0"},
        {"rid": 1, "name": "rel1", "type": "rel1"},
    ]
    facts = [
        {k: f[k] for k in ("h", "r", "t", "type", "conf_train", "conf_valid", "conf_test")}
        for f in snap["facts"]
    ]
    assert facts == expected_facts(kg)
    # hand-computed: (0,0,1) is train {0.75, 0.25} then test 0.875; (2,1,3) only val; (4,0,4) a test self-loop
    by_key = {(f["h"], f["r"], f["t"]): f for f in facts}
    assert [by_key[0, 0, 1][k] for k in ("conf_train", "conf_valid", "conf_test")] == [0.5, 0.5, 0.625]
    assert (by_key[2, 1, 3]["conf_train"], by_key[2, 1, 3]["conf_valid"], by_key[2, 1, 3]["conf_test"]) == (
        None,
        0.4,
        0.4,
    )
    assert (by_key[4, 0, 4]["conf_train"], by_key[4, 0, 4]["conf_valid"], by_key[4, 0, 4]["conf_test"]) == (
        None,
        None,
        1.0,
    )
    assert all(f["dataset"] == "tiny" for f in snap["facts"])
    assert snap["marker"] == [{"complete": True, "key": content_key(kg), "facts": 6}]
    assert set(schema_indexes()) <= store.indexes() and ("Entity", "eid") in schema_indexes()


def test_names_with_quotes_and_backticks_are_data(store):
    ents = [NASTY, "plain", "back`tick", "new\nline", "\\escape"]
    kg = make_kg("nasty" + NASTY, relation_names=(NASTY, "a:b%c"), entity_names=ents)
    other = make_kg("bystander")
    ingest(other, store, progress=False)
    before = snapshot(store, "bystander")
    ingest(kg, store, progress=False)
    snap = snapshot(store, kg.name)
    assert [e["name"] for e in snap["entities"]] == ents
    assert [r["name"] for r in snap["relations"]] == [NASTY, "a:b%c"]
    assert {f["type"] for f in snap["facts"]} == {"x\"'%60}) DETACH DELETE n //", "a%3Ab%25c"}
    assert len(snap["facts"]) == 6 and snap["marker"][0]["complete"] is True
    assert snapshot(store, "bystander") == before  # nothing else was touched


def test_second_run_changes_nothing(store):
    kg = make_kg("tiny")
    ingest(kg, store, progress=False)
    first = snapshot(store, "tiny")
    ids = store.run("MATCH (n:Entity {dataset: 'tiny'}) RETURN ID(n) AS id ORDER BY id")
    again = ingest(kg, store, progress=False)
    assert again.skipped and not again.replaced
    assert snapshot(store, "tiny") == first
    assert (
        store.run("MATCH (n:Entity {dataset: 'tiny'}) RETURN ID(n) AS id ORDER BY id") == ids
    )  # not rewritten


def test_changed_content_replaces_only_that_dataset(store):
    ingest(make_kg("a"), store, progress=False)
    ingest(make_kg("b"), store, progress=False)
    b_before = snapshot(store, "b")
    changed = make_kg("a", facts=TINY_FACTS[:3] + [(1, 0, 3, 0.5, "val")])
    report = ingest(changed, store, progress=False)
    assert report.replaced and not report.skipped
    assert [
        {k: f[k] for k in ("h", "r", "t", "type", "conf_train", "conf_valid", "conf_test")}
        for f in snapshot(store, "a")["facts"]
    ] == expected_facts(changed)
    assert snapshot(store, "b") == b_before


class Killed(Exception):
    pass


def test_killed_load_reruns_to_the_clean_state(store, falkordb_store):
    kg = make_kg("tiny")
    real = store.create_facts
    calls = []

    def dies_after_first_relation(*args, **kwargs):
        if calls:
            raise Killed  # the process dies here: relation 0 and all entities are already written
        calls.append(1)
        return real(*args, **kwargs)

    store.create_facts = dies_after_first_relation
    with pytest.raises(Killed):
        ingest(kg, store, progress=False)
    # readers see nothing of it: the part written is under the staging name, without a marker
    assert snapshot(store, "tiny") == {"entities": [], "relations": [], "facts": [], "marker": []}
    half = snapshot(store, staging_name("tiny"))
    assert len(half["entities"]) == 5 and half["marker"] == []
    store.create_facts = real
    report = ingest(kg, store, progress=False)
    assert not report.replaced and not report.skipped
    assert snapshot(store, staging_name("tiny"))["entities"] == []  # the leftover is gone

    clean = falkordb_store.fresh()
    clean.bulk = store.bulk
    try:
        ingest(kg, clean, progress=False)
        assert snapshot(store, "tiny") == snapshot(clean, "tiny")
    finally:
        clean.drop()
        clean.close()


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda kg: kg.rows.loc.__setitem__((3, "conf"), 1.5), "conf"),
        (lambda kg: kg.rows.loc.__setitem__((2, "t"), 7), "t"),
        (lambda kg: kg.relations.loc.__setitem__((1, "name"), ""), "relations.name"),
        (lambda kg: kg.entities.loc.__setitem__((0, "eid"), 3), "entities.eid"),
    ],
)
def test_bad_input_writes_nothing(store, mutate, field):
    kg = make_kg("bad")
    mutate(kg)
    with pytest.raises(DataFormatError, match=field):
        ingest(kg, store, progress=False)
    assert store.run("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]


def test_bulk_and_cypher_paths_agree_on_real_data(falkordb_store, ppi5k):
    # a slice of real PPI5k (every 40th fact), loaded by both paths into two graphs
    facts = ppi5k.rows.iloc[::40]
    kg = make_kg(
        "ppi_slice",
        facts=list(facts[["h", "r", "t", "conf", "split"]].itertuples(index=False, name=None)),
        n_entities=ppi5k.n_entities,
        relation_names=tuple(ppi5k.relation_names()),
        entity_names=ppi5k.entity_names(),
    )
    snaps = []
    for bulk in (True, False):
        s = falkordb_store.fresh()
        s.bulk = bulk
        try:
            ingest(kg, s, progress=False)
            snaps.append(snapshot(s, "ppi_slice"))
        finally:
            s.drop()
            s.close()
    assert snaps[0] == snaps[1]
    got = np.array([[f["conf_test"] for f in snaps[0]["facts"]]])
    want = np.array([[f["conf_test"] for f in expected_facts(kg)]])
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-14, atol=0)


def test_bulk_entities_create_a_missing_graph(fresh_store):
    # GRAPH.BULK needs BEGIN on a graph that does not exist yet, and must not use it on one that does
    fresh_store.create_entities("solo", np.arange(3), ["a", "b", "c"])
    fresh_store.create_entities("duo", np.arange(2), ["x", "y"])
    rows = fresh_store.run(
        "MATCH (n:Entity) RETURN n.dataset AS d, n.eid AS eid, n.name AS name ORDER BY d, eid"
    )
    assert [(r["d"], r["eid"], r["name"]) for r in rows] == [
        ("duo", 0, "x"),
        ("duo", 1, "y"),
        ("solo", 0, "a"),
        ("solo", 1, "b"),
        ("solo", 2, "c"),
    ]


def test_bulk_facts_need_their_entities(fresh_store):
    fresh_store.create_entities("part", np.arange(2), ["a", "b"])
    conf = {k: np.array([0.5]) for k in ("conf_train", "conf_valid", "conf_test")}
    with pytest.raises(PipelineError, match="not in the store"):
        fresh_store.create_facts("part", "r", 0, np.array([0]), np.array([5]), conf)
    assert fresh_store.run("MATCH ()-[e]->() RETURN count(e) AS n") == [{"n": 0}]
