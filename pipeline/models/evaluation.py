"""Confidence prediction metrics: MSE and MAE of predicted vs. true confidences (design section 2), and the
summary of a trained backbone that docs/results.json keeps beside the query-answering tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from pipeline.core.errors import PipelineError
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


def sampled_negatives(facts: pd.DataFrame, n_entities: int, seed: int) -> pd.DataFrame:
    """One corruption per fact (head or tail, at random) with confidence 0: h, r, t, conf. Fixed by the
    seed, so every epoch and every resumed run selects on the same negatives."""
    rng = np.random.default_rng(seed + 7919)
    h, t = facts["h"].to_numpy().copy(), facts["t"].to_numpy().copy()
    other = rng.integers(0, n_entities, len(facts))
    head = rng.random(len(facts)) < 0.5
    h[head], t[~head] = other[head], other[~head]
    return pd.DataFrame({"h": h, "r": facts["r"].to_numpy(), "t": t, "conf": np.zeros(len(facts))})


def backbone_summary(run_dir: str | Path, kg) -> dict[str, Any]:
    """What docs/results.json's ``backbones`` records of a table's backbone: the model and how it was
    trained and selected, its MSE on valid positives (``valid_mse``) beside that of predicting the mean
    train confidence (``mean_valid_mse``; a backbone that does not beat it predicts no confidence), and its
    test MSE/MAE on positives and on negatives: the data set's published test negatives where it has them
    (CN15k), else one sampled corruption per test fact (:func:`sampled_negatives` with the run's seed; the
    rule the valid selection uses), named in ``test_negatives``. Beside them the link-prediction figures as
    the unKR benchmark computes them (:mod:`pipeline.models.link_prediction`): the test tails' filtered
    ``test_mrr``, ``test_hits@1/3/10``, ``test_mr``, their raw MRR, the share of tied tails and the MRR over
    random tie orders, the MRR and hits@10 of tails and heads together (``*_both``), and MSE/MAE over every
    published test row (``test_mse_rows``: unKR's average, duplicate rows included); computed here, on the
    run's model, when the run's results do not hold them (a run trained before them or without them)."""
    from pipeline.models.runs import load_run, read_run

    run = read_run(run_dir)
    res, cfg = run.results, run.config
    if not res:
        raise PipelineError(f"{run_dir}: the run has not finished (no results.json)")
    if "test_negatives" in res:
        neg, source = res["test_negatives"], "published"
    else:
        test = kg.split_facts("test")
        neg = confidence_errors(load_run(run_dir, dataset=kg.name), sampled_negatives(test, kg.n_entities, int(cfg["seed"])))
        source = f"sampled: one corruption per test fact (seed {int(cfg['seed'])})"
    lp = (res.get("link_prediction") or {}).get("test")
    if lp is None:
        from pipeline.core.config import select_device
        from pipeline.models.link_prediction import AUTO_SECONDS, estimated_seconds, link_prediction

        model = load_run(run_dir, device=select_device(None), dataset=kg.name)
        # as training's default: not when the forecast is long (BEUrRE on a CPU); the figures are then absent
        if estimated_seconds(model, kg, ("test",)) <= AUTO_SECONDS:
            lp = link_prediction(model, kg, "test")
    base = res.get("mean_predictor", {})
    out = {
        "model": res["model"] + ("+psl" if res.get("psl") else ""),
        "model_hash": res.get("model_hash"),
        "epochs_run": res.get("epochs_run"),
        "best_epoch": res.get("best_epoch"),
        "selection": res.get("selection"),
        "batch_size": cfg.get("batch_size"),
        "dim": cfg.get("dim"),
        "lr": cfg.get("lr"),
        "negative_weight": cfg.get("negative_weight", 1.0),
        "seed": cfg.get("seed"),
        "valid_mse": res["valid"]["mse"],
        "mean_valid_mse": base.get("valid_mse"),
        "mean_confidence": base.get("confidence"),
        "valid_neg_mse": res.get("valid_negatives", {}).get("mse"),
        "test_mse": res["test"]["mse"],
        "test_mae": res["test"]["mae"],
        "test_neg_mse": neg["mse"],
        "test_neg_mae": neg["mae"],
        "test_negatives": source,
    }
    if lp is not None:
        from pipeline.models.link_prediction import summary_figures

        out.update(summary_figures(lp))
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in out.items()}
