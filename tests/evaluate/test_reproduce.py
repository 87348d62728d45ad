"""The one-command reproduction on a toy data set: every stage runs once, a re-run skips them all."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from pipeline.stages.reproduce import ReproduceConfig, reproduce
from tests.models.toy import toy_kg
from tests.results_pages import render, tables


@pytest.mark.slow
def test_reproduce_runs_then_resumes(fresh_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kg = toy_kg(n_entities=40, n_relations=3, n_facts=700, seed=1, softlogic=False)
    uri = f"falkordb://{fresh_store.host}:{fresh_store.port}/{fresh_store.graph}"
    cfg = ReproduceConfig(
        dataset="toy",
        epochs=3,
        dim=8,
        per_type=3,
        train_per_type=4,
        alpha="normal",
        beta="equal",
        threshold=0.6,
        l_epochs=2,
        seed=0,
        device="cpu",
    )
    logs: list[str] = []
    (tmp_path / "docs").mkdir()  # a docs folder is given, never made at a path that is no checkout's
    first = reproduce(cfg, tmp_path / "work", tmp_path / "docs", uri, log=logs.append, progress=False, kg=kg)
    ran = [s["stage"] for s in first["stages"] if not s["skipped"]]
    assert ran == [
        "ingest",
        "sample train",
        "sample valid",
        "sample test",
        "train ukge_logi",
        "export ukge_logi",
        "answer ukge_logi none",
        "answer ukge_logi D",
        "answer ukge_logi L",
        "answer ukge_logi D+L",
    ]
    results = json.loads((tmp_path / "docs" / "results.json").read_text())
    assert set(results["toy"]) == {f"ukge_logi {m}" for m in ("SRC", "SRC(D)", "SRC(L)", "SRC(D+L)")}
    assert set(results["toy"]["ukge_logi SRC"]) == {"tau", "rho", "map", "ndcg"}
    # the main table's backbone beside it: the trained run, its valid MSE and the mean predictor's
    backbone = results["backbones"]["toy"]
    run = json.loads((tmp_path / "work" / "runs" / "toy-ukge_logi-s0" / "results.json").read_text())
    assert backbone["model"] == "ukge_logi" and backbone["model_hash"] == run["model_hash"]
    assert backbone["valid_mse"] == pytest.approx(run["valid"]["mse"], abs=1e-6)
    assert backbone["mean_valid_mse"] == pytest.approx(run["mean_predictor"]["valid_mse"], abs=1e-6)
    assert (tmp_path / "docs" / "results_toy.png").exists()
    # the reproduction's record: what the results page's tables read (no page is written)
    assert not (tmp_path / "docs" / "results.md").exists()
    (record,) = json.loads((tmp_path / "docs" / "results_reproduce.json").read_text())["toy"]
    assert sorted(record["methods"]) == sorted(results["toy"])
    assert sorted(n for n, _ in record["stages"]) == sorted(ran) and record["date"].endswith("UTC")
    assert record["command"].startswith("pipeline reproduce toy --models ukge_logi ")
    assert set(record["throughput"]) == {f"answer ukge_logi {c}" for c in ("none", "D", "L", "D+L")}
    assert set(record["l_checks"]) == {"ukge_logi L", "ukge_logi D+L"}
    ledger = json.loads((tmp_path / "work" / "stages.json").read_text())
    assert dict(record["stages"]) == {n: round(e["seconds"], 3) for n, e in ledger.items()}
    main = render("results.main", tmp_path / "docs")
    assert f"- toy, ukge_logi SRC, SRC(D), SRC(L), SRC(D+L): `{record['command']}`; {record['machine']}; " in main
    shown = tables().reproduction("toy")(tmp_path / "docs")
    assert all(f"| {name} | {seconds:.1f} |" in shown for name, seconds in record["stages"])

    _check_metrics_independently(first, tmp_path / "work", kg)
    # pl.run's Experiment shows, per method, pl.evaluate's table of its answers file (chance rows included)
    import pipeline as pl
    from pipeline.stages.reproduce import Experiment

    exp = Experiment.of(first)
    for method, file in exp.paths["answers"].items():
        pd.testing.assert_frame_equal(exp.per_type[method], pl.evaluate(file))
        assert exp.table.loc[method].tolist() == pytest.approx(exp.per_type[method]["avg"].tolist(), nan_ok=True)
    # a random ranking's score is the query set's, not the method's: one chance level for every method
    assert exp.table["MAP chance"].nunique() == 1 and exp.table["NDCG chance"].nunique() == 1
    assert 0 < exp.table["MAP chance"].iloc[0] < 100
    # the saved settings replay the same reproduction: every stage is found done
    assert ReproduceConfig.from_file(tmp_path / "work" / "reproduce.json", "toy") == cfg

    second = reproduce(cfg, tmp_path / "work", tmp_path / "docs", uri, log=logs.append, progress=False, kg=kg)
    assert all(s["skipped"] for s in second["stages"])
    assert [r["summary"] for r in second["reports"]] == [r["summary"] for r in first["reports"]]

    # A changed setting re-runs exactly the stages that depend on it.
    third = reproduce(
        ReproduceConfig(**{**cfg.__dict__, "l_epochs": 3}),
        tmp_path / "work",
        None,
        uri,
        log=logs.append,
        progress=False,
        kg=kg,
    )
    assert [s["stage"] for s in third["stages"] if not s["skipped"]] == [
        "answer ukge_logi L",
        "answer ukge_logi D+L",
    ]

    # Selecting the last epoch retrains (its own stage key) and the note names the option; the earlier
    # default run's key is unchanged, which the skips above already prove.
    fourth = reproduce(
        ReproduceConfig(**{**cfg.__dict__, "l_epochs": 3, "select_on": "last"}),
        tmp_path / "work",
        tmp_path / "docs",
        uri,
        log=logs.append,
        progress=False,
        kg=kg,
    )
    assert "train ukge_logi" in [s["stage"] for s in fourth["stages"] if not s["skipped"]]
    run_cfg = json.loads((tmp_path / "work" / "runs" / "toy-ukge_logi-s0" / "config.json").read_text())
    assert run_cfg["select_on"] == "last" and run_cfg["epochs"] == 3
    records = json.loads((tmp_path / "docs" / "results_reproduce.json").read_text())["toy"]
    assert len(records) == 1  # a re-run of the same rows replaces their record
    assert "--epochs 3 --select-on last" in records[0]["command"]

    # Code that samples differently (a new SAMPLING_VERSION) re-ingests and re-samples, and keeps the trained
    # model (training does not read the store): a set written by older sampling code is never reused.
    import pipeline.stages.reproduce as rp

    monkeypatch.setattr(rp, "SAMPLING_VERSION", rp.SAMPLING_VERSION + 1)
    fifth = reproduce(
        ReproduceConfig(**{**cfg.__dict__, "l_epochs": 3, "select_on": "last"}),
        tmp_path / "work", None, uri, log=logs.append, progress=False, kg=kg,
    )
    ran = [s["stage"] for s in fifth["stages"] if not s["skipped"]]
    assert ran[:4] == ["ingest", "sample train", "sample valid", "sample test"]
    assert "train ukge_logi" not in ran and "export ukge_logi" not in ran

    # An L setting re-runs exactly the stages that fit L; the note names it, says what L's
    # selection did and shows every check's valid score
    logs.clear()
    sixth = reproduce(
        ReproduceConfig(**{**cfg.__dict__, "l_epochs": 3, "select_on": "last", "l_settings": {"l_lr": 0.01}}),
        tmp_path / "work", tmp_path / "docs", uri, log=logs.append, progress=False, kg=kg,
    )
    assert [s["stage"] for s in sixth["stages"] if not s["skipped"]] == ["answer ukge_logi L", "answer ukge_logi D+L"]
    assert any(line.strip().startswith("L kept ") for line in logs)
    (record,) = json.loads((tmp_path / "docs" / "results_reproduce.json").read_text())["toy"]
    assert "--l-epochs 3 --l-lr 0.01" in record["command"]
    checks = tables().l_checks("toy")(tmp_path / "docs")
    assert checks.startswith("| check | ukge_logi L: valid | ukge_logi L: loss | ukge_logi D+L: valid |")
    assert "| identity |" in checks and len(record["l_checks"]["ukge_logi L"]["checks"]) == 4  # identity + 3


def test_the_experiment_table_shows_chance_beside_map_and_ndcg(tmp_path: Path) -> None:
    """Experiment.of: per method, the averages of pl.evaluate's rows (tau, rho, MAP, NDCG, then the chance
    of MAP and NDCG from the report's ``random``); a report without ``random`` (no entity count) shows NaN."""
    from pipeline.stages.reproduce import Experiment

    def report(method: str, tau: float, chance_map: float | None) -> dict:
        summary = {m: {"1p": tau + i, "2p": tau + 2 * i, "avg": tau + 1.5 * i}
                   for i, m in enumerate(("tau", "rho", "map", "ndcg"))}
        rnd = {} if chance_map is None else {"random": {
            "map": {"1p": chance_map, "2p": chance_map + 2, "avg": chance_map + 1},
            "ndcg": {"1p": 2 * chance_map, "2p": 2 * chance_map + 2, "avg": 2 * chance_map + 1}}}
        return {"method": method, "file": f"{method}.parquet", "summary": summary, **rnd}

    summary = {"reports": [report("ukge_logi SRC(D)", 20.0, 3.0), report("ukge_logi SRC", 10.0, None)],
               "out": str(tmp_path), "stages": [], "seconds": 1.0}
    exp = Experiment.of(summary)
    assert list(exp.table.index) == ["ukge_logi SRC", "ukge_logi SRC(D)"]
    assert list(exp.table.columns) == ["tau", "rho", "MAP", "NDCG", "MAP chance", "NDCG chance"]
    assert exp.table.loc["ukge_logi SRC(D)"].tolist() == [20.0, 21.5, 23.0, 24.5, 4.0, 7.0]
    assert exp.table.loc["ukge_logi SRC"].tolist()[:4] == [10.0, 11.5, 13.0, 14.5]
    assert exp.table.loc["ukge_logi SRC"].isna().tolist()[4:] == [True, True]
    frame = exp.per_type["ukge_logi SRC(D)"]
    assert list(frame.columns) == ["1p", "2p", "avg"]
    assert frame.loc["MAP chance"].tolist() == [3.0, 5.0, 4.0] and frame.loc["NDCG chance"].tolist() == [6.0, 8.0, 7.0]


