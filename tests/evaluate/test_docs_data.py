"""The results pages' data (pipeline/stages/docs_data.py) and its tables (tools/tables_results.py): which
record replaces which, a bad file refused in one line with nothing lost, the tables exact on hand-made data,
and `pipeline train --docs` writing the row the confidence table shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.errors import ArtifactError
from pipeline.stages import docs_data
from tests.results_pages import render, tables

SUMMARY = {"tau": {"1p": 50.0, "2p": 30.0, "avg": 40.0}, "rho": {"1p": 60.0, "2p": 40.0, "avg": 50.0},
           "map": {"1p": 70.0, "2p": 10.0, "avg": 40.0}, "ndcg": {"1p": 80.0, "2p": 20.0, "avg": 50.0}}


def _write(docs: Path, name: str, doc: object) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / name).write_text(json.dumps(doc))


# ------------------------------------------------------------------------------------------- the data


def test_a_damaged_data_file_is_one_line_and_stays_as_it_was(tmp_path: Path) -> None:
    assert docs_data.read(tmp_path / "absent.json") == {}
    bad = tmp_path / docs_data.ABLATION
    bad.write_text('{"ppi5k": {"seconds": 1')
    with pytest.raises(ArtifactError, match=r"results_ablation.json: not a JSON file \(.*\); fix or remove it"):
        docs_data.record_ablation(tmp_path, "cn15k", {"seconds": 2})
    assert bad.read_text() == '{"ppi5k": {"seconds": 1'  # nothing already recorded is lost
    bad.write_text("[1, 2]")
    with pytest.raises(ArtifactError, match="expected a JSON object, found list"):
        docs_data.read(bad)


def test_a_reproduction_replaces_the_records_of_the_rows_it_made_again(tmp_path: Path) -> None:
    src = {"methods": ["m SRC", "m SRC(D)"], "command": "first"}
    base = {"methods": ["LogicE+NE"], "command": "baselines"}
    docs_data.record_reproduction(tmp_path, "a", src)
    docs_data.record_reproduction(tmp_path, "a", base)  # another run's rows: both kept
    docs_data.record_reproduction(tmp_path, "b", src)  # another data set: its own list
    docs_data.record_reproduction(tmp_path, "a", {**src, "command": "again"})  # the same rows: replaced
    doc = json.loads((tmp_path / docs_data.REPRODUCTIONS).read_text())
    assert [r["command"] for r in doc["a"]] == ["baselines", "again"] and [r["command"] for r in doc["b"]] == ["first"]
    docs_data.record_reproduction(tmp_path, "a", {"methods": ["m SRC", "m SRC(D)", "LogicE+NE"], "command": "all"})
    assert [r["command"] for r in json.loads((tmp_path / docs_data.REPRODUCTIONS).read_text())["a"]] == ["all"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.sampled_from("abcde"), min_size=1), min_size=1, max_size=8))
def test_no_record_outlives_a_later_run_of_all_its_rows(tmp_path_factory, runs: list[set[str]]) -> None:
    """After any sequence of reproductions: the last one is recorded last, and no kept record's rows are all
    made again by a later one (a later, partial run leaves the earlier record whole)."""
    docs = tmp_path_factory.mktemp("docs")
    for i, methods in enumerate(runs):
        docs_data.record_reproduction(docs, "d", {"methods": sorted(methods), "command": str(i)})
    kept = json.loads((docs / docs_data.REPRODUCTIONS).read_text())["d"]
    assert kept[-1]["command"] == str(len(runs) - 1)
    for r in kept:
        later = runs[int(r["command"]) + 1:]
        assert not any(set(r["methods"]) <= m for m in later)
    dropped = set(range(len(runs))) - {int(r["command"]) for r in kept}
    assert all(any(runs[i] <= m for m in runs[i + 1:]) for i in dropped)


def test_a_backbone_row_is_replaced_only_by_the_same_settings(tmp_path: Path) -> None:
    row = {"dataset": "toy", "model": "ukge_logi", "lr": 0.001, "selection": "last", "epochs": 3, "dim": 8,
           "batch_size": 64, "negative_weight": 1.0, "test_mse": 0.2}
    docs_data.record_backbone_run(tmp_path, row)
    docs_data.record_backbone_run(tmp_path, {**row, "lr": 0.01, "test_mse": 0.3})
    docs_data.record_backbone_run(tmp_path, {**row, "test_mse": 0.1})  # the first run again: in its place
    runs = json.loads((tmp_path / docs_data.BACKBONE_RUNS).read_text())["runs"]
    assert [(r["lr"], r["test_mse"]) for r in runs] == [(0.001, 0.1), (0.01, 0.3)]


# ----------------------------------------------------------------------------------------- the tables


def test_the_main_table_on_hand_made_data(tmp_path: Path) -> None:
    _write(tmp_path, docs_data.RESULTS, {"ppi5k": {"m SRC(D+L)": SUMMARY, "m SRC": SUMMARY, "LogicE+NE": SUMMARY},
                                         "backbones": {"ppi5k": {"model": "m"}}})
    paper = {"tau": {"avg": 1.0}, "rho": {"avg": 2.0}, "map": {"avg": 3.0}, "ndcg": {"avg": 4.04}}
    chance = {"map": {"1p": 9.0, "avg": 9.0}, "ndcg": {"1p": 8.0, "avg": 8.0}, "tau": {"avg": float("nan")}}
    _write(tmp_path, docs_data.PROTOCOL, {"ppi5k": {"m SRC(D+L)": {"paper_protocol": paper, "random": chance}}})
    _write(tmp_path, docs_data.REPRODUCTIONS, {"ppi5k": [{
        "methods": ["m SRC", "m SRC(D+L)"], "command": "pipeline reproduce ppi5k", "machine": "M", "date": "D",
        "calibration": {"answer m D+L": "delta = 0.05; L kept the identity (...)"},
        "l_checks": {"m D+L": {"kept": 2, "checks": []}}}]})
    assert render("results.main", tmp_path).splitlines() == [
        "| data set | method | tau | rho | MAP | NDCG | paper protocol: tau / rho / MAP / NDCG | "
        "the paper's row: tau / rho / MAP / NDCG |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        "| PPI5k | m SRC | 40.0 | 50.0 | 40.0 | 50.0 | - | 56.5 / - / 68.4 / - |",
        "| PPI5k | m SRC(D+L) (delta 0.05; L: check 2 kept) | 40.0 | 50.0 | 40.0 | 50.0 | 1.0 / 2.0 / 3.0 / 4.0 | "
        "58.2 / 68.7 / 64.1 / 70.1 |",
        "| PPI5k | LogicE+NE | 40.0 | 50.0 | 40.0 | 50.0 | - | 14.8 / 20.7 / 8.0 / 16.4 |",
        "| PPI5k | chance (a random ranking) | - | - | 9.0 | 8.0 | - | - |",
        "",
        "Made by:",
        "",
        "- PPI5k, m SRC, SRC(D+L): `pipeline reproduce ppi5k`; M; D.",
    ]
    per_type = render("results.per_type.ppi5k", tmp_path).splitlines()
    assert per_type[0] == "| method | metric | 1p | 2p | avg |"
    assert per_type[2:4] == ["| m SRC | tau | 50.0 | 30.0 | 40.0 |", "|  | rho | 60.0 | 40.0 | 50.0 |"]
    assert per_type[-2:] == ["| chance | MAP | 9.0 | - | 9.0 |", "|  | NDCG | 8.0 | - | 8.0 |"]


def test_a_table_without_its_data_names_the_command_that_writes_it(tmp_path: Path) -> None:
    assert render("results.main", tmp_path) == "*No results recorded yet: `pipeline reproduce DATASET --docs docs` writes it.*"
    assert "pipeline train DATASET --model MODEL --docs docs" in render("results.confidence", tmp_path)
    assert "pipeline llm-eval ITEMS --docs docs" in render("results.llm", tmp_path)
    assert "--study soft-requirements" in render("results.ablation.cn15k", tmp_path)


def test_runs_are_grouped_by_what_made_them() -> None:
    ranges = tables()._ranges
    assert ranges([0, 1, 2, 5]) == "1-3, 6" and ranges([3]) == "4" and ranges([0, 2, 3]) == "1, 3-4"


def test_the_ablation_table_orders_the_settings_and_averages_them(tmp_path: Path) -> None:
    row = lambda n: {"ndcg": n, "tau": 1.0, "rho": 2.0, "map": 3.0, "paper_protocol": {"ndcg": n - 1},  # noqa: E731
                     "chance": {"map": 0.5, "ndcg": 0.25}, "doubly_tied": 1.25, "ndcg_per_type": {"2p": n, "1p": 1.0}}
    _write(tmp_path, docs_data.ABLATION, {"cn15k": {
        "settings": {"N+R": row(40.0), "Z+E": row(10.0), "N+E": row(30.0), "Z+R": row(20.0)},
        "baselines": {"ConE+NE trained on Z+E": {"Z+E": 5.0}}, "command": "C", "machine": "M", "date": "D",
        "backbone": "B", "threshold": 0.1, "per_type": 15, "seconds": 449.4}})
    lines = render("results.ablation.cn15k", tmp_path).splitlines()
    assert lines[2] == "| SRC (tie-aware) | 10.0 | 20.0 | 30.0 | 40.0 | 25.0 |"
    assert lines[3] == "| SRC, paper protocol | 9.0 | 19.0 | 29.0 | 39.0 | 24.0 |"
    assert lines[5] == "| ConE+NE trained on Z+E | 5.0 | - | - | - | - |"  # no average of one setting
    assert "| Z+E | 1.0 | 2.0 | 3.0 | 10.0 | - / - / - / 9.0 | 0.5 / 0.2 | 1.2% |" in lines
    assert "| SRC NDCG x100 | 1p | 2p |" in lines
    assert lines[-1] == ("Made by `C` over B, exported at T = 0.1: 15 test queries per type and setting, 449 s over "
                         "all stages; M; D.")


# ------------------------------------------------------------------------------- pipeline train --docs


@pytest.mark.slow
def test_train_records_the_row_the_confidence_table_shows(fresh_store, tmp_path: Path) -> None:
    from pipeline.cli import cli

    kg = tmp_path / "kg.tsv"
    rows = [(f"p{i}", "knows", f"p{(i + 1) % 12}", round(0.3 + 0.05 * i, 2)) for i in range(12)]
    rows += [(f"p{i}", "likes", f"p{(i + 5) % 12}", round(0.9 - 0.05 * i, 2)) for i in range(12)]
    kg.write_text("head\trelation\ttail\tconfidence\n" + "".join(f"{h}\t{r}\t{t}\t{c}\n" for h, r, t, c in rows))
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", "ringdocs", "--from", str(kg), "--store", fresh_store.uri,
                               "--split", "0.5,0.25,0.25"]).exit_code == 0
    docs = tmp_path / "docs"
    args = ["train", "ringdocs", "--model", "ukge_logi", "--dim", "8", "--epochs", "2", "--lr", "0.01",
            "--device", "cpu", "--out", str(tmp_path / "run"), "--docs", str(docs)]
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    (row,) = json.loads((docs / docs_data.BACKBONE_RUNS).read_text())["runs"]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert row["command"] == "pipeline train ringdocs --model ukge_logi --epochs 2 --dim 8 --lr 0.01 --device cpu"
    assert (row["dataset"], row["model"], row["lr"], row["dim"], row["epochs"]) == ("ringdocs", "ukge_logi", 0.01, 8, 2)
    assert row["test_mse"] == pytest.approx(results["test"]["mse"], abs=1e-6)
    assert row["valid_neg_mse"] == pytest.approx(results["valid_negatives"]["mse"], abs=1e-6)
    table = render("results.confidence", docs)
    assert (f"| 1 | ringdocs | ukge_logi | 0.01 | 2 | {row['best']} | {row['seconds_per_epoch']:.1f} | cpu | "
            f"{row['valid_mse']:.4f} | {row['valid_neg_mse']:.4f} | {row['test_mse']:.4f} | {row['test_mae']:.4f} | - | - |"
            ) in table
    assert f"- Run 1: `{row['command']}`; {row['machine']}; {row['date']}." in table
    assert f"recorded in {docs / docs_data.BACKBONE_RUNS}; `python tools/pages.py` regenerates" in res.stderr
    # the same settings again (the run reused): one row, in its place
    assert runner.invoke(cli, args).exit_code == 0
    assert len(json.loads((docs / docs_data.BACKBONE_RUNS).read_text())["runs"]) == 1
