"""The chat-completions client against a real loopback HTTP server (tests/llm/stub.py): retries on
429/500/timeouts/malformed replies, a permanent refusal stops the run, concurrency, resume, the API key
from the environment only, and robust letter parsing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.llm.client import ChatClient, LLMError, TransientError, ask_all, parse_letter
from pipeline.llm.items import write_items
from tests.llm.stub import Stub


def items(n: int, correct: str = "A") -> list[dict]:
    return [
        {
            "id": f"q{i}",
            "type": "1p" if i % 2 else "2i",
            "prompt": f"item-{i}: which is best?",
            "candidates": [{"letter": x, "eid": k, "name": f"c{k}"} for k, x in enumerate("ABCD")],
            "correct": correct,
        }
        for i in range(n)
    ]


def client(stub: Stub, **kw) -> ChatClient:
    return ChatClient(stub.url, "stub-model", **({"backoff": 0.01, "timeout": 5.0} | kw))


# Reply shapes of chat models asked for "a single letter" (seen from llama.cpp, vLLM and hosted models on
# these prompts), with the letter a person reads in each; None where a person would not pick one.
REPLIES = [
    # just a letter
    ("B", "B"), ("A", "A"), ("b", "B"), ("(B)", "B"), ("B)", "B"), ("B.", "B"), (" (C). ", "C"), ("[D]", "D"),
    ("**D**", "D"), ("`C`", "C"), ("\\boxed{B}", "B"), ("$\\boxed{C}$", "C"),
    # an explicit cue
    ("Answer: B", "B"), ("Answer: (B)", "B"), ("answer: d", "D"), ("ANSWER: C", "C"), ("**Answer:** C", "C"),
    ("Final answer: D", "D"), ("The answer is C.", "C"), ("The answer would be (A).", "A"), ("My choice: B", "B"),
    ("Option C", "C"), ("the best candidate is (B)", "B"),
    ("After computing the values, the best candidate is (B).", "B"),
    ("The best candidate is B because its score is 1.4, higher than A's 0.9.", "B"),
    ("The candidate with the highest score is D.", "D"), ("The highest score is obtained by candidate (C).", "C"),
    ("Correct: A", "A"), ("I pick B.", "B"), ("I'd choose candidate (C).", "C"), ("I will go with D.", "D"),
    ("Candidate B has the highest score.", "B"), ("(C) is the best.", "C"), ("A is the best.", "A"),
    ("A = 0.9, B = 1.4, C fails, D = 0.2, so B.", "B"), ("Scores: A 0.9, B 1.4, C -inf, D 0.2. Therefore, (B).", "B"),
    ("Candidates A and C fail; the best is B.", "B"), ("The best candidate is A because it is high.", "A"), ("A and B are both plausible, but the answer is B.", "B"),
    ("I think the answer is A, no wait, the answer is D.", "D"),
    ("<think>A or B? The answer is A... no.</think>The answer is B", "B"), ("<think>\nlong\n</think>\n\nC", "C"),
    # a leading letter
    ("B. Because its score is highest.", "B"), ("C) wolf", "C"), ("B: p3", "B"), ("D - it has the highest score", "D"),
    ("B\n\nExplanation: candidate A fails because p1 is below alpha.", "B"), ("B. A fails, C is lower.", "B"),
    ("(B) p3, with utility 1.2", "B"),
    # the one letter named
    ("I would say (C).", "C"), ("Probably D.", "D"), ("It's B, since p3 satisfies both atoms.", "B"),
    # two letters, or none: unclear
    ("Both B and C look good.", None), ("The answer is B or C.", None), ("Answer: B or C", None),
    ("The answer is either (A) or (D).", None), ("(B) and (C) tie.", None), ("A) p1 B) p2", None),
    ("B/C", None), ("The best candidates are B and C.", None), ("Candidate B and candidate C tie.", None),
    ("A wolf is the best choice here.", None), ("The best choice is a wolf.", None),
    ("I pick a candidate with a high score.", None), ("I cannot determine the answer.", None), ("None of them.", None),
    ("", None), ("E", None), ("The answer is E.", None), ("42", None),
]


@pytest.mark.parametrize("reply, letter", REPLIES)
def test_parse_letter(reply, letter):
    assert parse_letter(reply) == letter


def test_retries_429_and_500_then_answers():
    with Stub({"item-0": ["429", "500", "ok:The answer is C"]}) as stub:
        assert client(stub).complete("item-0: ?") == "The answer is C"
        assert stub.count("item-0") == 3
        assert stub.requests[0]["path"] == "/v1/chat/completions"
        body = stub.requests[0]["body"]
        assert body["model"] == "stub-model" and body["temperature"] == 0
        assert body["messages"][-1] == {"role": "user", "content": "item-0: ?"}


def test_timeout_and_malformed_replies_are_retried_then_reported():
    with Stub(
        {"item-0": ["sleep:2", "ok:B"], "item-1": ["malformed", "nochoices", "ok:D"], "item-2": ["malformed"]}
    ) as stub:
        c = client(stub, timeout=0.3, retries=2)
        assert c.complete("item-0") == "B"
        assert c.complete("item-1") == "D"
        with pytest.raises(TransientError, match="malformed reply"):
            c.complete("item-2")
        assert stub.count("item-2") == 3  # the first try and two retries


def test_permanent_refusal_stops_the_run(tmp_path):
    with Stub({"item-1": ["401"]}) as stub, pytest.raises(LLMError, match="HTTP 401"):
        ask_all(items(3), client(stub), tmp_path / "r.jsonl", concurrency=1, progress=False)
    with pytest.raises(LLMError, match="connection refused"):
        ChatClient("http://127.0.0.1:9/v1", "m", retries=0).complete("x")


def test_api_key_only_from_the_environment(monkeypatch):
    with Stub() as stub:
        monkeypatch.delenv("MY_KEY", raising=False)
        client(stub, api_key_env="MY_KEY").complete("item-0")
        assert "Authorization" not in stub.requests[-1]["headers"]
        monkeypatch.setenv("MY_KEY", "sk-test")
        client(stub, api_key_env="MY_KEY").complete("item-0")
        assert stub.requests[-1]["headers"]["Authorization"] == "Bearer sk-test"


def test_concurrent_run_resumes_and_retries_failed_items(tmp_path):
    out = tmp_path / "responses.jsonl"
    scripts = {f"item-{i}": ["ok:B" if i % 3 == 0 else "ok:The answer is A"] for i in range(12)}
    scripts["item-5"] = ["500"]  # fails every time: recorded as an error, asked again on resume
    scripts["item-7"] = ["ok:I cannot tell."]  # answered, no clear letter
    with Stub(scripts) as stub:
        recs = ask_all(items(12), client(stub, retries=1), out, concurrency=4, progress=False)
        assert stub.max_in_flight > 1
        by_id = {r["id"]: r for r in recs}
        assert [r["id"] for r in recs] == [f"q{i}" for i in range(12)]
        assert by_id["q5"]["status"] == "error" and by_id["q5"]["letter"] is None
        assert by_id["q7"]["status"] == "ok" and by_id["q7"]["letter"] is None
        assert by_id["q3"]["letter"] == "B" and by_id["q4"]["letter"] == "A"
        first = len(stub.requests)
        # a crash left half a line: ignored on resume
        with open(out, "a") as fh:
            fh.write('{"id": "q9", "model": "stub-mo')
        stub.scripts["item-5"] = ["ok:C"]
        recs2 = ask_all(items(12), client(stub), out, concurrency=4, progress=False)
        assert len(stub.requests) == first + 1 and stub.requests[-1]["item"] == "item-5"
        assert {r["id"]: r["letter"] for r in recs2}["q5"] == "C"
        # another model, or a changed prompt, is asked again
        changed = items(12)
        changed[0]["prompt"] = "item-0: reworded"
        ask_all(changed, client(stub), out, concurrency=2, progress=False)
        assert len(stub.requests) == first + 2


def test_llm_eval_command(tmp_path):
    its = items(6)
    for k, it in enumerate(its):
        it["src"] = {"utilities": [1.0, 0.5, None, 0.1], "pick": "A" if k < 3 else "B"}
    path = write_items(its, tmp_path / "items.jsonl")
    scripts = {
        "item-0": ["ok:A"],
        "item-1": ["ok:B"],
        "item-2": ["429", "ok:A"],
        "item-3": ["ok:hmm"],
        "item-4": ["ok:A"],
        "item-5": ["ok:(A)"],
    }
    runner = CliRunner()
    with Stub(scripts) as stub:
        res = runner.invoke(
            cli,
            [
                "llm-eval",
                str(path),
                "--endpoint",
                stub.url,
                "--model",
                "stub-model",
                "--concurrency",
                "2",
                "--json",
            ],
        )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    # model: q0 A ok, q1 B wrong, q2 A ok (after a 429), q3 unclear, q4 A ok, q5 A ok -> 4/6
    model = doc["tables"]["stub-model"]
    assert (model["all"]["correct"], model["all"]["n"], model["all"]["no_letter"]) == (4, 6, 1)
    assert doc["unclear"] == ["q3"] and doc["failed"] == []
    # SRC picks A on q0..q2 (right) and B on q3..q5 (wrong) -> 3/6; per type 2i = q0, q2, q4
    assert doc["tables"]["SRC"]["all"]["correct"] == 3
    assert doc["tables"]["SRC"]["2i"] == pytest.approx(
        {"n": 3, "correct": 2, "no_letter": 0, "accuracy": 200 / 3, "low": 20.765, "high": 93.851}, abs=1e-3
    )
    bad = runner.invoke(cli, ["llm-eval", str(path), "--endpoint", "http://127.0.0.1:9/v1"])
    assert bad.exit_code == 2 and "together" in bad.output
    (tmp_path / "broken.jsonl").write_text("{}\n")
    broken = runner.invoke(cli, ["llm-eval", str(tmp_path / "broken.jsonl")])
    assert broken.exit_code == 2 and "line 1" in broken.output and "Traceback" not in broken.output


def test_llm_eval_records_its_tables_for_the_results_page(tmp_path):
    """--docs: the tables land in results_llm.json with their command, machine and date, and the results
    page's table shows them; the same items again add a table, other items replace the record."""
    from tests.results_pages import tables

    its = [{**it, "dataset": "cn15k", "src": {"pick": "A" if k < 4 else "B"}} for k, it in enumerate(items(6))]
    path = write_items(its, tmp_path / "items.jsonl")
    docs = tmp_path / "docs"
    runner = CliRunner()
    with Stub({f"item-{k}": ["ok:A"] for k in range(6)}) as stub:
        res = runner.invoke(cli, ["llm-eval", str(path), "--endpoint", stub.url, "--model", "stub-model", "--docs",
                                  str(docs)])
    assert res.exit_code == 0, res.output
    record = json.loads((docs / "results_llm.json").read_text())["cn15k"]
    assert record["items"] == 6 and record["items_file"] == "items.jsonl" and set(record["tables"]) == {"stub-model", "SRC"}
    assert record["tables"]["SRC"]["accuracy"]["all"]["correct"] == 4
    assert record["tables"]["stub-model"]["command"] == f"pipeline llm-eval items.jsonl --endpoint {stub.url} --model stub-model"
    shown = tables().llm(docs)
    assert "| method | 1p (n=3) | 2i (n=3) | all (n=6) |" in shown
    assert "| stub-model | 100.0 [43.9, 100.0] | 100.0 [43.9, 100.0] | 100.0 [61.0, 100.0] |" in shown
    assert "| SRC | 66.7 [20.8, 93.9] | 66.7 [20.8, 93.9] | 66.7 [30.0, 90.3] |" in shown  # q4, q5 picked B
    # SRC alone on the same items: the model's table stays beside it
    assert runner.invoke(cli, ["llm-eval", str(path), "--docs", str(docs)]).exit_code == 0
    assert set(json.loads((docs / "results_llm.json").read_text())["cn15k"]["tables"]) == {"stub-model", "SRC"}
    # other items: the record is replaced whole, no table of other items is kept beside them
    write_items(its[:4], path)
    assert runner.invoke(cli, ["llm-eval", str(path), "--docs", str(docs)]).exit_code == 0
    assert set(json.loads((docs / "results_llm.json").read_text())["cn15k"]["tables"]) == {"SRC"}
    # items that name no data set: one line, nothing recorded
    write_items([{**it, "src": {"pick": "A"}} for it in items(2)], tmp_path / "anon.jsonl")
    bad = runner.invoke(cli, ["llm-eval", str(tmp_path / "anon.jsonl"), "--docs", str(docs)])
    assert bad.exit_code != 0 and "no data set" in bad.output and "Traceback" not in bad.output
