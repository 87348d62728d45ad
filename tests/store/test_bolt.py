"""Smoke test of the neo4j-driver backend over FalkorDB's (experimental) Bolt port.

FalkorDB's Bolt ignores the database in transactions and always uses its graph ``falkordb``; it formats
float parameters with 6 decimals and breaks on parameters over a few KB, hence tiny batches and values
with few decimals. Its Bolt parameter formatting does not escape quotes, so names here stay plain."""

from __future__ import annotations

import pytest

from pipeline.store.ingest import ingest
from pipeline.store.stats import dataset_stats
from tests.store.kgs import expected_facts, make_kg, snapshot

pytestmark = pytest.mark.neo4j


def test_bolt_backend_runs_queries_and_ingests(bolt_and_native):
    bolt, native = bolt_and_native
    assert bolt.backend == "neo4j"
    assert bolt.run("UNWIND [1, 2, 3] AS i RETURN i * 2 AS twice") == [
        {"twice": 2},
        {"twice": 4},
        {"twice": 6},
    ]

    kg = make_kg("bolt_tiny")
    report = ingest(kg, bolt, batch_size=3, progress=False)
    assert (report.facts, report.method) == (6, "neo4j-cypher")
    # written over Bolt, read back through the native client
    snap = snapshot(native, "bolt_tiny")
    assert [
        {k: f[k] for k in ("h", "r", "t", "type", "conf_train", "conf_valid", "conf_test")}
        for f in snap["facts"]
    ] == expected_facts(kg)
    assert ingest(kg, bolt, batch_size=3, progress=False).skipped
    st = dataset_stats(bolt, "bolt_tiny")
    assert st.facts == {"train": 3, "valid": 4, "test": 6}
    # alpha levels written over Bolt on the relation vocabulary: rel0's rows 0.75, 0.25, 0.5, 0.875, 1.0
    assert (st.per_relation[0].p25, st.per_relation[0].p50, st.per_relation[0].p75) == (0.5, 0.75, 0.875)