def _check_metrics_independently(summary: dict, work: Path, kg) -> None:
    """Each variant's reported metrics equal those recomputed here from the export, the chosen delta and the
    saved L, without the reproduction's wiring: a miswired calibration (delta not applied, L not applied,
    another variant's file) changes a value and fails."""
    from pipeline.engine import as_adjacency
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.formats.answers import read_answers
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods import SRC
    from pipeline.methods.src.affine import calibrated_adjacency, feature_tables, load_affine
    from pipeline.models import load_run
    from pipeline.stages.answer import answer_query_set
    from pipeline.stages.evaluate import query_metrics, summarise

    test = read_query_set(next((work / "queries").glob("toy_test_*.parquet")))
    graph, _ = load_adjacency(next((work / "exports").iterdir()))
    model = load_run(next((work / "runs").iterdir()))
    by_method = {r["method"]: r for r in summary["reports"]}
    for label, report in by_method.items():
        meta = read_answers(report["file"]).meta
        adj = as_adjacency(graph)
        if "L" in meta["calibration"]:
            tables = feature_tables(model, "cpu")
            calib = load_affine(Path(meta["l_dir"]), tables[0].shape[1], tables[1].shape[1])
            with torch.no_grad():
                adj = calibrated_adjacency(adj, calib, tables)
        frame, _ = answer_query_set(test, SRC.over(adj, "toy", meta.get("delta", 0.0)), progress=False)
        assert summarise(query_metrics(frame)) == report["summary"], label
    assert by_method["ukge_logi SRC"]["summary"]["ndcg"]["avg"] > 0  # the check is not between empty tables


