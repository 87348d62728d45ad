"""Confidence prediction metrics: MSE and MAE of predicted vs. true confidences (design section 2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from pipeline.models.base import ConfidenceModel


def confidence_errors(model: ConfidenceModel, facts: pd.DataFrame) -> dict[str, float]:
    """MSE and MAE over the rows of `facts` (columns h, r, t, conf; conf 0 for negatives).
    Returns {"mse", "mae", "n"}; NaN errors for an empty frame."""
    if len(facts) == 0:
        return {"mse": float("nan"), "mae": float("nan"), "n": 0}
    as_t = lambda c: torch.tensor(facts[c].to_numpy(np.int64))  # noqa: E731
    pred = model.score(as_t("h"), as_t("r"), as_t("t")).double().cpu().numpy()
    err = pred - facts["conf"].to_numpy(np.float64)
    return {"mse": float(np.mean(err**2)), "mae": float(np.mean(np.abs(err))), "n": int(len(facts))}


def mean_predictor(train_conf: np.ndarray, valid_conf: np.ndarray) -> dict[str, float]:
    """The baseline every model must beat: predict the mean train confidence for every valid fact.
    Returns {"confidence": that mean, "valid_mse": its MSE on `valid_conf`} (NaN where either is empty)."""
    train_conf, valid_conf = np.asarray(train_conf, np.float64), np.asarray(valid_conf, np.float64)
    if len(train_conf) == 0 or len(valid_conf) == 0:
        return {"confidence": float("nan"), "valid_mse": float("nan")}
    mean = float(train_conf.mean())
    return {"confidence": mean, "valid_mse": float(np.mean((valid_conf - mean) ** 2))}


def evaluate_run(model: ConfidenceModel, kg) -> dict[str, dict[str, float]]:
    """Errors on valid positives, test positives and (CN15k) the test file's sampled negatives."""
    out = {
        "valid": confidence_errors(model, kg.split_facts("val")),
        "test": confidence_errors(model, kg.split_facts("test")),
    }
    if len(kg.test_negatives):
        out["test_negatives"] = confidence_errors(model, kg.test_negatives.assign(conf=0.0))
    return out
