"""The store interface against a real FalkorDB server: run, run_batches, indexes, errors, URIs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store import (
    CypherError,
    cypher_text,
    open_store,
    quote_rel_type,
    relation_type,
    relation_types,
    with_rel_type,
)
from pipeline.store.embedded import free_port
from tests.store.kgs import NASTY


def test_run_returns_rows_keyed_by_alias(fresh_store):
    fresh_store.run("CREATE (:T {k: 1, s: $s}), (:T {k: 2, s: 'b'})", {"s": NASTY})
    rows = fresh_store.run("MATCH (n:T) RETURN n.k AS key, n.s AS text, n ORDER BY key")
    assert [r["key"] for r in rows] == [1, 2]
    assert rows[0]["text"] == NASTY  # a parameter is data, never query text
    assert rows[1]["n"] == {"k": 2, "s": "b"}  # nodes come back as their property maps
    assert fresh_store.run("MATCH (n:T) RETURN count(n) AS n") == [{"n": 2}]


def test_run_batches_sends_every_row_once(fresh_store):
    rows = [{"i": i, "v": i / 8} for i in range(23)]
    n = fresh_store.run_batches(
        "UNWIND $rows AS row CREATE (:B {i: row.i, v: row.v, tag: $tag})", rows, 5, {"tag": "x"}
    )
    assert n == 23
    got = fresh_store.run("MATCH (b:B {tag: 'x'}) RETURN b.i AS i, b.v AS v ORDER BY i")
    assert got == rows
    with pytest.raises(PipelineError, match="batch_size"):
        fresh_store.run_batches("UNWIND $rows AS row RETURN row", rows, 0)


def test_floats_round_trip_to_15_digits(fresh_store):
    # FalkorDB prints doubles with 15 significant digits: exact for data with few decimals, ~1e-15 otherwise
    xs = [0.25, 0.7, 1 / 3, 0.123456789012345]
    got = fresh_store.run("UNWIND $xs AS x RETURN x", {"xs": xs})
    assert [r["x"] for r in got[:2]] == xs[:2]
    assert [r["x"] for r in got] == pytest.approx(xs, rel=1e-14, abs=0)


def test_bad_query_is_a_cypher_error(fresh_store):
    with pytest.raises(CypherError, match="rejected the query"):
        fresh_store.run("MATCH (n RETURN n")


def test_ensure_index_is_idempotent(fresh_store):
    fresh_store.run("CREATE (:Idx {p: 1})")
    assert fresh_store.ensure_index("Idx", "p") is True
    assert ("Idx", "p") in fresh_store.indexes()
    assert fresh_store.ensure_index("Idx", "p") is False
    with pytest.raises(PipelineError, match="identifier"):
        fresh_store.ensure_index("Idx) DETACH DELETE (n", "p")


def test_open_store_by_uri_names_the_graph(falkordb_store):
    info = falkordb_store.server
    with open_store(f"falkordb://127.0.0.1:{info.port}/uri_graph") as s:
        s.run("CREATE (:U {x: 1})")
        assert s.graph == "uri_graph"
        try:
            with open_store(info.uri, graph="uri_graph") as same:
                assert same.run("MATCH (u:U) RETURN u.x AS x") == [{"x": 1}]
        finally:
            s.drop()


def test_store_down_is_a_clear_error():
    port = free_port()  # nothing listens there
    with pytest.raises(StoreUnavailable, match=f"cannot reach FalkorDB at 127.0.0.1:{port}"):
        open_store(f"falkordb://127.0.0.1:{port}")
    with pytest.raises(StoreUnavailable, match="cannot reach a Bolt server"):
        open_store(f"bolt://127.0.0.1:{port}")


@pytest.mark.parametrize(
    "uri, message",
    [
        ("mysql://h:1", "unknown store URI"),
        ("falkordb://:6379", "names no host"),
        ("falkordb://h:notaport", "port is not a number"),
    ],
)
def test_malformed_uri_is_a_clear_error(uri, message):
    with pytest.raises(PipelineError, match=message):
        open_store(uri)


def test_cypher_text_strips_comments():
    text = cypher_text("ingest_facts")
    assert "//" not in text and text.startswith("UNWIND $rows AS row")
    with pytest.raises(PipelineError, match="no Cypher file"):
        cypher_text("no_such_query")


# ------------------------------------------------------------------------------------ relationship types


def test_relation_type_examples():
    assert relation_type("relatedto") == "relatedto"
    assert relation_type("has skill (LV)") == "has skill (LV)"
    assert relation_type("a`b:c%d") == "a%60b%3Ac%25d"
    with pytest.raises(PipelineError, match="empty"):
        relation_type("")
    assert relation_types(["a`", "a%60"]) == ["a%60", "a%2560"]  # percent-encoding keeps it injective
    with pytest.raises(PipelineError, match="appears twice"):
        relation_types(["r", "r"])


@given(st.lists(st.text(min_size=1, max_size=12), min_size=2, max_size=6, unique=True))
def test_relation_type_is_injective_and_quotable(names):
    types = relation_types(names)
    assert len(set(types)) == len(names)
    for t in types:
        assert "`" not in t and ":" not in t and "\0" not in t
        assert with_rel_type("MATCH ()-[e:{REL}]->() RETURN e", t).count("`") == 2


def test_with_rel_type_accepts_only_validated_types():
    for raw in ["a`b", "x` ]->() DETACH DELETE n //", "50%", "", None]:
        with pytest.raises(PipelineError):
            with_rel_type("MATCH ()-[e:{REL}]->() RETURN e", raw)
        with pytest.raises(PipelineError):
            quote_rel_type(raw)
    assert quote_rel_type(relation_type("a`b:c")) == "`a%60b%3Ac`"
    with pytest.raises(PipelineError, match="placeholder"):
        with_rel_type("MATCH (n) RETURN n", "rel0")
