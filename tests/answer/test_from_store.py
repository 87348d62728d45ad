"""`pipeline answer --from-store` against a real FalkorDB server: queries a person typed into the store with
only a text, and the (:Query) nodes of a sampled set, answered and written back to the same nodes; a text
that does not parse is marked on its node and reported in one line, the others go on."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.errors import ArtifactError
from pipeline.formats.answers import read_answers, write_answers
from pipeline.formats.queryset import read_query_set
from pipeline.stages.writeback import set_id, write_back_file
from tests.answer.conftest import run_cli

TYPED = [
    "links(node_00, ?y)",
    "links(node_00, ?x) & feeds(?x, ?y, 0.1)",
    "links(nobody, ?y)",  # no such entity
]
ANSWERS = (
    "MATCH (q:Query {dataset: $d, set: $set})-[a:ANSWER]->(e:Entity) "
    "RETURN q.qid AS qid, a.rank AS rank, e.name AS name, a.utility AS utility ORDER BY qid, rank"
)
WITNESSES = (
    "MATCH (q:Query {dataset: $d, set: $set})-[:EXPLAINED_BY]->(w:Witness) OPTIONAL MATCH (w)-[:USES]->(a:Atom) "
    "RETURN count(DISTINCT w) AS witnesses, count(a) AS atoms"
)


def _typed_nodes(store, name: str) -> None:
    store.run("MATCH (q:Query {dataset: $d, set: 'typed'}) DETACH DELETE q", {"d": name})
    store.run("UNWIND $texts AS t CREATE (:Query {dataset: $d, text: t})", {"d": name, "texts": TYPED})


def _answer(flow: dict, tmp_path, *extra: str) -> CliRunner:
    res = CliRunner().invoke(cli, ["answer", "--from-store", "--adjacency", str(flow["adj"]), "--store", flow["uri"],
                                   "--out", str(tmp_path), *extra])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    return res


def test_typed_queries_answered_written_back_and_errors_marked(tiny_flow: dict, tmp_path) -> None:
    store, name = tiny_flow["store"], tiny_flow["name"]
    _typed_nodes(store, name)
    res = _answer(tiny_flow, tmp_path, "--write-back", "--explain", "2")
    # one line for the query that did not parse, naming it, its text and the column
    assert res.stderr.count("not answered") == 1
    assert "query t2 ('links(nobody, ?y)') not answered: column 7: unknown entity 'nobody'" in res.stderr
    assert "2 queries of set typed (browsekg) answered" in res.stdout
    nodes = store.run("MATCH (q:Query {dataset: $d, set: 'typed'}) RETURN q.qid AS qid, q.text AS text, "
                      "q.error AS error, q.type AS type, q.query AS query ORDER BY qid", {"d": name})
    # ids in creation order (the first typed node is t0); the typed text is kept, the error is on
    # the broken node only
    assert [(n["qid"], n["text"], n["type"]) for n in nodes] == [
        ("t0", TYPED[0], "1p"), ("t1", TYPED[1], "2p"), ("t2", TYPED[2], None)]
    assert "unknown entity 'nobody'" in nodes[2]["error"] and nodes[0]["error"] is None and nodes[1]["error"] is None
    assert nodes[1]["query"] == "links(node_00, ?x) & feeds(?x, ?y, 0.1)"
    stored = store.run(ANSWERS, {"d": name, "set": "typed"})
    assert {r["qid"] for r in stored} == {"t0", "t1"}
    # a second implementation: `pipeline query` on the same export gives the same top answers
    for qid, text in (("t0", TYPED[0]), ("t1", TYPED[1])):
        mine = [(r["name"], r["utility"]) for r in stored if r["qid"] == qid]
        got = json.loads(run_cli("query", text, "--dataset", name, "--adjacency", str(tiny_flow["adj"]),
                                 "--top", str(len(mine)), "--json"))
        assert [r["name"] for r in got] == [n for n, _ in mine]
        assert [r["utility"] for r in got] == pytest.approx([u for _, u in mine], abs=1e-6)
    first = store.run(WITNESSES, {"d": name, "set": "typed"})
    assert first[0]["witnesses"] == 4 and first[0]["atoms"] == 2 + 2 * 2  # top 2 of a 1p and of a 2p
    # again, after the person fixed the broken text: nothing duplicated, the error gone, t2 answered
    store.run("MATCH (q:Query {dataset: $d, qid: 't2'}) SET q.text = 'links(node_01, ?y)'", {"d": name})
    _answer(tiny_flow, tmp_path, "--write-back", "--explain", "2")
    assert store.run("MATCH (q:Query {dataset: $d, set: 'typed'}) WHERE q.error IS NOT NULL RETURN count(q) AS n",
                     {"d": name}) == [{"n": 0}]
    again = store.run(ANSWERS, {"d": name, "set": "typed"})
    assert [r for r in again if r["qid"] != "t2"] == stored and {r["qid"] for r in again} == {"t0", "t1", "t2"}
    assert store.run(WITNESSES, {"d": name, "set": "typed"})[0]["witnesses"] == 6
    # the answers file written back again by path: the typed nodes keep the person's texts
    texts = "MATCH (q:Query {dataset: $d, set: 'typed'}) RETURN q.qid AS qid, q.text AS text ORDER BY qid"
    before = store.run(texts, {"d": name})
    assert write_back_file(tmp_path / "typed.ukge_logi.SRC.parquet", tiny_flow["uri"])["witnesses"] == 6
    assert store.run(texts, {"d": name}) == before and before[1]["text"] == TYPED[1]


def test_a_sampled_set_answered_from_its_nodes(tiny_flow: dict, tmp_path) -> None:
    store, name = tiny_flow["store"], tiny_flow["name"]
    qs = read_query_set(tiny_flow["sets"]["test"])
    sid = set_id(qs)
    before = store.run("MATCH (q:Query {dataset: $d, set: $set}) RETURN q.qid AS qid, q.text AS text ORDER BY qid",
                       {"d": name, "set": sid})
    res = _answer(tiny_flow, tmp_path, "--set", sid, "--write-back", "--json")
    doc = json.loads(res.stdout)
    assert doc["errors"] == [] and doc["set"] == sid and doc["written_back"]["answers"] > 0
    # the same queries (by their parsed form) as the sampled file, answered as answering the file answers them
    from_store = read_answers(doc["path"]).frame
    direct = json.loads(run_cli("answer", str(qs.path), "--adjacency", str(tiny_flow["adj"]), "--out",
                                str(tmp_path / "direct"), "--json"))
    plain = read_answers(direct["path"]).frame
    cols = ["query_id", "rank", "entity", "utility"]
    top = plain[plain["rank"] <= 100][cols].sort_values(["query_id", "rank"]).reset_index(drop=True)
    assert from_store[cols].sort_values(["query_id", "rank"]).reset_index(drop=True).equals(top)
    # written back to the sampled nodes themselves; their own texts untouched
    assert store.run("MATCH (q:Query {dataset: $d, set: $set}) RETURN q.qid AS qid, q.text AS text ORDER BY qid",
                     {"d": name, "set": sid}) == before
    got = store.run("MATCH (q:Query {dataset: $d, set: $set})-[a:ANSWER]->() RETURN count(a) AS n",
                    {"d": name, "set": sid})
    assert got == [{"n": doc["written_back"]["answers"]}]


def test_unknown_set_is_one_line(tiny_flow: dict, tmp_path) -> None:
    res = CliRunner().invoke(cli, ["answer", "--from-store", "--set", "nope", "--adjacency", str(tiny_flow["adj"]),
                                   "--store", tiny_flow["uri"], "--out", str(tmp_path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.output.count("\n") == 1 and "no (:Query) nodes of 'browsekg' in set 'nope'; sets: " in res.output


def test_answers_file_with_witnesses_written_back(tiny_flow: dict, tmp_path) -> None:
    """`answer QUERIES --explain K --write-back`: the witnesses file beside the answers goes in too; a
    witnesses file of another run is refused in one line, and nothing of it is written."""
    store, name = tiny_flow["store"], tiny_flow["name"]
    qs = read_query_set(tiny_flow["sets"]["test"])
    args = ["answer", str(qs.path), "--adjacency", str(tiny_flow["adj"]), "--store", tiny_flow["uri"], "--out",
            str(tmp_path), "--write-back", "--explain", "2", "--json"]
    doc = json.loads(run_cli(*args))
    frame = read_answers(doc["path"]).frame
    explained = int(((frame["rank"] <= 2) & (frame["utility"] > 0)).sum())
    assert doc["written_back"]["witnesses"] == explained > 0
    assert store.run(WITNESSES, {"d": name, "set": set_id(qs)}) == [
        {"witnesses": explained, "atoms": doc["written_back"]["atoms"]}]
    # the answers change under the witnesses file (another run): refused, the stored witnesses stay
    ans = read_answers(doc["path"])
    ans.frame.loc[ans.frame["rank"] == 1, "utility"] += 0.5
    write_answers(ans.frame, doc["path"], ans.meta)
    with pytest.raises(ArtifactError, match="is not the answers file's; it was written by another run"):
        write_back_file(doc["path"], tiny_flow["uri"])
    assert store.run(WITNESSES, {"d": name, "set": set_id(qs)})[0]["witnesses"] == explained