def test_each_data_set_reproduces_its_own_recipe_unless_told_otherwise() -> None:
    """`pipeline reproduce DATASET` alone runs what the data set's valid queries chose (docs: its main table);
    a data set without a recipe keeps the general defaults; a value given always wins."""
    from pipeline.stages.reproduce import DATASET_DEFAULTS, dataset_defaults

    ppi = ReproduceConfig(dataset="ppi5k")
    # PPI5k: UKGE logi trained 300 epochs, kept at the last, T = 0.1, hybrid queries
    assert (ppi.models, ppi.epochs, ppi.select_on, ppi.threshold, ppi.alpha) == (
        ("ukge_logi",), 300, "last", 0.1, "hybrid")
    cn = ReproduceConfig(dataset="cn15k")
    # CN15k: UKGE logi trained 40 epochs, kept at the last, exported at T = 0.4
    assert (cn.epochs, cn.select_on, cn.threshold, cn.negative_weight, cn.alpha) == (40, "last", 0.4, None, "hybrid")
    toy = ReproduceConfig(dataset="toy")
    assert "toy" not in DATASET_DEFAULTS and dataset_defaults("toy") == {"alpha": "hybrid", "threshold": 0.1}
    assert (toy.epochs, toy.select_on, toy.threshold, toy.alpha) == (None, None, 0.1, "hybrid")
    # an explicit value always wins, and the replayed settings are the resolved ones
    mine = ReproduceConfig(dataset="cn15k", epochs=3, select_on="valid_pos_neg", threshold=0.5, negative_weight=0.1,
                           alpha="squk")
    assert (mine.epochs, mine.select_on, mine.threshold, mine.negative_weight, mine.alpha) == (
        3, "valid_pos_neg", 0.5, 0.1, "squk")
    assert ReproduceConfig(**{**cn.__dict__}) == cn
    # the stage keys of a generic data set are those its explicit settings had before the recipes existed
    assert toy.key("threshold") == ReproduceConfig(dataset="toy", threshold=0.1).key("threshold")


