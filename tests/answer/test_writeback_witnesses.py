"""Witnesses written back as a browsable subgraph of a real FalkorDB server: (:Witness) and (:Atom) nodes
with hand-computed values, replace-never-duplicate, another K leaves no old witness, and the documentation's one
browsing statement (cypher/browse_query.cypher) returns the query, its anchors, answers and why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline.core.errors import ArtifactError
from pipeline.engine import as_adjacency
from pipeline.engine.witness import find_witnesses
from pipeline.formats.witnesses import rows_of
from pipeline.softquery import to_text
from pipeline.stages.witness_records import PREDICTED as FOUND
from pipeline.stages.witness_records import witness_record
from pipeline.stages.writeback import check_witnesses, set_id, write_back
from pipeline.store import cypher_text
from tests.answer.conftest import VOCAB
from tests.answer.test_writeback import _answers
from tests.answer.toy import N_ENTITIES, PREDICTED

COUNTS = (
    "MATCH (:Query {dataset: 'toy'})-[:EXPLAINED_BY]->(w:Witness) OPTIONAL MATCH (w)-[:USES]->(a:Atom) "
    "RETURN count(DISTINCT w) AS witnesses, count(a) AS atoms"
)


@pytest.fixture()
def store(toy_named_store):
    return toy_named_store


def witnesses_of(answers, qs, k: int) -> pd.DataFrame:
    """What `answer --explain k` writes beside the answers, built here from the engine on the toy export."""
    adj = as_adjacency(PREDICTED)
    frame, rows = answers.frame, []
    for qid, q in zip(qs.frame["id"], qs.queries(), strict=True):
        top = frame[(frame["query_id"] == qid) & (frame["rank"] <= k) & (frame["utility"] > 0)].sort_values("rank")
        ws = find_witnesses(q, adj, top["entity"].tolist())
        ends = [[(u.head, u.tail) for u in w.atoms] for w in ws]
        rows += rows_of(qid, to_text(q, VOCAB), [witness_record(w, q, VOCAB, FOUND) for w in ws], ends)
    return pd.DataFrame(rows)


def test_witness_subgraph_by_hand(store, tmp_path: Path) -> None:
    answers, qs = _answers(tmp_path, "SRC")
    write_back(store, answers, qs, witnesses=witnesses_of(answers, qs, 2))
    # top 2 of q1 (1 atom each), q2 (2 atoms each), q3 (1 atom each)
    assert store.run(COUNTS) == [{"witnesses": 6, "atoms": 8}]
    # q2 = r0(e0, ?x) & r1(?x, ?y) on the toy export: y = e5 via x = e2 (0.8 + 0.7), then y = e4 via e1 (0.5 + 0.8)
    got = store.run(
        "MATCH (q:Query {dataset: 'toy', qid: 'q2'})-[:EXPLAINED_BY]->(w:Witness)-[:FOR]->(e:Entity) "
        "MATCH (w)-[u:USES]->(a:Atom)-[:HEAD]->(h:Entity), (a)-[:TAIL]->(t:Entity) "
        "RETURN q.query AS query, w.rank AS rank, e.name AS answer, w.utility AS utility, w.assignment AS x, "
        "u.position AS pos, h.name AS head, a.relation AS rel, t.name AS tail, a.confidence AS c, a.source AS src, "
        "a.value AS value, a.alpha AS alpha, a.beta AS beta, a.negated AS neg ORDER BY rank, pos"
    )
    assert [(r["rank"], r["answer"], r["x"], r["pos"], r["head"], r["rel"], r["tail"]) for r in got] == [
        (1, "e5", "?x = e2", 0, "e0", "r0", "e2"),
        (1, "e5", "?x = e2", 1, "e2", "r1", "e5"),
        (2, "e4", "?x = e1", 0, "e0", "r0", "e1"),
        (2, "e4", "?x = e1", 1, "e1", "r1", "e4"),
    ]
    assert [r["c"] for r in got] == pytest.approx([0.8, 0.7, 0.5, 0.8])
    assert [r["value"] for r in got] == pytest.approx([0.8, 0.7, 0.5, 0.8])
    assert [r["utility"] for r in got] == pytest.approx([1.5, 1.5, 1.3, 1.3])
    assert {(r["src"], r["alpha"], r["beta"], r["neg"]) for r in got} == {("predicted", 0.0, 1.0, False)}
    assert {r["query"] for r in got} == {"r0(e0, ?x) & r1(?x, ?y)"}  # the query text with names on the node


def test_rewrite_replaces_and_another_k_leaves_no_old_witness(store, tmp_path: Path) -> None:
    answers, qs = _answers(tmp_path, "SRC")
    w2 = witnesses_of(answers, qs, 2)
    write_back(store, answers, qs, witnesses=w2)
    first = store.run(COUNTS)
    write_back(store, answers, qs, witnesses=w2)
    assert store.run(COUNTS) == first == [{"witnesses": 6, "atoms": 8}]
    write_back(store, answers, qs, witnesses=witnesses_of(answers, qs, 1))
    assert store.run(COUNTS) == [{"witnesses": 3, "atoms": 4}]
    assert store.run("MATCH (w:Witness) WHERE w.rank > 1 RETURN count(w) AS n") == [{"n": 0}]
    # written back without witnesses: the method's witnesses are gone, its answers and the entities stay
    write_back(store, answers, qs)
    assert store.run(COUNTS) == [{"witnesses": 0, "atoms": 0}]
    assert store.run("MATCH (a:Atom) RETURN count(a) AS n") == [{"n": 0}]
    assert store.run("MATCH (e:Entity {dataset: 'toy'}) RETURN count(e) AS n") == [{"n": N_ENTITIES}]


def test_the_browse_statement_shows_query_anchors_answers_and_why(store, tmp_path: Path) -> None:
    answers, qs = _answers(tmp_path, "SRC")
    write_back(store, answers, qs, witnesses=witnesses_of(answers, qs, 2))
    rows = store.run(cypher_text("browse_query"), {"dataset": "toy", "set": set_id(qs), "qid": "q2"})
    assert [(r["method"], r["rank"], r["entity"]["name"]) for r in rows] == [
        ("ukge_logi SRC", i + 1, f"e{e}") for i, e in enumerate([5, 4, 0, 1, 2, 3])
    ]
    assert {r["q"]["query"] for r in rows} == {"r0(e0, ?x) & r1(?x, ?y)"}
    assert all([a["name"] for a in r["anchors"]] == ["e0"] for r in rows)
    assert [r["answer"]["utility"] for r in rows] == pytest.approx([1.5, 1.3, 0.8, 0.8, 0.8, 0.8])
    explained, rest = rows[:2], rows[2:]
    assert [r["witness"]["assignment"] for r in explained] == ["?x = e2", "?x = e1"]
    assert [sorted(a["text"] for a in r["atoms"]) for r in explained] == [
        ["r0(e0, e2) c=0.8 predicted -> 0.8", "r1(e2, e5) c=0.7 predicted -> 0.7"],
        ["r0(e0, e1) c=0.5 predicted -> 0.5", "r1(e1, e4) c=0.8 predicted -> 0.8"],
    ]
    assert [sorted(e["name"] for e in r["joined"]) for r in explained] == [["e0", "e2", "e5"], ["e0", "e1", "e4"]]
    assert all(len(r["atom_ends"]) == 4 and len(r["uses"]) == 2 for r in explained)
    assert all(r["witness"] is None and r["atoms"] == [] for r in rest)  # ranks 3..6 were not explained


def test_witnesses_of_another_run_are_refused(tmp_path: Path) -> None:
    answers, qs = _answers(tmp_path, "SRC")
    w = witnesses_of(answers, qs, 2)
    check_witnesses(w, answers.frame, "w.parquet")  # the same run: accepted
    w.loc[w["query_id"] == "q2", "utility"] += 0.25
    with pytest.raises(ArtifactError, match=r"w.parquet: the witness of q2 rank 1 \(e5, 1.75\) is not the answers"):
        check_witnesses(w, answers.frame, "w.parquet")


@pytest.mark.neo4j
def test_witnesses_over_bolt_equal_native(bolt_and_native, tmp_path: Path) -> None:
    """The witness write-back through the official neo4j driver (FalkorDB's Bolt, tiny batches) writes what
    the native client reads back as the hand-computed subgraph."""
    bolt, native = bolt_and_native
    native.ensure_index("Entity", "eid")
    bolt.create_entities("toy", np.arange(N_ENTITIES), list(VOCAB.entities))
    bolt.run(
        "UNWIND $rows AS row CREATE (:Relation {dataset: 'toy', rid: row.rid, name: row.name})",
        {"rows": [{"rid": i, "name": n} for i, n in enumerate(VOCAB.relations)]},
    )
    answers, qs = _answers(tmp_path, "SRC")
    w = witnesses_of(answers, qs, 2)
    write_back(bolt, answers, qs, witnesses=w)
    write_back(bolt, answers, qs, witnesses=w)
    assert native.run(COUNTS) == [{"witnesses": 6, "atoms": 8}]
    rows = native.run(cypher_text("browse_query"), {"dataset": "toy", "set": set_id(qs), "qid": "q2"})
    assert [r["witness"]["assignment"] for r in rows[:2]] == ["?x = e2", "?x = e1"]
    # the browsing statement as Neo4j Browser sends it: through the neo4j driver
    over_bolt = bolt.run(cypher_text("browse_query"), {"dataset": "toy", "set": set_id(qs), "qid": "q2"})
    assert [(r["rank"], r["entity"]["name"], (r["witness"] or {}).get("assignment")) for r in over_bolt] == [
        (r["rank"], r["entity"]["name"], (r["witness"] or {}).get("assignment")) for r in rows]


def test_the_docs_quote_the_browse_statement() -> None:
    """The statement the documentation tells a person to paste is the tested one, line for line."""
    root = Path(__file__).resolve().parents[2]
    statement = [ln for ln in cypher_text("browse_query").splitlines() if ln.strip() and not ln.startswith("//")]
    page = (root / "docs" / "how-to" / "browse.md").read_text()
    assert "```cypher\n" + "\n".join(statement) + "\n```" in page
