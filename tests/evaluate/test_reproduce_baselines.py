"""`pipeline reproduce --baselines` on a toy data set: the baselines' train sets are sampled in the asked
counts, trained, answered and evaluated into the same table; a re-run skips every stage and more epochs
resume the runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.stages.reproduce import ReproduceConfig, reproduce
from tests.models.toy import toy_kg
from tests.results_pages import render

QE = {
    "train_per_type": 6,
    "small_per_type": 3,
    "dim": 8,
    "hidden": 8,
    "epochs": 2,
    "eval_every": 1,
    "max_valid": 0,
    "batch_size": 8,
    "negatives": 8,
    "cone_ne": {"lr": 0.01},
}


@pytest.mark.slow
def test_reproduce_with_baselines_runs_then_resumes(fresh_store, tmp_path: Path) -> None:
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods import METHODS
    from pipeline.stages.answer import answer_query_set
    from pipeline.stages.evaluate import query_metrics, summarise

    kg = toy_kg(n_entities=40, n_relations=3, n_facts=700, seed=1, softlogic=False)
    uri = f"falkordb://{fresh_store.host}:{fresh_store.port}/{fresh_store.graph}"
    cfg = ReproduceConfig(
        dataset="toy",
        models=(),
        per_type=3,
        alpha="normal",
        beta="equal",
        seed=0,
        device="cpu",
        baselines=("logice_ne", "cone_ne"),
        qe=QE,
    )
    work, docs = tmp_path / "work", tmp_path / "docs"
    docs.mkdir()  # a docs folder is given, never made at a path that is no checkout's
    first = reproduce(cfg, work, docs, uri, log=lambda m: None, progress=False, kg=kg)
    assert [s["stage"] for s in first["stages"] if not s["skipped"]] == [
        "ingest",
        "sample valid",
        "sample test",
        "sample qe-train-6",
        "sample qe-train-neg-3",
        "train-qe logice_ne",
        "answer logice_ne",
        "train-qe cone_ne",  # the train sets are shared: ConE's sampling stages are skipped
        "answer cone_ne",
    ]
    # the train sets hold the asked counts of the asked types, in the reproduction's alpha/beta modes
    big = read_query_set(next((work / "queries" / "qe-train-6").glob("*.parquet")))
    small = read_query_set(next((work / "queries" / "qe-train-neg-3").glob("*.parquet")))
    assert big.frame["type"].value_counts().to_dict() == {"1p": 6, "2p": 6, "2i": 6}
    assert small.frame["type"].value_counts().to_dict() == {"2in": 3, "2il": 3}
    assert (big.meta["split"], big.meta["alpha"], big.meta["beta"]) == ("train", "normal", "equal")
    run_cfg = json.loads((work / "runs" / "toy-cone_ne-s0" / "config.json").read_text())
    assert run_cfg["lr"] == 0.01 and run_cfg["dim"] == 8 and len(run_cfg["train_queries"]) == 2
    logice_cfg = json.loads((work / "runs" / "toy-logice_ne-s0" / "config.json").read_text())
    assert (logice_cfg["lr"], logice_cfg["batch_negatives"]) == (1e-3, 64)  # LogicE+NE's own defaults
    assert (run_cfg["batch_negatives"], run_cfg["epochs"]) == (64, 2)  # ConE+NE's default, QE's epochs

    results = json.loads((docs / "results.json").read_text())
    assert set(results["toy"]) == {"LogicE+NE", "ConE+NE"}
    (record,) = json.loads((docs / "results_reproduce.json").read_text())["toy"]
    assert "--baselines logice_ne,cone_ne" in record["command"] and "--qe cone_ne.lr=0.01" in record["command"]
    assert "train-qe cone_ne" in dict(record["stages"]) and "logice_ne: 6 per 1p/2p/2i and 3 per 2in/2il" in record["queries"]
    assert sorted(record["methods"]) == ["ConE+NE", "LogicE+NE"]
    # the results page's baselines table reads them, each beside its provenance
    table = render("results.baselines", docs)
    for method in ("LogicE+NE", "ConE+NE"):
        avg = [f"{results['toy'][method][m]['avg']:.1f}" for m in ("tau", "rho", "map", "ndcg")]
        assert f"| toy | {method} | tie-aware | {' | '.join(avg)} |" in table
    assert f"- toy: `{record['command']}`; {record['machine']}; {record['date']}." in table
    # each row is the run's own answers to the reproduction's test set (wiring: right run, right set)
    test = read_query_set(next((work / "queries").glob("toy_test_*.parquet")))
    for report in first["reports"]:
        model = {"LogicE+NE": "logice_ne", "ConE+NE": "cone_ne"}[report["method"]]
        method = METHODS[model].build(work / "runs" / f"toy-{model}-s0", "cpu")
        frame, _ = answer_query_set(test, method, progress=False)
        assert summarise(query_metrics(frame)) == report["summary"]

    second = reproduce(cfg, work, None, uri, log=lambda m: None, progress=False, kg=kg)
    assert all(s["skipped"] for s in second["stages"])

    # more epochs: the runs resume from their checkpoints (no resampling); a test set is answered again
    # only when the selected model changed (the answer stage is keyed by the model file's content)
    digests = {m: _digest(work / "runs" / f"toy-{m}-s0" / "model.pt") for m in cfg.baselines}
    more = ReproduceConfig(**{**cfg.__dict__, "qe": {**QE, "epochs": 3}})
    third = reproduce(more, work, None, uri, log=lambda m: None, progress=False, kg=kg)
    changed = [m for m in cfg.baselines if _digest(work / "runs" / f"toy-{m}-s0" / "model.pt") != digests[m]]
    assert [s["stage"] for s in third["stages"] if not s["skipped"]] == [
        stage
        for m in cfg.baselines
        for stage in (f"train-qe {m}", *([f"answer {m}"] if m in changed else []))
    ]
    hist = json.loads((work / "runs" / "toy-cone_ne-s0" / "results.json").read_text())["history"]
    assert [h["epoch"] for h in hist] == [1, 2, 3]


def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_unknown_baseline_settings_fail_before_any_work(tmp_path: Path) -> None:
    from pipeline.core.errors import PipelineError, UnknownNameError
    from pipeline.stages.reproduce_baselines import qe_settings

    assert qe_settings("cone_ne", {"epochs": 3, "logice_ne": {"lr": 0.5}})["lr"] == 1e-3
    assert qe_settings("logice_ne", {"epochs": 3, "logice_ne": {"lr": 0.5}})["lr"] == 0.5
    # a data set's own defaults sit between the model's and the overrides
    ppi, cn = qe_settings("logice_ne", {}), qe_settings("logice_ne", {}, "cn15k")
    assert (ppi["lr"], ppi["batch_negatives"], ppi["train_per_type"]) == (1e-3, 64, 35_000)
    assert (cn["lr"], cn["batch_negatives"], cn["train_per_type"], cn["small_per_type"]) == (1e-2, 0, 53_000, 5_300)
    assert qe_settings("logice_ne", {"train_per_type": 7, "logice_ne": {"lr": 0.5}}, "cn15k")["lr"] == 0.5
    assert qe_settings("cone_ne", {"train_per_type": 7}, "cn15k")["train_per_type"] == 7
    assert qe_settings("cone_ne", {}, "cn15k")["batch_negatives"] == 0
    assert qe_settings("cone_ne", {}, "my_kg") == qe_settings("cone_ne", {})
    with pytest.raises(PipelineError, match=r"^qe=\{'epoch': 3\}: unknown setting \(did you mean epochs\?\)"):
        qe_settings("cone_ne", {"epoch": 3})
    # values are checked where they are declared (QEConfig), named as given
    with pytest.raises(PipelineError, match=r"^qe=\{'cone_ne': \{'lr': 5.0\}\}: must be at most 1$"):
        qe_settings("cone_ne", {"cone_ne": {"lr": 5.0}})
    with pytest.raises(PipelineError, match=r"^qe=\{'lr': 'nan'\}: expected a real number, not text$"):
        qe_settings("cone_ne", {"lr": "nan"})
    with pytest.raises(PipelineError, match=r"^qe=\{'dim': 1000.0\}: expected an integer, not a float$"):
        qe_settings("cone_ne", {"dim": 1e3})
    with pytest.raises(UnknownNameError, match="cone_ne"):
        qe_settings("cone", {})
    with pytest.raises(UnknownNameError, match="logice_ne"):
        qe_settings("cone_ne", {"logice": {"lr": 1.0}})
    with pytest.raises(PipelineError, match="seed"):
        qe_settings("cone_ne", {"seed": 1})  # the reproduction's seed is the baselines' seed
    # the reproduction refuses them before any work (no store, no ledger)
    with pytest.raises(UnknownNameError):
        reproduce(ReproduceConfig(dataset="toy", baselines=("cone",)), tmp_path / "w", kg=object())
    assert not (tmp_path / "w").exists()


def test_cli_qe_overrides_parse() -> None:
    from pipeline.cli.reproduce import _qe_overrides
    from pipeline.core.errors import PipelineError

    assert _qe_overrides(("epochs=4", "cone_ne.lr=3e-3", "loss=weighted")) == {
        "epochs": 4,
        "cone_ne": {"lr": 0.003},
        "loss": "weighted",
    }
    with pytest.raises(PipelineError, match="KEY=VALUE"):
        _qe_overrides(("epochs",))
