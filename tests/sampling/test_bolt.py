"""The sampling Cypher through the neo4j driver (FalkorDB's Bolt port): the same walks, the same query
set and the same Cypher answers as the native client. FalkorDB's Bolt always works on graph ``falkordb``."""

from __future__ import annotations

import pytest

from pipeline.sampling.atoms import records_to_query
from pipeline.sampling.cypher_answers import cypher_answers
from pipeline.sampling.levels import kg_alpha_table, store_alpha_table, store_relation_types
from pipeline.sampling.sampler import sample_queries
from pipeline.store import open_store
from pipeline.store.embedded import launch
from pipeline.store.falkordb_store import FalkorDBStore
from pipeline.store.ingest import ingest

pytestmark = pytest.mark.neo4j


@pytest.fixture
def bolt_and_native(tmp_path, tiny_kg):
    # a server of its own (as tests/store/test_bolt.py): a closed Bolt session stalls FalkorDB's next
    # native connection, which must not hit the shared session server
    info, proc = launch(tmp_path / "bolt_server", bolt_port=0, persist=False)
    native = FalkorDBStore(info.host, info.port, "falkordb")  # the graph FalkorDB's Bolt port works on
    try:
        ingest(tiny_kg, native, progress=False)
        bolt = open_store(f"bolt://127.0.0.1:{info.bolt_port}")
        try:
            yield bolt, native
        finally:
            bolt.close()
    finally:
        native.close()
        proc.kill()  # throw-away data: no need for a clean SHUTDOWN SAVE
        proc.wait(timeout=30)


def test_bolt_and_native_sample_the_same_set(tiny_kg, bolt_and_native):
    bolt, native = bolt_and_native
    table = kg_alpha_table(tiny_kg)
    np_table = store_alpha_table(bolt, "tiny", tiny_kg.n_relations)
    assert abs(np_table - table).max() < 1e-6  # Bolt formats floats with 6 decimals
    args = ("test", ["1p", "2p", "2u"], 2, "low", "random", 5, table)
    over_bolt, _ = sample_queries(tiny_kg, bolt, *args, progress=False)
    native_rows, _ = sample_queries(tiny_kg, native, *args, progress=False)
    assert over_bolt == native_rows and len(over_bolt) == 6
    types = store_relation_types(bolt, "tiny")
    for r in over_bolt:
        q = records_to_query(r["atoms"])
        a = cypher_answers(bolt, "tiny", q, r["type"], types, "test")
        b = cypher_answers(native, "tiny", q, r["type"], types, "test")
        assert [e for e, _ in a] == [e for e, _ in b] == r["answers_hard"]
        assert [u for _, u in a] == pytest.approx([u for _, u in b], abs=1e-6)
