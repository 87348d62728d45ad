"""docs/results.json's ``backbones``: what a table's backbone is and whether it predicts confidences (its
valid MSE beside the mean predictor's), with test errors on positives and negatives, published or sampled."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.models import default_config, load_run, train
from pipeline.models.evaluation import backbone_summary, sampled_negatives
from pipeline.stages.evaluate import BACKBONES, update_results
from tests.models.toy import toy_kg
from tests.results_pages import render


@pytest.mark.parametrize("published", [True, False])
def test_backbone_summary_of_a_trained_run(tmp_path: Path, published: bool) -> None:
    kg = toy_kg(negatives=published, softlogic=False)
    cfg = default_config("toy", "ukge_logi", epochs=3, dim=8, batch_size=32, lr=0.01, seed=4)
    res = train(kg, cfg, tmp_path / "run", progress=False)
    got = backbone_summary(tmp_path / "run", kg)
    assert got["model"] == "ukge_logi" and got["batch_size"] == 32 and got["epochs_run"] == 3
    assert got["valid_mse"] == pytest.approx(res["valid"]["mse"], abs=1e-6)
    # the mean predictor by hand: the mean train confidence against every valid positive
    train_mean = kg.graph("train")["conf"].mean()
    valid = kg.split_facts("val")["conf"].to_numpy()
    assert got["mean_valid_mse"] == pytest.approx(np.mean((valid - train_mean) ** 2), abs=1e-6)
    assert got["test_mse"] == pytest.approx(res["test"]["mse"], abs=1e-6)
    if published:
        assert got["test_negatives"] == "published"
        assert got["test_neg_mse"] == pytest.approx(res["test_negatives"]["mse"], abs=1e-6)
    else:
        # no published negatives: one corruption per test fact, scored here by the model itself
        assert "test_negatives" not in res and got["test_negatives"].startswith("sampled")
        neg = sampled_negatives(kg.split_facts("test"), kg.n_entities, 4)
        model = load_run(tmp_path / "run")
        as_t = lambda c: torch.tensor(neg[c].to_numpy(np.int64))  # noqa: E731
        pred = model.score(as_t("h"), as_t("r"), as_t("t")).double().numpy()
        assert got["test_neg_mse"] == pytest.approx(float(np.mean(pred**2)), abs=1e-6)
        assert backbone_summary(tmp_path / "run", kg) == got  # the same negatives every time


def test_results_json_keeps_each_data_sets_backbone(tmp_path: Path) -> None:
    """A reproduction replaces its own data set's entry only; the tables never list 'backbones' as a
    data set."""
    summary = {"tau": {"1p": 50.0, "avg": 50.0}, "rho": {"1p": 50.0, "avg": 50.0},
               "map": {"1p": 50.0, "avg": 50.0}, "ndcg": {"1p": 50.0, "avg": 50.0}}
    report = {"dataset": "a", "method": "m SRC", "summary": summary, "counts": {"1p": 1}}
    update_results([report], tmp_path, {"a": {"model": "ukge_logi", "valid_mse": 0.1}})
    update_results([{**report, "dataset": "b"}], tmp_path, {"b": {"model": "beurre", "valid_mse": 0.2}})
    update_results([report], tmp_path, {"a": {"model": "ukge_rect", "valid_mse": 0.05}})
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc[BACKBONES] == {"a": {"model": "ukge_rect", "valid_mse": 0.05}, "b": {"model": "beurre", "valid_mse": 0.2}}
    assert set(doc) == {"a", "b", BACKBONES}
    main = render("results.main", tmp_path)
    assert "| a | m SRC |" in main and "| b | m SRC |" in main and BACKBONES not in main
    backbones = render("results.backbones", tmp_path)
    assert "| a | ukge_rect," in backbones and "| b | beurre," in backbones
