"""A replacing ingest is all or nothing as readers see it (design section 4, "What the store promises"):
the embedded server is killed (SIGKILL) or stopped (`pipeline store stop`) after each round trip
of a re-ingest with changed content, and after the restart the data set reads, through the project's own
readers, exactly as the previous complete version or the new one; the next ingest then leaves no leftover.
Also: what a replacing `pipeline ingest NAME --from PATH` made stale is said."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store import cypher_text, open_store
from pipeline.store.cypher import fill
from pipeline.store.ingest import ingest
from tests.store.kgs import make_kg
from tests.store.test_faults_store import Interrupt, kill_server

V1 = make_kg("team")  # 5 entities, 2 relations, 6 distinct facts
V2 = make_kg(
    "team",
    facts=[(0, 0, 1, 0.5, "train"), (1, 2, 2, 0.75, "train"), (2, 1, 3, 0.25, "val"), (3, 2, 5, 0.125, "test"),
           (5, 0, 4, 1.0, "test"), (4, 1, 0, 0.625, "test"), (1, 0, 5, 0.375, "train")],
    n_entities=6,
    relation_names=("rel0", "rel1", "rel2"),
    entity_names=["ann", "ben", "cy", "dee", "eve", "fox"],
)  # fmt: skip


def visible(store, dataset: str = "team") -> dict:
    """The data set as readers see it, through their own statements: `stats` (marker, counts, per-relation
    facts and alpha levels), the write-back vocabulary, and the sampling walks' in-edges of every entity."""
    from pipeline.stages.writeback import store_vocabulary
    from pipeline.store.stats import dataset_stats

    try:
        stats = dataset_stats(store, dataset).to_json()
    except PipelineError as exc:
        return {"refused": str(exc).split(" in ")[0]}
    vocab = store_vocabulary(store, dataset)
    edges = fill(cypher_text("sample_in_edges"), {"CONF": "conf_test"})
    facts = sorted(
        (r["head"], r["rid"], eid, r["conf"])
        for eid in range(stats["entities"])
        for r in store.run(edges, {"dataset": dataset, "eid": eid})
    )
    return {"stats": stats, "entities": vocab and vocab.entities, "relations": vocab and vocab.relations,
            "facts": facts}


def everything(store) -> dict:
    """Every node and relationship in the graph by kind: a leftover shows here, whatever its name."""
    return {
        "entities": store.run("MATCH (n:Entity) RETURN count(n) AS n")[0]["n"],
        "relations": store.run("MATCH (n:Relation) RETURN count(n) AS n")[0]["n"],
        "markers": store.run("MATCH (d:Dataset) RETURN collect(d.name) AS n")[0]["n"],
        "facts": store.run("MATCH (:Entity)-[e]->(:Entity) RETURN count(e) AS n")[0]["n"],
    }


def _v1_store(graph: str, bulk: bool):
    store = open_store(graph=graph)
    store.bulk = bulk
    ingest(V1, store, batch_size=2, progress=False)
    return store


@pytest.mark.parametrize("bulk", [True, False], ids=["bulk", "cypher"])
def test_a_replacing_ingest_is_all_or_nothing_when_the_server_dies_at_any_point(home, bulk):
    with _v1_store("reference", bulk) as store:
        before = visible(store)
        probe = Interrupt(store, at=0, how="none", method="_call")
        report = ingest(V2, store, batch_size=2, progress=False)
        trips = probe.n
        after = visible(store)
        clean = everything(store)
    assert report.replaced and "refused" not in before and "refused" not in after and before != after
    assert after["entities"] == ("ann", "ben", "cy", "dee", "eve", "fox") and len(after["facts"]) == 7
    assert clean == {"entities": 6, "relations": 3, "markers": ["team"], "facts": 7}
    outcomes = []
    for at in range(1, trips + 1):
        how = "stop" if at % 5 == 0 else "kill"  # `pipeline store stop` at some points, kill -9 at the rest
        store = _v1_store(f"trial{at}", bulk)
        Interrupt(store, at, how, method="_call")
        try:  # fails, or (stopped after its last round trip) returns: what a reader sees decides
            ingest(V2, store, batch_size=2, progress=False)
        except StoreUnavailable:
            pass
        store._disconnect()
        with open_store(graph=f"trial{at}") as again:  # restarts the server from its append-only file
            again.bulk = bulk
            # the interrupted ingest (this very process, still alive) never released the data set's lock;
            # a real one is gone and its lock taken over at once (test_faults_store)
            again.run("MATCH (l:Lock) DETACH DELETE l")
            seen = visible(again)
            assert seen in (before, after), f"{how} after round trip {at} of {trips}: {seen}"
            outcomes.append("new" if seen == after else "old")
            again_report = ingest(V2, again, batch_size=2, progress=False)
            assert visible(again) == after and everything(again) == clean, f"{how} after {at}: leftovers"
            assert again_report.skipped == (seen == after)
    # killed before the commit statement: the old version; from it on: the new one; never a third state
    first_new = outcomes.index("new")
    assert outcomes == ["old"] * first_new + ["new"] * (trips - first_new) and 0 < first_new < trips
    print(f"\nre-ingest ({'bulk' if bulk else 'cypher'}): {trips} kill points: {outcomes}")


