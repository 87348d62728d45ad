"""Multiple-choice items: the candidate rule on hand-computed utilities, the readability rule, and a whole
build on a tiny named KG through the real engine (true utilities by hand)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from loaders.base import KGData
from pipeline.core.errors import DataFormatError, PipelineError
from pipeline.formats.queryset import QuerySet, query_to_records, write_query_set
from pipeline.llm.items import (
    build_items,
    choose_candidates,
    parse_counts,
    read_items,
    readable_name,
    write_items,
)
from pipeline.softquery import parse
from pipeline.softquery.vocab import Vocabulary
from pipeline.stages.llm import _utility_fn, build_items_file

NEG = -np.inf
#             0     1    2    3     4    5    6    7
UTIL = np.array([NEG, 0.9, 0.7, 0.65, 0.5, 0.2, NEG, 0.0])
ALL = np.ones(8, dtype=bool)


def pick(u, readable, margin, seed=0):
    return choose_candidates(u, readable, margin, np.random.default_rng(seed))


def test_candidates_are_the_closest_levels_a_margin_apart():
    # 0.9; highest <= 0.8 is 0.7; highest <= 0.6 is 0.5 (0.65 is too close); highest <= 0.4 is 0.2
    assert pick(UTIL, ALL, 0.1) == [1, 2, 4, 5]
    assert pick(UTIL, ALL, 0.2) == [1, 2, 4, 5]
    # 0.9; <= 0.65 -> 0.65 (exactly a margin below counts); <= 0.4 -> 0.2; 0.2 < 0.25: no room for a non-answer
    assert pick(UTIL, ALL, 0.25) is None


def test_one_non_answer_may_take_the_last_place():
    readable = ALL.copy()
    readable[5] = False  # 0.2 is unreadable: after 0.9, 0.7, 0.5 comes a non-answer (utility <= 0 or fails)
    for seed in range(5):
        got = pick(UTIL, readable, 0.2, seed)
        assert got[:3] == [1, 2, 4] and got[3] in (0, 6, 7)
    # two non-answers would tie: margin 0.35 gives 0.9, 0.5, then a non-answer, then nothing
    assert pick(UTIL, ALL, 0.35) is None


def test_the_correct_one_is_a_readable_best_answer():
    u = np.array([0.8, 0.8, 0.5, 0.3, 0.1])
    readable = np.array([False, True, True, True, True])
    assert pick(u, readable, 0.2) == [1, 2, 3, 4]
    # the best answers unreadable: the best READABLE answer is the correct one (best of the four shown)
    assert pick(u, np.array([False, False, True, True, True]), 0.2) is None  # 0.5, 0.3, 0.1: only three
    # 0.7, 0.5, 0.3, then the non-answer 5 (0.3 is a margin above 0)
    assert pick(
        np.array([0.8, 0.8, 0.7, 0.5, 0.3, 0.0]), np.array([False, False, True, True, True, True]), 0.2
    ) == [2, 3, 4, 5]
    assert pick(np.full(5, NEG), np.ones(5, bool), 0.1) is None  # no answers at all


def test_readability_rule():
    assert readable_name("ice cream") and readable_name("new yorker") and readable_name("o'clock")
    for bad in ("2000s", "1st", "5", "883.DvMF_1608", "x", "a" * 41, "#12"):
        assert not readable_name(bad), bad


def test_parse_counts():
    assert parse_counts("paper") == {
        "1p": 100,
        "2p": 50,
        "2i": 100,
        "2in": 50,
        "2il": 15,
        "2m": 10,
        "3in": 15,
        "ip": 15,
        "im": 15,
    }
    assert sum(parse_counts(None).values()) == 370
    assert parse_counts("all") is None and parse_counts("3")["im"] == 3
    assert parse_counts("1p=2,2i=1") == {"1p": 2, "2i": 1}
    with pytest.raises(PipelineError, match="TYPE=N"):
        parse_counts("1p:2")


# ------------------------------------------------------------------------------------ a whole build

NAMES = ["dog", "cat", "wolf", "fox", "lion", "tiger", "bear", "42nd street", "mouse", "horse"]
# isa(?y, animal) style: relation 0 "likes", anchor dog (0); tails with hand-picked confidences
FACTS = [
    (0, 0, 1, 0.9),
    (0, 0, 2, 0.7),
    (0, 0, 3, 0.65),
    (0, 0, 4, 0.5),
    (0, 0, 5, 0.2),
    (0, 0, 7, 0.95),
    (8, 1, 1, 0.8),
    (8, 1, 4, 0.6),
]


def named_kg() -> KGData:
    rows = pd.DataFrame(FACTS, columns=["h", "r", "t", "conf"]).assign(split="train", line=range(1, 9))
    rows["split"] = pd.Categorical(rows["split"], categories=["train", "val", "test"])
    return KGData(
        name="zoo",
        entities=pd.DataFrame({"eid": range(len(NAMES)), "name": NAMES}),
        relations=pd.DataFrame({"rid": [0, 1], "name": ["likes", "chases"]}),
        rows=rows.astype({"h": "int64", "r": "int64", "t": "int64", "conf": "float64"}),
        test_negatives=pd.DataFrame({c: pd.Series(dtype="int64") for c in "hrt"}),
        softlogic=None,
        checksums={},
    )


def query_set(texts: dict[str, tuple[str, str]], vocab: Vocabulary, tmp_path) -> QuerySet:
    rows = []
    for qid, (qtype, text) in texts.items():
        q = parse(text, vocab)
        rows.append(
            {
                "id": qid,
                "type": qtype,
                "text": text,
                "atoms": query_to_records(q),
                "answers_easy": [],
                "utilities_easy": [],
                "answers_hard": [],
                "utilities_hard": [],
                "seed": 0,
            }
        )
    path = write_query_set(
        rows,
        tmp_path / "zoo_test.parquet",
        {"dataset": "zoo", "split": "test", "alpha": "zero", "beta": "equal", "source": "test"},
    )
    from pipeline.formats.queryset import read_query_set

    return read_query_set(path)


def test_build_on_a_tiny_kg(tmp_path):
    kg = named_kg()
    vocab = Vocabulary.from_kg(kg)
    from pipeline.core.kg import observed_graph

    qs = query_set(
        {
            "q1": ("1p", "likes(dog, ?y)"),
            "q2": ("2i", "likes(dog, ?y, 0, 0.5) & chases(mouse, ?y)"),
            "q3": ("1p", 'likes("42nd street", ?y)'),
        },
        vocab,
        tmp_path,
    )
    items, report = build_items(qs, vocab, _utility_fn(observed_graph(kg, "test")), 0.1, 7, None, "zoo")
    # q3's anchor is unreadable; q2: cat 0.45 + 0.8 = 1.25, lion 0.25 + 0.6 = 0.85, "42nd street" 0.475
    # (unreadable), wolf 0.35, fox 0.325, tiger 0.1 -> 1.25, 0.85, 0.35, 0.1 (fox is within 0.1 of wolf)
    assert report.kept == {"1p": 1, "2i": 1} and report.dropped == {"unreadable anchor": 1}
    one, two = items
    # q1: "42nd street" (0.95) is the best answer but unreadable -> cat 0.9 (best of the four shown),
    # wolf 0.7, lion 0.5, tiger 0.2
    assert sorted((round(c["true_utility"], 4), c["name"]) for c in one["candidates"]) == [
        (0.2, "tiger"),
        (0.5, "lion"),
        (0.7, "wolf"),
        (0.9, "cat"),
    ]
    by_letter = {c["letter"]: c for c in one["candidates"]}
    assert by_letter[one["correct"]]["name"] == "cat"
    got2 = sorted(((round(c["true_utility"], 4), c["name"]) for c in two["candidates"]), reverse=True)
    assert got2 == [(1.25, "cat"), (0.85, "lion"), (0.35, "wolf"), (0.1, "tiger")]
    # the prompt: plain-English semantics, the query with names, the four lettered names
    p = two["prompt"]
    assert "likes(dog, ?y, 0, 0.5) & chases(mouse, ?y)" in p and "adds beta * c" in p
    for c in two["candidates"]:
        assert f"{c['letter']}. {c['name']}" in p
    assert "#" not in p
    # the same seed gives the same items; the position of the correct letter follows the seed
    again, _ = build_items(qs, vocab, _utility_fn(observed_graph(kg, "test")), 0.1, 7, None, "zoo")
    assert again == items
    letters = {
        build_items(qs, vocab, _utility_fn(observed_graph(kg, "test")), 0.1, s, None, "zoo")[0][0]["correct"]
        for s in range(12)
    }
    assert len(letters) > 1


def test_items_file_with_src_pick_and_bad_files(tmp_path, monkeypatch):
    kg = named_kg()
    vocab = Vocabulary.from_kg(kg)
    qs = query_set({"q1": ("1p", "likes(dog, ?y)")}, vocab, tmp_path)
    res = build_items_file("zoo", qs.path, tmp_path / "items.jsonl", 0.1, "1p=5", 0, kg=kg)
    assert res["items"] == 1 and not res["src"]
    items = read_items(tmp_path / "items.jsonl")
    assert items[0]["query_ids"] == "likes(dog, ?y)"  # the query set's own text
    # SRC's pick: highest predicted utility among the candidates (here fed the true graph: always right)
    from pipeline.core.kg import observed_graph
    from pipeline.llm.items import src_choice

    src_choice(
        items, _utility_fn(observed_graph(kg, "test")), [parse(it["query_ids"], vocab) for it in items]
    )
    assert items[0]["src"]["pick"] == items[0]["correct"]
    write_items(items, tmp_path / "copy.jsonl")
    assert read_items(tmp_path / "copy.jsonl") == items
    lines = (tmp_path / "copy.jsonl").read_text().splitlines()
    broken = json.loads(lines[0]) | {"correct": "E"}
    (tmp_path / "bad.jsonl").write_text(json.dumps(broken) + "\n")
    with pytest.raises(DataFormatError, match=r"bad.jsonl.*line 1.*correct"):
        read_items(tmp_path / "bad.jsonl")
    (tmp_path / "bad2.jsonl").write_text(lines[0] + "\n{not json\n")
    with pytest.raises(DataFormatError, match="line 2"):
        read_items(tmp_path / "bad2.jsonl")


def test_several_query_sets_share_the_counts(tmp_path):
    kg = named_kg()
    vocab = Vocabulary.from_kg(kg)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = query_set({"q1": ("1p", "likes(dog, ?y)")}, vocab, tmp_path / "a")
    second = query_set(
        {"q1": ("1p", "likes(dog, ?y)"), "q2": ("2i", "likes(dog, ?y, 0, 0.5) & chases(mouse, ?y)")},
        vocab,
        tmp_path / "b",
    )
    paths = [first.path, second.path]
    one = build_items_file("zoo", paths, tmp_path / "one.jsonl", 0.1, "1p=1,2i=1", 0, kg=kg)
    assert one["kept"] == {"1p": 1, "2i": 1} and one["dropped"] == {}  # 1p's count was full before file 2
    two = build_items_file("zoo", paths, tmp_path / "two.jsonl", 0.1, "all", 0, kg=kg)
    ids = [it["id"] for it in read_items(tmp_path / "two.jsonl")]
    assert two["items"] == 3 and ids == ["0:q1", "1:q1", "1:q2"]


def test_llm_items_command_errors_are_one_line(tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import cli

    runner = CliRunner()
    bad = runner.invoke(
        cli,
        [
            "llm-items",
            "zoo",
            "--queries",
            str(tmp_path / "q.parquet"),
            "--out",
            str(tmp_path / "i.jsonl"),
            "--per-type",
            "1p:3",
        ],
    )
    assert bad.exit_code == 2 and "TYPE=N" in bad.output and "Traceback" not in bad.output
    missing = runner.invoke(
        cli,
        ["llm-items", "zoo", "--queries", str(tmp_path / "q.parquet"), "--out", str(tmp_path / "i.jsonl")],
    )
    assert missing.exit_code == 2 and "no such query set" in missing.output
    assert not (tmp_path / "i.jsonl").exists()


def test_src_ties_are_credited_as_a_random_choice() -> None:
    """SRC's tie among candidates is never broken by entity id for accuracy: a tie of k letters holding the
    right one earns 1/k."""
    from pipeline.llm.eval import accuracy_table, credit, src_picks
    from pipeline.llm.items import src_choice

    items = [
        {"id": "a", "type": "1p", "correct": "B", "candidates": [{"eid": 5}, {"eid": 9}, {"eid": 2}, {"eid": 7}]},
        {"id": "b", "type": "1p", "correct": "A", "candidates": [{"eid": 1}, {"eid": 3}, {"eid": 4}, {"eid": 6}]},
    ]
    util = np.full((2, 10), -np.inf)
    util[0, [5, 9]] = 0.4  # A and B tied at the top, C and D fail: 1/2 for the right letter B
    util[1, [1, 3, 4, 6]] = [0.9, 0.1, 0.2, 0.3]  # A alone at the top
    src_choice(items, lambda qs: util, [None, None])
    assert items[0]["src"]["tied"] == ["A", "B"] and items[0]["src"]["pick"] == "A"  # listed by id
    assert src_picks(items) == {"a": ["A", "B"], "b": "A"}
    table = accuracy_table(items, src_picks(items))
    assert table["all"]["correct"] == 1.5 and table["all"]["accuracy"] == 75.0
    assert credit(["C", "D"], "B") == 0.0 and credit("B", "B") == 1.0 and credit(None, "B") == 0.0
