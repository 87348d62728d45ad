"""Training loop of the confidence models: squared error on train facts, squared predicted confidence on
sampled negatives, the model's weight penalty, and (UKGE+PSL) a one-sided squared error on soft-logic facts.

Reproducibility: parameters are initialised from the seed (a private generator, no global RNG) and every
epoch's shuffling and negative sampling draw from a generator seeded by (seed, epoch). A resumed run
therefore replays exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm import tqdm

from pipeline.core.config import select_device
from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.models.base import ConfidenceModel
from pipeline.models.config import TrainConfig, default_config
from pipeline.models.evaluation import confidence_errors, evaluate_run, mean_predictor
from pipeline.models.registry import get_model_class
from pipeline.models.runs import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    METADATA_FILE,
    MODEL_FILE,
    RESULTS_FILE,
    read_json,
    run_metadata,
    save_model,
    torch_load,
    torch_save,
    write_json,
)

__all__ = ["TrainConfig", "batch_loss", "build_model", "default_config", "train"]


def build_model(cfg: TrainConfig, n_entities: int, n_relations: int) -> ConfidenceModel:
    """A freshly initialised model of the config (initialisation seeded by cfg.seed)."""
    cls = get_model_class(cfg.model)
    return cls(n_entities, n_relations, dim=cfg.dim, seed=cfg.seed, **cfg.model_kwargs)


@dataclass(frozen=True)
class Facts:
    """(N,) tensors of triples with target confidences, on the training device."""

    h: Tensor
    r: Tensor
    t: Tensor
    c: Tensor

    @classmethod
    def from_frame(cls, df: pd.DataFrame, device: str) -> Facts:
        col = lambda name, dt: torch.tensor(df[name].to_numpy(), dtype=dt, device=device)  # noqa: E731
        return cls(
            col("h", torch.int64), col("r", torch.int64), col("t", torch.int64), col("conf", torch.float32)
        )

    def __len__(self) -> int:
        return len(self.h)


def batch_loss(
    model: ConfidenceModel,
    h: Tensor,
    r: Tensor,
    t: Tensor,
    c: Tensor,
    neg_heads: Tensor,
    neg_tails: Tensor,
    psl: tuple[Tensor, Tensor, Tensor, Tensor] | None = None,
    psl_weight: float = 0.2,
) -> tuple[Tensor, dict[str, float]]:
    """Loss of one batch. h, r, t (B,) int64, c (B,) float32; neg_heads / neg_tails (B, k) int64 replace
    the head / tail of each fact; psl: (h, r, t, c) of soft-logic facts, penalised only when predicted
    below their confidence. Returns the scalar loss and its parts as floats."""
    k = neg_heads.shape[1]
    pos = model.training_output(h, r, t)
    pos_loss = (pos - c).pow(2).mean()
    rr, hh, tt = r.repeat_interleave(k), h.repeat_interleave(k), t.repeat_interleave(k)
    neg = torch.cat(
        [
            model.training_output(neg_heads.reshape(-1), rr, tt),
            model.training_output(hh, rr, neg_tails.reshape(-1)),
        ]
    )
    neg_loss = neg.pow(2).mean()
    reg = model.regularization(h, r, t)
    loss = pos_loss + neg_loss + reg
    parts = {"pos": float(pos_loss.detach()), "neg": float(neg_loss.detach()), "reg": float(reg.detach())}
    if psl is not None:
        ph, pr, pt, pc = psl
        psl_loss = psl_weight * torch.relu(pc - model.training_output(ph, pr, pt)).pow(2).mean()
        loss = loss + psl_loss
        parts["psl"] = float(psl_loss.detach())
    return loss, parts


def sampled_negatives(facts: pd.DataFrame, n_entities: int, seed: int) -> pd.DataFrame:
    """One corruption per fact (head or tail, at random) with confidence 0: h, r, t, conf. Fixed by the
    seed, so every epoch and every resumed run selects on the same negatives."""
    rng = np.random.default_rng(seed + 7919)
    h, t = facts["h"].to_numpy().copy(), facts["t"].to_numpy().copy()
    other = rng.integers(0, n_entities, len(facts))
    head = rng.random(len(facts)) < 0.5
    h[head], t[~head] = other[head], other[~head]
    return pd.DataFrame({"h": h, "r": facts["r"].to_numpy(), "t": t, "conf": np.zeros(len(facts))})


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    # distinct, reproducible stream per (seed, epoch), independent of how many epochs ran before
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch + 1)


def run_epoch(
    model: ConfidenceModel,
    opt: torch.optim.Optimizer,
    facts: Facts,
    psl: Facts | None,
    cfg: TrainConfig,
    epoch: int,
    progress: bool,
) -> float:
    """One pass over the shuffled train facts; returns the mean batch loss."""
    g = epoch_generator(cfg.seed, epoch)
    n, dev, k = len(facts), facts.h.device, cfg.negatives
    perm = torch.randperm(n, generator=g).to(dev)
    n_batches = (n + cfg.batch_size - 1) // cfg.batch_size
    total = 0.0
    model.train()
    bar = tqdm(
        range(n_batches),
        desc=f"epoch {epoch + 1}/{cfg.epochs}",
        leave=False,
        disable=not progress,
        unit="batch",
        dynamic_ncols=True,
    )
    for i in bar:
        idx = perm[i * cfg.batch_size : (i + 1) * cfg.batch_size]
        b = len(idx)
        # negatives drawn on the CPU generator, so CPU and CUDA runs see the same corruptions
        neg_h = torch.randint(model.n_entities, (b, k), generator=g).to(dev)
        neg_t = torch.randint(model.n_entities, (b, k), generator=g).to(dev)
        psl_batch = None
        if psl is not None:
            j = torch.randint(len(psl), (min(cfg.batch_size, len(psl)),), generator=g).to(dev)
            psl_batch = (psl.h[j], psl.r[j], psl.t[j], psl.c[j])
        loss, parts = batch_loss(
            model,
            facts.h[idx],
            facts.r[idx],
            facts.t[idx],
            facts.c[idx],
            neg_h,
            neg_t,
            psl_batch,
            cfg.psl_weight,
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += float(loss.detach())
        if progress and (i % 10 == 0 or i == n_batches - 1):
            bar.set_postfix(
                loss=f"{total / (i + 1):.4f}", pos=f"{parts['pos']:.4f}", neg=f"{parts['neg']:.4f}"
            )
    return total / max(1, n_batches)


def _snapshot(model: ConfidenceModel) -> dict[str, Tensor]:
    return {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}


def _train(
    kg, cfg: TrainConfig, run_dir: str | Path, resume: bool, progress: bool, overwrite: bool
) -> dict[str, Any]:
    """The body of train(), under deterministic kernels."""
    run_dir = Path(run_dir)
    if cfg.dataset != kg.name:
        raise PipelineError(f"config is for data set '{cfg.dataset}' but the loaded data set is '{kg.name}'")
    device = select_device(cfg.device)
    if cfg.psl and (kg.softlogic is None or len(kg.softlogic) == 0):
        raise PipelineError(
            f"--psl needs the soft-logic facts (softlogic.tsv) of {kg.name}; none were loaded"
        )
    # a data set without valid facts (a user KG ingested with --split 1,0,0, or a tiny one) selected its
    # epoch on a valid MSE of nan (issue 45): it keeps the last epoch instead, and says so
    select_on = cfg.select_on
    if select_on != "last" and len(kg.split_facts("val")) == 0:
        select_on = "last"
        sys.stderr.write(
            f"note: {kg.name} has no valid facts to select an epoch on: the last epoch is kept (as --select-on "
            "last); ingest it with a valid fraction > 0 to select on valid\n"
        )

    model = build_model(cfg, kg.n_entities, kg.n_relations).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    state: dict[str, Any] = {
        "epoch": 0,
        "history": [],
        "best_epoch": -1,
        "best_valid_mse": float("inf"),
        "best_state": None,
        "stopped": False,
    }
    if resume:
        state = _load_checkpoint(run_dir, cfg, model, opt)
    else:
        held = [name for name in (CHECKPOINT_FILE, MODEL_FILE) if (run_dir / name).exists()]
        if held and not overwrite:
            raise PipelineError(
                f"{run_dir} holds a run ({', '.join(held)}): --resume continues it, --overwrite starts over "
                "(deleting it), or give another --out"
            )
        # a fresh run: no file of an earlier run in this directory may outlive it
        for name in (CHECKPOINT_FILE, MODEL_FILE, RESULTS_FILE):
            (run_dir / name).unlink(missing_ok=True)
    write_json(run_dir / CONFIG_FILE, cfg.to_dict())
    from pipeline.store.ingest import content_key

    write_json(
        run_dir / METADATA_FILE,
        run_metadata(kg.checksums, cfg.seed, device, cfg.to_dict(), dataset_version=content_key(kg)),
    )

    facts = Facts.from_frame(kg.graph("train"), device)
    psl = Facts.from_frame(kg.softlogic, device) if cfg.psl else None
    valid = kg.split_facts("val")
    valid_neg = sampled_negatives(valid, kg.n_entities, cfg.seed)
    for epoch in range(state["epoch"], cfg.epochs):
        if state["stopped"]:
            break
        t0 = time.perf_counter()
        loss = run_epoch(model, opt, facts, psl, cfg, epoch, progress)
        seconds = time.perf_counter() - t0
        model.eval()
        v = confidence_errors(model, valid)
        vn = confidence_errors(model, valid_neg)
        sel = v["mse"] if cfg.select_on == "valid_pos" else (v["mse"] + vn["mse"]) / 2
        state["history"].append(
            {
                "epoch": epoch + 1,
                "loss": loss,
                "valid_mse": v["mse"],
                "valid_mae": v["mae"],
                "valid_neg_mse": vn["mse"],
                "selection_mse": sel,
                "seconds": seconds,
            }
        )
        if select_on == "last" or sel < state["best_valid_mse"]:
            state.update(best_valid_mse=sel, best_epoch=epoch + 1, best_state=_snapshot(model))
        elif epoch + 1 - state["best_epoch"] >= cfg.patience:
            state["stopped"] = True
        state["epoch"] = epoch + 1
        if progress:
            tqdm.write(
                f"epoch {epoch + 1}: loss {loss:.5f}  valid MSE {v['mse']:.5f}  MAE {v['mae']:.5f}  "
                f"neg MSE {vn['mse']:.5f}  "
                f"({seconds:.1f} s)",
                file=sys.stderr,
            )
        torch_save(run_dir / CHECKPOINT_FILE, {"model": _snapshot(model), "optim": opt.state_dict(), **state})

    if state["best_state"] is not None:
        model.load_state_dict(state["best_state"])
    model.eval()
    save_model(run_dir, model)
    history = state["history"]
    results = {
        "dataset": kg.name,
        "model": cfg.model,
        "psl": cfg.psl,
        "seed": cfg.seed,
        "device": device,
        "epochs_run": state["epoch"],
        "best_epoch": state["best_epoch"],
        "early_stopped": state["stopped"],
        "seconds_per_epoch": float(np.mean([h["seconds"] for h in history])) if history else None,
        "train_seconds": float(sum(h["seconds"] for h in history)),
        "model_hash": model.content_hash(),
        "selection": cfg.select_on if select_on == cfg.select_on else "last (no valid facts)",
        "selection_mse": state["best_valid_mse"],
        **evaluate_run(model, kg),
        "valid_negatives": confidence_errors(model, valid_neg),
        # no "mse" key: the CLI's table lists the dicts that carry one, and this is not the model's error
        "mean_predictor": mean_predictor(kg.graph("train")["conf"].to_numpy(), valid["conf"].to_numpy()),
        "history": history,
    }
    write_json(run_dir / RESULTS_FILE, results)
    return results


def train(
    kg,
    cfg: TrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    progress: bool = True,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Train cfg.model on kg's train facts, select the epoch of lowest selection MSE on valid, and write the
    run directory (config.json, metadata.json, checkpoint.pt each epoch, model.pt and results.json at the end).

    kg: loaders.KGData. With resume=True, continues from RUN_DIR/checkpoint.pt (same config up to epochs
    and device); a fresh run into a RUN_DIR that holds a run (checkpoint or model) is refused unless
    overwrite=True, which deletes that run first. Returns the results document. Runs with deterministic kernels: multi-threaded embedding
    gradients (index_put with accumulate) otherwise sum in a varying order, and the same seed would not
    give the same weights twice.
    """
    if select_device(cfg.device).startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # required by deterministic cuBLAS
    before, before_warn = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False  # NaN-filling every allocation costs time
    try:
        return _train(kg, cfg, run_dir, resume, progress, overwrite)
    finally:
        torch.use_deterministic_algorithms(before, warn_only=before_warn)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def can_resume(run_dir: str | Path, cfg: TrainConfig) -> bool:
    """True when RUN_DIR holds a checkpoint of the same run as `cfg` (up to the epoch budget and device)."""
    try:
        _check_resumable(Path(run_dir), cfg)
    except (PipelineError, TypeError, ValueError):
        return False
    return True