def test_query_counts_fit_the_graph() -> None:
    """pl.run with its defaults on Les Misérables (406 train facts) sampled 100 valid/test and 200 train
    queries per type, and calibration L and D+L took 5.7 minutes of a 7-minute run: the counts not given are
    now fitted to the graph (one per 20 / 10 train facts, at least 10 / 20, at most 100 / 200), said in one
    line up front; counts given are kept, and every benchmark keeps the literature's."""
    from pipeline.stages.reproduce import fitted_counts, with_counts

    assert fitted_counts(406) == (20, 40)
    assert fitted_counts(50) == (10, 20) and fitted_counts(1_999) == (99, 199) and fitted_counts(2_000) == (100, 200)
    assert fitted_counts(214_661) == (100, 200)  # PPI5k's train facts
    logs: list[str] = []
    got = with_counts(ReproduceConfig(dataset="lesmis"), 406, logs.append)
    assert (got.per_type, got.train_per_type) == (20, 40)
    assert logs == ["lesmis: 406 train facts: 20 valid/test and 40 train queries per type (fitted to the graph; "
                    "the literature's 100/200 with per_type=100 and train_per_type=200)"]
    logs.clear()
    given = with_counts(ReproduceConfig(dataset="lesmis", per_type=7), 406, logs.append)
    assert (given.per_type, given.train_per_type) == (7, 40) and len(logs) == 1
    logs.clear()
    big = with_counts(ReproduceConfig(dataset="ppi5k"), 214_661, logs.append)
    assert (big.per_type, big.train_per_type) == (100, 200) and logs == []


def test_the_l_verdict_lists_epochs_in_order() -> None:
    """L.json's per-epoch checks are JSON keys, read back sorted as text (0, 1, 10, 11, ..., 2, 20): the
    verdict listed them so; now in epoch order."""
    from pipeline.stages.reproduce import l_verdict

    epochs = {str(k): {"valid": 50.0 + (k == 3), "step": 4 * k, "loss": None if k == 0 else 0.1} for k in range(12)}
    as_read = dict(sorted(epochs.items()))  # json.loads of a key-sorted file: "0", "1", "10", "11", "2", ...
    assert list(as_read)[:4] == ["0", "1", "10", "11"]
    line = l_verdict({"epochs": as_read, "config": {}})
    listed = [int(part.split(":")[0]) for part in line.split("by epoch: ")[1].rstrip(")").split(", ")]
    assert listed == list(range(1, 12)) and line.startswith("L kept epoch 3 of 11")
