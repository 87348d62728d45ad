"""Every input checked at the door (issue 45, items 12, 13, 14, 16): CLI options, environment variables and
the Python API's arguments out of range are one line (one pl.PipelineError naming the argument), never a
traceback and never silently clamped or ignored; names from the data never reach the terminal raw."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import pipeline as pl
from tests.cli_checks import invoke as run
from tests.cli_checks import one_line_error as one_line

KG = "head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\nbob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\n" \
     "cid\tknows\tdan\t0.7\ndan\tknows\tann\t0.5\nbob\tlikes\tdan\t0.4\ncid\tlikes\tann\t0.3\n"
EVIL = "evil\x1b]0;PWNED\x07x"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize(("flags", "needle"), [
    (["--split", "nan,0,1"], "--split 'nan,0,1'"), (["--split", "0,0.5,0.5"], "train > 0"),
    (["--split", "1.5,-0.5,0"], "fractions >= 0"), (["--seed", "-1"], "--seed -1: must be at least 0"),
    (["--seed", "12345678901234567890123"], "--seed 12345678901234567890123: must be at most 4294967295"),
])  # fmt: skip
def test_ingest_options_out_of_range(home, tmp_path, flags, needle):
    src = tmp_path / "kg.tsv"
    src.write_text(KG)
    one_line(run("ingest", "door", "--from", str(src), *flags, "--store", "bolt://127.0.0.1:1"), needle)
    assert not (home / "datasets" / "door").exists()


def test_a_fifo_or_a_device_as_from_says_what_it_is(home, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        one_line(run("ingest", "door", "--from", str(path)), "not a regular file or folder")


@pytest.mark.parametrize("seed", ["-1", "12345678901234567890123"])
def test_sample_seed_out_of_range(home, tmp_path, seed):
    one_line(run("sample", "ppi5k", "--out", str(tmp_path / "q"), "--seed", seed), f"--seed {seed}: must be at")


@pytest.mark.parametrize(("env", "value"), [("PIPELINE_KERNELS", "garbage"), ("PIPELINE_VERIFY", "garbage"),
                                            ("PIPELINE_PAIR_CACHE", "/etc/passwd")])
def test_environment_typos_are_refused_not_ignored(home, monkeypatch, env, value):
    monkeypatch.setenv(env, value)
    one_line(run("query", "binding(#0, ?y)", "--dataset", "ppi5k", "--graph", "test"), f"{env}=")
    with pytest.raises(pl.PipelineError, match=env):
        pl.query("#0(#0, ?y)", dataset="ppi5k", graph="test")


def test_api_misuse_is_a_pipeline_error_naming_the_argument(home):
    cases = [
        (lambda: pl.query(None, dataset="ppi5k", graph="test"), "text"),
        (lambda: pl.query("#0(#0, ?y)", dataset=None, graph="test"), "dataset"),
        (lambda: pl.query("#0(#0, ?y)", dataset="ppi5k", graph="test", top="5"), "top: expected an integer"),
        (lambda: pl.query("#0(#0, ?y)", dataset="ppi5k", graph="test", top=-1), "top: -1 is out of range"),
        (lambda: pl.query("#0(#0, ?y)", dataset="ppi5k", graph="tset"), "graph"),
        (lambda: pl.ingest(None, source="x.tsv"), "name"),
        (lambda: pl.cypher(None), "statement"),
        (lambda: pl.cypher("RETURN $x", {"x": 10**30}), "64-bit"),
        (lambda: pl.answer(None), "queries"),
    ]
    for call, needle in cases:
        with pytest.raises(pl.PipelineError, match=needle):
            call()


def test_a_query_of_thousands_of_digits_and_a_huge_unknown_name_are_short_lines(home):
    res = run("query", "#" + "9" * 5000 + "(#0, ?y)", "--dataset", "ppi5k", "--graph", "test")
    # a syntax error is its line, the text around the column and a caret: a few hundred characters
    assert res.exit_code == 2 and "too long (5000 digits)" in res.stderr and len(res.stderr) < 500
    res = run("query", "binding(" + "x" * 100_000 + ", ?y)", "--dataset", "ppi5k", "--graph", "test")
    assert res.exit_code == 2 and len(res.stderr) < 1000 and "100,000 characters" in res.stderr
    line = one_line(run("train", "d" * 100_000, "--model", "ukge_logi"), "unknown data set")
    assert len(line) < 1000


def test_names_with_terminal_escapes_never_reach_the_terminal_raw(home, tmp_path, fresh_store):
    src = tmp_path / "kg.tsv"
    src.write_text(KG.replace("dan", EVIL))
    assert run("ingest", "esc", "--from", str(src), "--store", fresh_store.uri).exit_code == 0
    for args in (["query", "knows(cid, ?y)", "--dataset", "esc", "--graph", "test"],
                 ["query", "knows(cid, ?y)", "--dataset", "esc", "--graph", "test", "--explain"],
                 ["query", f'knows("{EVIL}", ?y)', "--dataset", "esc", "--graph", "test"],
                 ["query", "knows(evil, ?y)", "--dataset", "esc", "--graph", "test"]):
        res = run(*args)
        assert "\x1b" not in res.output and "\x07" not in res.output, res.output
    shown = run("query", "knows(cid, ?y)", "--dataset", "esc", "--graph", "test").stdout
    assert "evil\\x1b]0;PWNED\\x07x" in shown  # escaped, readable
    as_json = json.loads(run("query", "knows(cid, ?y)", "--dataset", "esc", "--graph", "test", "--json").stdout)
    assert as_json[0]["name"] == EVIL  # the data itself is kept exactly


def test_a_data_set_without_valid_facts_is_not_trained_to_a_nan_selection(home, tmp_path, fresh_store):
    """`--split 1,0,0` records a data set to query; training it selected epochs on a valid MSE of nan. It
    keeps the last epoch now, says so on stderr and records it."""
    src = tmp_path / "kg.tsv"
    src.write_text(KG)
    assert run("ingest", "novalid", "--from", str(src), "--split", "1,0,0", "--store", fresh_store.uri).exit_code == 0
    res = run("train", "novalid", "--model", "ukge_logi", "--dim", "8", "--epochs", "3", "--out", str(tmp_path / "r"),
              "--device", "cpu")
    assert res.exit_code == 0 and "no valid facts to select an epoch on: the last epoch is kept" in res.stderr
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["selection"] == "last (no valid facts)" and results["best_epoch"] == 3
