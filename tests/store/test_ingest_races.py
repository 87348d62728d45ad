"""Ingests that overlap, die, or find a corrupted copy: the data set lock serialises them, and the
"complete" decision checks the stored counts against the marker, so no doubled or partial graph is ever
skipped as "unchanged" or shown by `stats`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.core.errors import PipelineError
from pipeline.store.ingest import ingest, staging_name
from pipeline.store.stats import dataset_stats
from tests.store.kgs import make_kg, snapshot

REPO = Path(__file__).resolve().parents[2]


def clean_snapshot(store, kg) -> dict:
    """The state one undisturbed ingest of kg leaves (in a graph of its own)."""
    clean = store.fresh()
    clean.bulk = store.bulk
    try:
        ingest(kg, clean, progress=False)
        return snapshot(clean, kg.name)
    finally:
        clean.drop()
        clean.close()


def test_an_ingest_started_during_another_waits_then_finds_it_complete(fresh_store):
    kg = make_kg("tiny")
    a, b = fresh_store, fresh_store.fresh(fresh_store.graph)
    b_done = threading.Event()
    real = a.create_entities

    def slow_create_entities(*args, **kwargs):
        # A has passed its "is it loaded?" check; let B run now. B either finishes (no lock: the old
        # race) or waits for A's lock; A goes on after B finished or after 2 s of B waiting.
        b_done.wait(2.0)
        return real(*args, **kwargs)

    a.create_entities = slow_create_entities
    reports = {}
    ta = threading.Thread(target=lambda: reports.__setitem__("a", ingest(kg, a, progress=False)))
    ta.start()
    time.sleep(0.3)  # A is inside create_entities by now
    try:
        reports["b"] = ingest(kg, b, progress=False)
    finally:
        b_done.set()
        ta.join()
        b.close()
    assert not reports["a"].skipped and reports["b"].skipped  # B waited, then saw A's complete load
    assert snapshot(fresh_store, "tiny") == clean_snapshot(fresh_store, kg)


CHILD = """
import json, sys, time
from pipeline.store import open_store
from pipeline.store.ingest import ingest
from tests.store.kgs import make_kg
uri, start, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
kg = make_kg("race", facts=[(h, r, (h * 7 + r) % 3000, 0.5, "train") for h in range(3000) for r in range(3)],
             n_entities=3000, relation_names=("r0", "r1", "r2"))
with open_store(uri) as store:
    if mode == "die":  # SIGKILL in the middle of the load: entities and relation 0 are written
        import os, signal
        real = store.create_facts
        def create_facts(*a, **k):
            if a[2] == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **k)
        store.create_facts = create_facts
    time.sleep(max(0.0, start - time.time()))  # both processes begin together
    r = ingest(kg, store, progress=False)
