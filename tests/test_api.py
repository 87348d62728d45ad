"""The Python API: every public name's doctest runs, the API's answers are the
CLI's on the same inputs (query, answer + evaluate), errors are PipelineError subclasses with the CLI's
one-line messages, and every line of the README's "From Python" example runs."""

from __future__ import annotations

import contextlib
import doctest
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import pipeline as pl
from pipeline.cli import cli
from tests.conftest import require_data
from tests.store.test_user_kg import toy_kg

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def store_env(fresh_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh PIPELINE_HOME and the session's FalkorDB server as the default store (PIPELINE_STORE), so
    the examples run as written: no store argument, the password found by itself."""
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PIPELINE_STORE", fresh_store.uri)
    return fresh_store.uri


def _cli(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_all_lists_exactly_the_public_names() -> None:
    import pipeline.api

    assert pl.__all__ == pipeline.api.__all__
    functions = {"ingest", "dataset", "query", "train", "export", "sample", "answer", "evaluate", "cypher", "run"}
    values = {"Dataset", "Ranking", "Explanation", "WitnessAtom", "Run", "Export", "QuerySet", "Answers", "Experiment"}
    assert set(pl.__all__) == functions | values | {"PipelineError"}
    assert len(pl.__all__) == len(set(pl.__all__))
    for name in pl.__all__:
        obj = getattr(pl, name)
        assert obj.__doc__ and ">>> " in obj.__doc__, name


def test_api_names_win_over_submodules_of_the_same_name() -> None:
    import pipeline.softquery  # noqa: F401
    import pipeline.stages.answer  # noqa: F401
    import pipeline.stages.evaluate  # noqa: F401
    import pipeline.stages.export  # noqa: F401

    assert callable(pl.evaluate) and callable(pl.export) and callable(pl.answer) and callable(pl.query)
    assert pl.evaluate.__module__ == "pipeline.api"


def test_every_docstring_example_runs(store_env: str) -> None:
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    ran = set()
    for name in pl.__all__:
        obj = getattr(pl, name)
        for test in finder.find(obj, name, globs={}):
            if test.examples and test.name == name:
                runner.run(test)
                ran.add(name)
    assert runner.failures == 0, f"{runner.failures} doctest failures (output above)"
    assert ran == set(pl.__all__)


@pytest.fixture
def tiny(store_env: str, tmp_path: Path) -> dict[str, object]:
    """A 16-entity KG ingested, trained (tiny), exported, and a sampled test set."""
    f = tmp_path / "kg.tsv"
    f.write_text(toy_kg())
    pl.ingest("tiny", source=f, progress=False)
    run = pl.train("tiny", model="ukge_logi", out=tmp_path / "run", epochs=3, dim=8, device="cpu", progress=False)
    adj = pl.export(run, threshold=0.3, top_k=4, out=tmp_path / "adj", progress=False)
    qs = pl.sample("tiny", split="test", alpha="zero", beta="equal", per_type=5, seed=0, types="1p,2p",
                   out=tmp_path / "q", browse=False, progress=False)
    return {"run": run, "adj": adj, "qs": qs, "tmp": tmp_path}


def test_query_frame_is_the_cli_json(tiny: dict) -> None:
    adj = tiny["adj"]
    for text, source in (("links(node_00, ?x) & feeds(?x, ?y)", ["--graph", "test"]),
                         ("links(node_00, ?y, 0.2) | blocks(?y, node_03)", ["--adjacency", str(adj.path)])):
        want = json.loads(_cli("query", text, "--dataset", "tiny", *source, "--top", "1000", "--json"))
        kw = {"graph": "test"} if source[0] == "--graph" else {"adjacency": adj}
        got = pl.query(text, dataset="tiny", **kw)
        assert list(got.frame.columns) == ["rank", "eid", "name", "utility"]
        assert got.frame.drop(columns="rank").to_dict("records") == want
        assert list(got.frame["rank"]) == list(range(1, len(want) + 1))
    # explained: the records are the CLI's, the atom values sum to the utility
    want = json.loads(_cli("query", "links(node_00, ?x) & feeds(?x, ?y)", "--dataset", "tiny", "--graph", "test",
                           "--top", "3", "--explain", "--json"))
    got = pl.query("links(node_00, ?x) & feeds(?x, ?y)", dataset=pl.dataset("tiny"), graph="test", top=3, explain=3)
    assert [e.record for e in got.explanations] == want
    for e in got.explanations:
        assert sum(a.value for a in e.atoms) == pytest.approx(e.utility, abs=1e-5)
        assert e.text.startswith(f"#{e.rank} {e.name}")


def test_answer_and_evaluate_equal_the_cli(tiny: dict) -> None:
    qs, adj, tmp = tiny["qs"], tiny["adj"], tiny["tmp"]
    assert len(qs) > 0
    ans = pl.answer(qs, adjacency=adj, out=tmp / "api", progress=False)
    report = json.loads(_cli("answer", str(qs.path), "--adjacency", str(adj.path), "--out", str(tmp / "cli"),
                             "--json"))
    cli_frame = pd.read_parquet(report["path"])
    pd.testing.assert_frame_equal(ans.frame[cli_frame.columns].reset_index(drop=True), cli_frame)
    assert ans.frame["name"].str.startswith("node_").all()
    table = pl.evaluate(ans)
    (doc,) = json.loads(_cli("evaluate", report["path"], "--json"))
    summary = doc["summary"]
    assert list(table.index) == ["tau", "rho", "MAP", "NDCG", "MAP chance", "NDCG chance"]
    assert list(table.columns) == [*doc["counts"], "avg"] == ["1p", "2p", "avg"]
    # the metrics are the JSON's summary, the chance rows its random ranking's
    rows = [(summary, "tau"), (summary, "rho"), (summary, "map"), (summary, "ndcg"), (doc["random"], "map"),
            (doc["random"], "ndcg")]
    for label, (source, key) in zip(table.index, rows, strict=True):
        for t in table.columns:
            want = source[key].get(t)
            got = table.loc[label, t]
            assert (want is None and pd.isna(got)) or got == pytest.approx(want, nan_ok=True)
    pd.testing.assert_frame_equal(pl.evaluate(report["path"]), table)
    written = pl.answer(qs, adjacency=adj, out=tmp / "api", write_back=True, progress=False).report["written_back"]
    n = pl.cypher("MATCH (:Query {dataset: 'tiny'})-[a:ANSWER]->(:Entity) RETURN count(a) AS n")["n"][0]
    assert written["answers"] == n > 0


def test_stats_cypher_and_dataset_tables(tiny: dict) -> None:
    ds = pl.dataset("tiny")
    stats = json.loads(_cli("stats", "tiny", "--json"))
    frame = ds.stats()
    assert frame["test"].tolist() == [r["test"] for r in stats["per_relation"]]
    assert len(ds.entities) == 16 and set(ds.relations["name"]) == {"links", "feeds", "blocks"}
    assert len(ds.facts) == 120 and set(ds.facts["split"]) <= {"train", "val", "test"}
    statement = "MATCH (e:Entity {dataset: $d}) RETURN e.name AS name ORDER BY name LIMIT 3"
    want = json.loads(_cli("cypher", statement, "--param", "d=tiny", "--json"))
    assert pl.cypher(statement, {"d": "tiny"}).to_dict("records") == want
    assert pl.cypher("MATCH (e:Entity {dataset: 'none'}) RETURN e.name").empty
    assert {"valid", "test"} <= set(tiny["run"].metrics.index)
    assert tiny["adj"].n_facts == len(tiny["adj"].facts) > 0


def test_a_benchmark_ingested_from_python_has_the_cli_stats(store_env: str) -> None:
    require_data("ppi5k")
    ppi = pl.ingest("ppi5k", progress=False)
    frame = ppi.stats()
    stats = json.loads(_cli("stats", "ppi5k", "--json"))
    assert frame.reset_index().rename(columns={"relation": "name"}).to_dict("records") == stats["per_relation"]
    assert len(ppi.entities) == stats["entities"] and len(ppi.relations) == stats["relations"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: pl.dataset("ppi5"), "unknown data set 'ppi5' (did you mean ppi5k?"),
        (lambda: pl.query("binding(a, ?y", dataset="ppi5k", graph="test"), "column 9: unknown entity 'a'"),
        (lambda: pl.query("binding(?x, ?y)", dataset="ppi5k"), "give exactly one of graph= (train, valid or test) or adjacency="),
        (lambda: pl.train("ppi5k", out="/nonexistent/x", epochs=1, epoks=2), "train: unknown option 'epoks' (did you mean epochs?)"),
        (lambda: pl.train("ppi5k", model="ukge_logi", epochs=0), "epochs=0: must be at least 1"),
        (lambda: pl.answer("/tmp/q.parquet", workers="2"), "workers='2': expected an integer"),
        (lambda: pl.query("binding(?x, ?y)", dataset="ppi5k", grph="test"), "query: unknown option 'grph' (did you mean graph?)"),
        (lambda: pl.evaluate(answer="/tmp/a.parquet"), "evaluate: unknown option 'answer' (did you mean answers?)"),
        (lambda: pl.cypher("RETURN 1", param={}), "cypher: unknown option 'param' (did you mean params?)"),
        (lambda: pl.cypher("  "), "empty Cypher statement"),
        (lambda: pl.ingest("ppi5k", split="0.5,0.5,0"), "ingest ppi5k: split apply to your own KG"),
        (lambda: pl.ingest("nosuch_kg"), "unknown data set 'nosuch_kg'"),
        (lambda: pl.evaluate("/nonexistent/answers.parquet"), "/nonexistent/answers.parquet"),
    ],
)
def test_errors_are_pipeline_errors_with_the_cli_line(call, message: str) -> None:
    require_data("ppi5k")
    with pytest.raises(pl.PipelineError) as info:
        call()
    assert message in str(info.value)
    if "column" not in message:  # a query's syntax error shows the text and a caret below, as the CLI does
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("call", "args", "spelled"),
    [
        (lambda: pl.query("bindng(883.DvMF_1608, ?y)", dataset="ppi5k", graph="test"),
         ["query", "bindng(883.DvMF_1608, ?y)", "--dataset", "ppi5k", "--graph", "test"], {}),
        (lambda: pl.query("binding(883.DvMF_1608, ?y", dataset="ppi5k", graph="test"),
         ["query", "binding(883.DvMF_1608, ?y", "--dataset", "ppi5k", "--graph", "test"], {}),
        (lambda: pl.evaluate("/nonexistent/answers.parquet"), ["evaluate", "/nonexistent/answers.parquet"], {}),
        (lambda: pl.sample("ppi5k", split="test", alpha="zero", beta="equal", per_type=0, seed=0, out="/tmp/q"),
         ["sample", "ppi5k", "--per-type", "0", "--out", "/tmp/q"], {"per_type=0": "--per-type 0"}),
        (lambda: pl.answer("/tmp/nonexistent.parquet", explain=-1),
         ["answer", "/tmp/nonexistent.parquet", "--explain", "-1"], {"explain=-1": "--explain -1"}),
        (lambda: pl.query("binding(?x, ?y)", dataset="ppi5k"), ["query", "binding(?x, ?y)", "--dataset", "ppi5k"],
         {"graph=": "--graph", "adjacency=": "--adjacency"}),
    ],
)
def test_error_messages_are_the_cli_lines_in_python_words(call, args: list[str], spelled: dict[str, str]) -> None:
    """The same line from both doors, except that Python names keyword arguments where the CLI names flags."""
    require_data("ppi5k")
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2
    with pytest.raises(pl.PipelineError) as info:
        call()
    python = str(info.value)
    if spelled:
        assert "--" not in python, python
    for keyword in spelled:
        assert keyword in python
        python = python.replace(keyword, spelled[keyword])
    assert res.output == f"error: {python}\n"


def test_a_path_error_is_a_pipeline_error_and_still_an_oserror() -> None:
    from pipeline.api import _one_line
    from pipeline.cli.group import _path_error

    missing = "/nonexistent/folder/file"
    with pytest.raises(pl.PipelineError) as info:
        _one_line(lambda: open(missing))()
    assert isinstance(info.value, OSError) and info.value.filename == missing
    assert str(info.value) == f"{missing}: No such file or directory"
    try:
        open(missing)
    except OSError as exc:
        assert _path_error(exc) == f"error: {info.value}"


def readme_python_blocks() -> tuple[str, str]:
    """The "From Python" section's code and the output it shows."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    return code, shown


def test_readme_from_python_runs_every_line(store_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, shown = readme_python_blocks()
    assert "pl.query(" in code and "pl.evaluate(" in code
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md (From Python)", "exec"), scope)  # noqa: S102
    printed = "\n".join(line.rstrip() for line in out.getvalue().splitlines())
    assert shown.strip("\n") in printed
    table = scope["table"]
    assert isinstance(table, pd.DataFrame)
    assert list(table.index) == ["tau", "rho", "MAP", "NDCG", "MAP chance", "NDCG chance"]
    # what the README says of SRC's part: the query over the export has answers, every metric is defined,
    # and SRC ranks the true answers above chance on every type
    assert re.search(r"\[adjacency .*; [1-9]\d* answers\]", printed), printed
    assert not table.isna().any().any(), table
    assert (table.loc["MAP"] > table.loc["MAP chance"]).all() and (table.loc["NDCG"] > table.loc["NDCG chance"]).all()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]  # nothing written where it runs


def test_dir_lists_the_public_names_only() -> None:
    """A notebook's completion and dir(pl) listed `Any` and `annotations` (the package's own imports)."""
    names = dir(pl)
    assert set(pl.__all__) <= set(names) and "Any" not in names and "annotations" not in names
    assert all(n in pl.__all__ or n.startswith("__") for n in names)


def test_a_query_with_no_answer_shows_why_in_its_repr(store_env: str, tmp_path: Path) -> None:
    """A notebook cell ending in pl.query(...) showed nothing when no entity answered (the reason sat in
    .empty_reason): the Ranking's repr is `pipeline query`'s output, the reason included."""
    tsv = tmp_path / "tiny.tsv"
    tsv.write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\nbob\tknows\tcid\t0.6\n"
                   "ann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    pl.ingest("tiny", source=tsv, quiet=True)
    empty = pl.query("knows(ann, ?y, 0.95)", dataset="tiny", graph="test")
    assert repr(empty).splitlines() == [
        "knows(ann, ?y, 0.95)   [graph test; 0 answers]",
        "no answer: knows(ann, ?y, 0.95): no fact meets alpha 0.95 on graph test (best confidence 0.9); try alpha <= 0.9"]
    found = repr(pl.query("knows(ann, ?y, 0.5)", dataset="tiny", graph="test")).splitlines()
    assert found[0] == "knows(ann, ?y, 0.5)   [graph test; 1 answers]" and found[2].split() == ["1", "1", "bob", "0.9"]


def test_a_query_with_no_answer_over_an_export_reads_no_file_again(tiny: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reason of an empty answer reads the export's index the query was answered with (kept per export
    in this process), not the export's files: a notebook's second pl.query costs the same with or without
    answers. Its best confidence is the export's own, as its facts read from the files say."""
    from pipeline.core import checksums
    from pipeline.formats import adjacency as export_files

    adj = tiny["adj"]
    best = float(adj.facts.query("relation == 'links' and head == 'node_00'")["confidence"].max())
    assert len(pl.query("links(node_00, ?y)", dataset="tiny", adjacency=adj).frame) > 0  # loads the export once

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("the export's files were read again")

    monkeypatch.setattr(export_files, "read_relation_file", no_read)
    monkeypatch.setattr(checksums, "check_file", no_read)
    empty = pl.query("links(node_00, ?y, 1)", dataset="tiny", adjacency=adj)
    assert empty.n_answers == 0
    assert empty.empty_reason == (f"no answer: links(node_00, ?y, 1): no fact meets alpha 1 in the export (facts >= "
                                  f"{adj.manifest['threshold']:g}) (best confidence {round(best, 6):g}); try alpha "
                                  f"<= {_floor_4(best)}")


def _floor_4(x: float) -> str:
    """The largest 4-decimal alpha a float32 confidence x meets, written as the reason writes it."""
    import numpy as np

    a = round(x, 4)
    while np.float32(x) < np.float32(a):
        a = round(a - 1e-4, 4)
    return f"{a:g}"
