"""The sampling Cypher through the neo4j driver (FalkorDB's Bolt port): the same walks, the same query
set and the same Cypher answers as the native client. FalkorDB's Bolt always works on graph ``falkordb``."""

from __future__ import annotations

import pytest

from pipeline.formats.queryset import records_to_query
from pipeline.sampling.levels import kg_alpha_table, store_alpha_table, store_relation_types
from pipeline.sampling.sampler import sample_queries
from pipeline.store.ingest import ingest
from tests.sampling.cypher_answers import cypher_answers

pytestmark = pytest.mark.neo4j


@pytest.fixture
def ingested_pair(tiny_kg, bolt_and_native):
    """The shared Bolt/native pair with the tiny KG ingested through the native client."""
    _, native = bolt_and_native
    ingest(tiny_kg, native, progress=False)
    return bolt_and_native


def test_bolt_and_native_sample_the_same_set(tiny_kg, ingested_pair):
    bolt, native = ingested_pair
    table = kg_alpha_table(tiny_kg)
    np_table = store_alpha_table(bolt, "tiny", tiny_kg.n_relations)
    assert abs(np_table - table).max() < 1e-6  # Bolt formats floats with 6 decimals
    args = dict(split="test", types=["1p", "2p", "2u"], per_type=2, alpha_mode="low", beta_mode="random", seed=5,
                alpha_table=table)
    over_bolt, _ = sample_queries(tiny_kg, bolt, **args, progress=False)
    native_rows, _ = sample_queries(tiny_kg, native, **args, progress=False)
    assert over_bolt == native_rows and len(over_bolt) == 6
    types = store_relation_types(bolt, "tiny")
    for r in over_bolt:
        q = records_to_query(r["atoms"])
        a = cypher_answers(bolt, "tiny", q, r["type"], types, "test")
        b = cypher_answers(native, "tiny", q, r["type"], types, "test")
        assert [e for e, _ in a] == [e for e, _ in b] == r["answers_hard"]
        assert [u for _, u in a] == pytest.approx([u for _, u in b], abs=1e-6)