def _check_resumable(run_dir: Path, cfg: TrainConfig) -> Path:
    """The checkpoint's path; ArtifactError when there is none or it belongs to another config."""
    path = run_dir / CHECKPOINT_FILE
    if not path.exists():
        raise ArtifactError(f"{path}: no checkpoint to resume from")
    saved = read_json(run_dir / CONFIG_FILE)
    if not isinstance(saved, dict):
        raise ArtifactError(f"{run_dir / CONFIG_FILE}: not a JSON object; cannot resume")
    old = TrainConfig.from_dict(saved)
    if not cfg.resumable_from(old):
        diff = {k for k, v in cfg.to_dict().items() if old.to_dict().get(k) != v} - {"epochs", "device"}
        raise ArtifactError(f"{run_dir}: cannot resume, the config differs in {', '.join(sorted(diff))}")
    return path


def _load_checkpoint(
    run_dir: Path, cfg: TrainConfig, model: ConfidenceModel, opt: torch.optim.Optimizer
) -> dict:
    path = _check_resumable(run_dir, cfg)
    ck = torch_load(path)
    try:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
    except (KeyError, RuntimeError, ValueError) as exc:
        raise ArtifactError(f"{path}: checkpoint does not fit the model ({str(exc)[:120]})") from None
    state = {k: ck[k] for k in ("epoch", "history", "best_epoch", "best_valid_mse", "best_state", "stopped")}
    state = copy.deepcopy(state)
    # a finished run whose epoch budget grew keeps training unless it had early-stopped
    return state