def test_a_replacing_ingest_is_all_or_nothing_when_killed_at_random_moments(home):
    """kill -9 from another thread at seeded random times: some land inside a statement, not between."""
    import random
    import threading
    import time

    with _v1_store("reference", bulk=False) as store:
        before = visible(store)
        t0 = time.perf_counter()
        ingest(V2, store, batch_size=1, progress=False)
        took = time.perf_counter() - t0
        after = visible(store)
    rng, outcomes = random.Random(29), []
    for trial in range(6):
        store = _v1_store(f"random{trial}", bulk=False)
        delay = rng.uniform(0, took)
        timer = threading.Timer(delay, kill_server)
        timer.start()
        try:
            ingest(V2, store, batch_size=1, progress=False)
        except StoreUnavailable:
            pass
        timer.join()
        store._disconnect()
        with open_store(graph=f"random{trial}") as again:
            again.run("MATCH (l:Lock) DETACH DELETE l")
            seen = visible(again)
            assert seen in (before, after), f"kill at {delay:.4f} s: {seen}"
            outcomes.append("new" if seen == after else "old")
            ingest(V2, again, progress=False)
            assert visible(again) == after and everything(again)["entities"] == 6
    print(f"\nrandom kills within {took:.3f} s: {outcomes}")


def test_leftovers_of_a_killed_ingest_are_invisible_to_every_reader_and_counted_right(home):
    """Both leftovers at once (a staged load and a replaced version, same relation types): `stats`,
    sampling, the vocabulary and the data set list see v1 only, also for the fact counts that come from the
    servers' per-type counts."""
    from pipeline.store.ingest import replaced_name, staging_name
    from pipeline.store.status import dataset_names

    with open_store(graph="leftovers") as store:
        ingest(V1, store, progress=False)
        before = visible(store)
        for name in (staging_name("team"), replaced_name("team")):
            store.create_entities(name, V2.entities["eid"].to_numpy(), V2.entity_names())
            store.run(cypher_text("ingest_relations"), {"dataset": name, "rows": [
                {"rid": i, "name": n, "type": n, "p25": None, "p50": None, "p75": None}
                for i, n in enumerate(V2.relation_names())]})  # fmt: skip
            conf = {k: np.array([0.5]) for k in ("conf_train", "conf_valid", "conf_test")}
            for rid, typ in enumerate(V2.relation_names()):  # rel0, rel1: the types v1 uses too
                store.create_facts("team", typ, rid, np.array([0]), np.array([1]), conf, entity_dataset=name)
        assert visible(store) == before
        assert dataset_names(store) == ["team"]
        ingest(V1, store, progress=False)  # unchanged: skipped, and the leftovers are gone
        assert everything(store) == {"entities": 5, "relations": 2, "markers": ["team"], "facts": 6}


# ------------------------------------------------------------------------------------------ what went stale
def _cli(*args: str) -> str:
    from pipeline.cli import cli

    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_a_replacing_ingest_says_which_query_sets_and_write_backs_it_made_stale(home, tmp_path: Path):
    from tests.store.test_user_kg import toy_kg

    kg = tmp_path / "kg.tsv"
    kg.write_text(toy_kg(seed=0))
    first = json.loads(_cli("ingest", "tiny", "--from", str(kg), "--seed", "1", "--json"))
    sample = json.loads(_cli("sample", "tiny", "--out", str(tmp_path / "q"), "--types", "1p", "--per-type", "3",
                             "--split", "test", "--json"))
    with open_store() as store:
        (set_name,) = [r["set"] for r in store.run(cypher_text("stored_queries_sets"), {"dataset": "tiny"})]
        version = store.run(cypher_text("dataset_version"), {"dataset": "tiny"})[0]["version"]
        # a committed write-back of that set, as writeback_commit leaves its pointer
        store.run("CREATE (:WriteBack {dataset: 'tiny', set: $s, method: 'm1', generation: 'g', "
                  "dataset_version: $v})", {"s": set_name, "v": version})
    assert sample["queries"] == 3 and not first["store_report"]["replaced"]
    unchanged = _cli("ingest", "tiny", "--from", str(kg), "--seed", "1")
    assert "stale" not in unchanged and unchanged.rstrip().endswith("store " + first["store"] + ": unchanged")
    kg.write_text(toy_kg(seed=1))  # other facts: a new version
    out = _cli("ingest", "tiny", "--from", str(kg), "--seed", "1")
    lines = out.rstrip().splitlines()
    assert lines[-3].endswith(": replaced")
    assert lines[-2] == (f"stale (made from another version of 'tiny', now refused): 1 query set(s) in the "
                         f"store: {set_name}; sample again (`pipeline sample tiny ...`)")
    assert lines[-1] == (f"stale (made from another version of 'tiny', now refused): 1 write-back(s): "
                         f"{set_name} [m1]; answer and write back again on a new sample")
    kg.write_text(toy_kg(seed=2))
    rep = json.loads(_cli("ingest", "tiny", "--from", str(kg), "--seed", "1", "--json"))
    assert rep["store_report"]["stale_sets"] == [set_name]  # still stale: listed until sampled again
    assert rep["store_report"]["stale_writebacks"] == [[set_name, "m1"]]