print(json.dumps({"skipped": r.skipped, "replaced": r.replaced}))
"""


def _child(uri: str, start: float, mode: str = "ingest") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, uri, str(start), mode],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("attempt", [1, 2])
def test_two_processes_ingesting_at_once_leave_one_clean_copy(fresh_store, attempt):
    uri = f"falkordb://127.0.0.1:{fresh_store.server.port}/{fresh_store.graph}"
    start = time.time() + 4.0  # after both interpreters have imported everything
    procs = [_child(uri, start) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    reports = [json.loads(out) for out, _ in outs]
    assert sorted(r["skipped"] for r in reports) == [False, True], outs  # one loaded, the other found it done
    snap = snapshot(fresh_store, "race")
    assert (len(snap["entities"]), len(snap["facts"]), len(snap["marker"])) == (3000, 9000, 1)
    assert fresh_store.run("MATCH (l:Lock) WHERE l.owner IS NOT NULL RETURN count(l) AS n") == [{"n": 0}]


def test_a_killed_ingest_reruns_at_once_to_the_clean_state(fresh_store):
    uri = f"falkordb://127.0.0.1:{fresh_store.server.port}/{fresh_store.graph}"
    dead = _child(uri, 0.0, mode="die")
    dead.communicate(timeout=120)
    assert dead.returncode == -9
    # readers see nothing of it; what it wrote lies under the staging name (entities first, then facts)
    assert snapshot(fresh_store, "race") == {"entities": [], "relations": [], "facts": [], "marker": []}
    staged = fresh_store.run(
        "MATCH (n:Entity {dataset: $d}) OPTIONAL MATCH (n)-[e]->() RETURN count(DISTINCT n) AS n, count(e) AS e",
        {"d": staging_name("race")},
    )[0]
    assert staged["n"] == 3000 and 0 < staged["e"] < 9000
    # its lock is still there, but its pid is dead on this host: the re-run takes it over at once
    assert fresh_store.run("MATCH (l:Lock) RETURN l.pid AS pid") == [{"pid": dead.pid}]
    again = _child(uri, 0.0)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(out) == {"skipped": False, "replaced": False}  # nothing was there to replace
    snap = snapshot(fresh_store, "race")
    assert (len(snap["entities"]), len(snap["facts"]), snap["marker"][0]["complete"]) == (3000, 9000, True)
    assert fresh_store.run("MATCH (n:Entity) RETURN count(n) AS n") == [{"n": 3000}]  # no leftover
    assert fresh_store.run("MATCH (l:Lock) WHERE l.owner IS NOT NULL RETURN count(l) AS n") == [{"n": 0}]


DOUBLINGS = {
    "an entity twice": "CREATE (:Entity {dataset: 'tiny', eid: 0, name: 'ent0'})",
    "a fact twice": "MATCH (h:Entity {dataset: 'tiny', eid: 0}), (t:Entity {dataset: 'tiny', eid: 1}) "
    "CREATE (h)-[:rel0 {dataset: 'tiny', rid: 0, conf_test: 0.625}]->(t)",
    "a relation twice": "CREATE (:Relation {dataset: 'tiny', rid: 1, name: 'rel1', type: 'rel1'})",
    "a fact missing": "MATCH (:Entity {dataset: 'tiny', eid: 4})-[e]->() DELETE e",
    "two markers": "CREATE (:Dataset {name: 'tiny', complete: true, entities: 5, relations: 2, facts: 6})",
}


@pytest.mark.parametrize("neighbour", [False, True], ids=["own types", "types shared"])
@pytest.mark.parametrize("damage", list(DOUBLINGS))
def test_a_doubled_or_partial_copy_marked_complete_is_never_trusted(fresh_store, damage, neighbour):
    # facts are counted from the per-type counts when the types are the data set's own, by a scan when
    # another data set uses the same types: both ways must see the damage
    kg = make_kg("tiny")
    if neighbour:
        ingest(make_kg("other"), fresh_store, progress=False)  # same relation names rel0, rel1
    ingest(kg, fresh_store, progress=False)
    fresh_store.run(DOUBLINGS[damage])
    with pytest.raises(PipelineError, match="run `pipeline ingest tiny` again"):
        dataset_stats(fresh_store, "tiny")
    report = ingest(kg, fresh_store, progress=False)
    assert not report.skipped and report.replaced  # reloaded, not "unchanged"
    assert snapshot(fresh_store, "tiny") == clean_snapshot(fresh_store, kg)
    assert dataset_stats(fresh_store, "tiny").facts == {"train": 3, "valid": 4, "test": 6}
    if neighbour:
        assert dataset_stats(fresh_store, "other").facts == {"train": 3, "valid": 4, "test": 6}


def test_the_stats_error_says_what_is_stored_and_what_the_marker_says(fresh_store):
    ingest(make_kg("tiny"), fresh_store, progress=False)
    fresh_store.run(DOUBLINGS["an entity twice"])
    with pytest.raises(PipelineError) as err:
        dataset_stats(fresh_store, "tiny")
    assert "6 entities, 2 relations, 6 facts stored" in str(err.value)
    assert "marker says 5, 2, 6" in str(err.value)


def test_an_ingest_waits_for_any_writer_of_its_data_set(fresh_store):
    from pipeline.store import StoreLocked, dataset_lock

    other = fresh_store.fresh(fresh_store.graph)
    try:
        with other.lock(dataset_lock("tiny"), purpose="write-back of answers"):
            with pytest.raises(StoreLocked, match="held by write-back of answers"):
                ingest(make_kg("tiny"), fresh_store, progress=False, lock_timeout_s=0.2)
        assert snapshot(fresh_store, "tiny")["entities"] == []  # nothing written while it was held
        assert not ingest(make_kg("tiny"), fresh_store, progress=False, lock_timeout_s=0.2).skipped
    finally:
        other.close()


def test_a_relation_named_like_a_store_edge_is_counted_exactly(fresh_store):
    # (:Query)-[:ANSWER]->(:Entity) edges of write-back share the type of a relation named ANSWER
    kg = make_kg("qa", relation_names=("ANSWER", "rel1"))
    ingest(kg, fresh_store, progress=False)
    fresh_store.run("MATCH (e:Entity {dataset: 'qa', eid: 0}) CREATE (:Query {qid: 'q'})-[:ANSWER]->(e)")
    assert dataset_stats(fresh_store, "qa").facts["test"] == 6
    assert ingest(kg, fresh_store, progress=False).skipped
