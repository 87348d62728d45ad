"""An ingest once failed with "the copy of 'sig' does not match its load marker" after interrupted ingests and a
kill -9. A bulk load names nodes by their internal ids; facts wired to other nodes than the staged ones
(ids read in another life of the server, or a replay that came out different) left a marker that said
complete over a copy that was not. The commit now checks what it commits (counts and a checksum of the
staged triples) in the same statement, wherever it runs, and a bulk load stops when the server restarted
under it. Each window is opened here on purpose, deterministically."""

from __future__ import annotations

import pytest

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store import cypher_text
from pipeline.store.falkordb_store import FalkorDBStore
from pipeline.store.ingest import facts_checksum, ingest, staging_name
from pipeline.store.status import dataset_status
from tests.store.kgs import make_kg

V1 = make_kg("wired")
V2 = make_kg(
    "wired",
    facts=[(0, 0, 1, 0.5, "train"), (1, 1, 2, 0.75, "train"), (2, 1, 3, 0.25, "val"), (3, 0, 4, 0.125, "test"),
           (4, 1, 0, 1.0, "test")],
    entity_names=["ann", "ben", "cy", "dee", "eve"],
)  # fmt: skip


def test_the_checksum_is_the_one_the_commit_computes_by_hand():
    facts = V1.facts_with_splits()
    # (h, r, t) of the six distinct facts of TINY_FACTS, by hand with Python's unbounded integers
    triples = [(0, 0, 1), (0, 0, 2), (1, 1, 2), (2, 1, 3), (3, 1, 4), (4, 0, 4)]
    assert sorted(zip(facts["h"], facts["r"], facts["t"], strict=True)) == triples
    p = 2**31 - 1
    assert facts_checksum(facts) == sum(
        ((h * 1000003 + t) * (h + 2 * t + 7919) * 131 + r) % p for h, r, t in triples
    )
    # near the largest ids it is meant for, numpy's int64 agrees with the unbounded form
    import numpy as np

    from pipeline.store.ingest import fact_keys

    h, t, r = np.array([10**9 - 1, 7]), np.array([10**9 - 2, 10**9 - 1]), np.array([3, 0])
    assert fact_keys(h, t, r).tolist() == [
        ((a * 1000003 + b) * (a + 2 * b + 7919) * 131 + c) % p for a, b, c in zip(h.tolist(), t.tolist(), r.tolist(), strict=True)
    ]


def test_a_staged_copy_wired_to_other_nodes_is_never_committed(fresh_store, monkeypatch):
    ingest(V1, fresh_store, progress=False)
    before = dataset_status(fresh_store, "wired")
    assert before.complete
    real_load = __import__("pipeline.store.ingest", fromlist=["_load"])._load

    def load_then_rewire(kg, store, *args, **kwargs):
        real_load(kg, store, *args, **kwargs)
        # what stale node ids do: one staged fact ends at a node of the version readers see now
        store.run(
            "MATCH (h:Entity {dataset: $staging, eid: 1})-[f]->(t:Entity {dataset: $staging, eid: 2}), "
            "(o:Entity {dataset: 'wired', eid: 2}) CREATE (h)-[:rel1 {dataset: 'wired', rid: 1, conf_test: 0.75}]->(o) "
            "DELETE f",
            {"staging": staging_name("wired")},
        )

    monkeypatch.setattr("pipeline.store.ingest._load", load_then_rewire)
    with pytest.raises(PipelineError, match="nothing was committed, the previous version stays"):
        ingest(V2, fresh_store, progress=False)
    after = dataset_status(fresh_store, "wired")
    assert after.complete and after.key == before.key  # the previous version, whole
    monkeypatch.undo()
    report = ingest(V2, fresh_store, progress=False)  # a clean run afterwards commits
    assert report.replaced and dataset_status(fresh_store, "wired").complete


def test_the_commit_checks_the_staged_triples_not_only_their_number(fresh_store):
    """A permutation of two staged entities keeps every count and changes the checksum."""
    from pipeline.store.ingest import _load, relation_types

    facts = V2.facts_with_splits()
    staging = staging_name("wired")
    _load(V2, fresh_store, facts, relation_types(V2.relation_names()), staging, 10_000, False)
    fresh_store.run("MATCH (a:Entity {dataset: $s, eid: 0}), (b:Entity {dataset: $s, eid: 3}) "
                    "SET a.eid = 3, b.eid = 0", {"s": staging})
    params = {"dataset": "wired", "staging": staging, "old": "wired\x1fold", "key": "k", "entities": 5,
              "relations": 2, "facts": len(facts), "checksum": facts_checksum(facts)}
    assert fresh_store.run(cypher_text("dataset_commit"), params) == []
    assert dataset_status(fresh_store, "wired").markers == 0  # nothing committed


def test_a_bulk_load_stops_when_the_server_restarted_under_it(fresh_store, monkeypatch):
    lives = iter(["first"] + ["second"] * 100)
    monkeypatch.setattr(FalkorDBStore, "_server_life", lambda self: next(lives))
    with pytest.raises(StoreUnavailable, match="restarted during a bulk load"):
        ingest(make_kg("restarted"), fresh_store, progress=False)
    assert not dataset_status(fresh_store, "restarted").complete
