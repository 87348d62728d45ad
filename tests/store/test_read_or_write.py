"""Which statements the store treats as writes (``pipeline.store.base.is_write``): a write is checked
against the disk and made durable, a read goes as GRAPH.RO_QUERY and is answered on a full disk. A false
'read' would lose durability; a false 'write' refused `pipeline stats` on a full disk (its statements name
``$dataset``, which held "SET " to the old substring test)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.config import repo_root
from pipeline.store.base import is_write, statement_code
from pipeline.store.cypher import cypher_text

READS = [
    "MATCH (q:Query {dataset: $dataset, set: $set}) RETURN q.set AS set ORDER BY set",
    "MATCH (c:WriteBack {dataset: $dataset}) RETURN c.set AS set, c.method AS method ORDER BY set, method",
    "// a comment: CREATE nothing\nMATCH (n) RETURN n",
    "MATCH (n) /* SET n.x = 1 */ RETURN n",
    "MATCH (n) WHERE n.name = 'DELETE me' OR n.name = \"it's \\\" CREATE\" RETURN n",
    "OPTIONAL MATCH (n:Entity {dataset: $dataset}) RETURN count(n) AS created",
    "UNWIND $rows AS row RETURN row.remove AS remove",
    "CALL db.labels() YIELD label RETURN label",
    "WITH 1 AS x RETURN {merge: x, drop: 2} AS m",
]
WRITES = [
    "CREATE (n)",
    "MATCH (n) SET n.x = 1",
    "match (n) set n:Seen",
    "MATCH (n {dataset: $dataset}) DETACH DELETE n",
    "MATCH (n) REMOVE n.x",
    "UNWIND $rows AS row MERGE (:E {k: row.k})",
    "MATCH (n) FOREACH (x IN [1] | SET n.y = x)",
    "MATCH (n) CALL { WITH n CREATE (:Copy) } RETURN 1",
    "LOAD CSV FROM 'file:///x' AS row RETURN row",
    "CALL db.idx.fulltext.createNodeIndex('L', 'p')",
    "CALL apoc.do.it()",
    "EXPLAIN MATCH (n) RETURN n",  # starts like no read: conservative
    "MATCH (n) RETURN n // no write\n; CREATE (m)",
    "MATCH (n) RETURN 'unclosed ; CREATE (m)",  # an unclosed string: everything after it is string
]


@pytest.mark.parametrize("text", READS)
def test_reads(text):
    assert not is_write(text)


@pytest.mark.parametrize("text", [w for w in WRITES if "unclosed" not in w])
def test_writes(text):
    assert is_write(text)


def test_an_unclosed_string_hides_nothing_after_the_start():
    assert statement_code("RETURN 'a ; CREATE (m)") == "RETURN ''"


# the project's statements that write, read off the files by hand (their clauses are upper case there)
WRITING = {
    "create_index", "dataset_commit", "dataset_delete_entities", "dataset_delete_rest", "ingest_entities",
    "ingest_facts", "ingest_relations", "lock_acquire", "lock_ensure", "lock_release", "lock_renew", "schema",
    "stored_queries_adopt", "stored_queries_update", "write_queries", "write_queries_commit",
    "writeback_answers", "writeback_commit", "writeback_delete", "writeback_witnesses",
    "writeback_witnesses_delete", "writeback_witnesses_delete_nodes",
}


@pytest.mark.parametrize("name", sorted(p.stem for p in (repo_root() / "cypher").glob("*.cypher")))
def test_the_project_statements_are_writes_exactly_where_they_write(name):
    assert is_write(cypher_text(name)) == (name in WRITING)


@given(st.sampled_from(READS), st.text(alphabet=st.characters(blacklist_characters="'\\\n"), max_size=30))
def test_a_string_or_a_comment_never_makes_a_read_a_write(read, text):
    assert not is_write(read + f" // {text}")
    assert not is_write(read.replace("RETURN", f"WITH '{text}' AS s RETURN", 1))


@given(st.sampled_from(READS), st.sampled_from(["SET n.z = 1", "CREATE (:X)", "DELETE n", "MERGE (:Y)"]))
def test_a_write_clause_always_makes_a_write(read, clause):
    assert is_write(read.replace("RETURN", f"WITH * {clause} RETURN", 1))
