"""Training loop of the confidence models: squared error on train facts, squared predicted confidence on
sampled negatives, the model's weight penalty, and (UKGE+PSL) a one-sided squared error on soft-logic facts.

Reproducibility: parameters are initialised from the seed (a private generator, no global RNG) and every
epoch's shuffling and negative sampling draw from a generator seeded by (seed, epoch). A resumed run
therefore replays exactly the batches an uninterrupted run would have seen.

One step, no host round trip: the epoch's generator lives on the training device
(``torch.Generator(device=...)``), so the permutation, the negatives and the soft-logic batches are drawn
where they are used (no index tensor crosses to the device per step), and the loss is summed on the device
and read once per epoch (with a progress bar, at most once per PROGRESS_EVERY_S seconds). A host read is
a synchronisation on an accelerator: a GPU step no longer waits for the CPU and the CPU no longer waits
for the GPU.

CPU and GPU runs of one seed: on the CPU the generator is the CPU's (Mersenne Twister) and draws, in the
same order, exactly what the earlier loop drew (every seeded CPU run of earlier versions is reproduced bit
for bit). On CUDA the generator is CUDA's (Philox): the same seed gives the same draws on every run on
that device, but other draws than the CPU's; a GPU run therefore sees the same distribution of batches and
negatives, not the same batches, and matches a CPU run in quality (test MSE within run-to-run noise), not
weight for weight.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from pipeline.core.config import select_device
from pipeline.core.errors import ArtifactError, PipelineError, option
from pipeline.core.optim import adam
from pipeline.core.progress import Output, output
from pipeline.models.base import ConfidenceModel
from pipeline.models.config import TrainConfig, default_config
from pipeline.models.evaluation import confidence_errors, evaluate_run, mean_predictor, sampled_negatives
from pipeline.models.link_prediction import AUTO_SECONDS, estimated_seconds, link_prediction
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
    write_run_json,
)

__all__ = ["TrainConfig", "batch_loss", "build_model", "default_config", "loss_terms", "train"]


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
    negatives: tuple[Tensor, Tensor],
    psl: tuple[Tensor, Tensor, Tensor, Tensor] | None = None,
    psl_weight: float = 0.2,
    negative_weight: float = 1.0,
) -> tuple[Tensor, dict[str, float]]:
    """Loss of one batch. h, r, t (B,) int64, c (B,) float32; negatives: (neg_heads, neg_tails), each (B, k)
    int64, replace the head / tail of each fact; psl: (h, r, t, c) of soft-logic facts, penalised only when predicted
    below their confidence; negative_weight scales the negatives' term (1: UKGE's and BEUrRE's loss).
    Returns the scalar loss and its parts as floats (read on the host: the training loop uses
    :func:`loss_terms`, which leaves them on the device; the part "neg" is the unweighted mean)."""
    loss, parts = loss_terms(model, h, r, t, c, negatives, psl, psl_weight, negative_weight)
    return loss, {name: float(value) for name, value in parts.items()}


def loss_terms(
    model: ConfidenceModel,
    h: Tensor,
    r: Tensor,
    t: Tensor,
    c: Tensor,
    negatives: tuple[Tensor, Tensor],
    psl: tuple[Tensor, Tensor, Tensor, Tensor] | None = None,
    psl_weight: float = 0.2,
    negative_weight: float = 1.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """:func:`batch_loss` with its parts as detached 0-d tensors on the model's device (no host read)."""
    neg_heads, neg_tails = negatives
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
    # weight 1 is written without the product, so the loss of every earlier run stays bit for bit
    loss = pos_loss + (neg_loss if negative_weight == 1.0 else negative_weight * neg_loss) + reg
    parts = {"pos": pos_loss.detach(), "neg": neg_loss.detach(), "reg": reg.detach()}
    if psl is not None:
        ph, pr, pt, pc = psl
        psl_loss = psl_weight * torch.relu(pc - model.training_output(ph, pr, pt)).pow(2).mean()
        loss = loss + psl_loss
        parts["psl"] = psl_loss.detach()
    return loss, parts


# the running loss shown by the progress bar is read (a host synchronisation on an accelerator) at most
# this often; without a bar the loss is read once per epoch
PROGRESS_EVERY_S = 1.0


def epoch_generator(seed: int, epoch: int, device: str | torch.device = "cpu") -> torch.Generator:
    """The generator of one epoch's draws, on ``device`` (module docstring: CPU and CUDA streams)."""
    # distinct, reproducible stream per (seed, epoch), independent of how many epochs ran before
    return torch.Generator(device=device).manual_seed(seed * 1_000_003 + epoch + 1)


def run_epoch(
    model: ConfidenceModel,
    opt: torch.optim.Optimizer,
    facts: Facts,
    psl: Facts | None,
    cfg: TrainConfig,
    epoch: int,
    progress: bool | Output,
) -> float:
    """One pass over the shuffled train facts; returns the mean batch loss, the one number of the epoch
    read on the host (:func:`epoch_loss_sum`). Its bar of batches is a terminal's only
    (:meth:`pipeline.core.progress.Output.inner_bar`)."""
    n_batches = (len(facts) + cfg.batch_size - 1) // cfg.batch_size
    return float(epoch_loss_sum(model, opt, facts, psl, cfg, epoch, progress)) / max(1, n_batches)


def epoch_loss_sum(
    model: ConfidenceModel,
    opt: torch.optim.Optimizer,
    facts: Facts,
    psl: Facts | None,
    cfg: TrainConfig,
    epoch: int,
    progress: bool | Output,
) -> Tensor:
    """One pass over the shuffled train facts, every draw made on the facts' device; returns the sum of the
    batch losses as a 0-d float64 tensor on that device, added in step order (the sum a host float made of
    each step's loss before). Reads nothing on the host unless a bar shows (then the running loss, at most
    once per PROGRESS_EVERY_S seconds)."""
    g = epoch_generator(cfg.seed, epoch, facts.h.device)
    perm = torch.randperm(len(facts), generator=g, device=facts.h.device)
    model.train()
    out = output(progress)
    n_batches = (len(facts) + cfg.batch_size - 1) // cfg.batch_size
    with out.inner_bar(range(n_batches), desc=f"epoch {epoch + 1}/{cfg.epochs}", unit="batch") as bar:
        return _batches(bar, model, opt, facts, psl, cfg, perm, g, out.bars and not bar.disable)


def _batches(bar: Any, model: ConfidenceModel, opt: torch.optim.Optimizer, facts: Facts, psl: Facts | None,
             cfg: TrainConfig, perm: Tensor, g: torch.Generator, shown: bool) -> Tensor:
    """The optimisation steps of one epoch over ``bar`` (an iterable of batch indices); the loss sum."""
    n, dev, k = len(facts), facts.h.device, cfg.negatives
    n_batches = (n + cfg.batch_size - 1) // cfg.batch_size
    total = torch.zeros((), dtype=torch.float64, device=dev)
    last = time.monotonic()
    for i in bar:
        idx = perm[i * cfg.batch_size : (i + 1) * cfg.batch_size]
        b = idx.shape[0]
        neg_h = torch.randint(model.n_entities, (b, k), generator=g, device=dev)
        neg_t = torch.randint(model.n_entities, (b, k), generator=g, device=dev)
        psl_batch = None
        if psl is not None:
            j = torch.randint(len(psl), (min(cfg.batch_size, len(psl)),), generator=g, device=dev)
            psl_batch = (psl.h[j], psl.r[j], psl.t[j], psl.c[j])
        loss, parts = loss_terms(
            model,
            facts.h[idx],
            facts.r[idx],
            facts.t[idx],
            facts.c[idx],
            (neg_h, neg_t),
            psl_batch,
            cfg.psl_weight,
            cfg.negative_weight,
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.detach()
        if shown and (i == n_batches - 1 or time.monotonic() - last >= PROGRESS_EVERY_S):
            last = time.monotonic()
            mean, pos, neg = torch.stack([total / (i + 1), parts["pos"].double(), parts["neg"].double()]).tolist()
            bar.set_postfix(loss=f"{mean:.4f}", pos=f"{pos:.4f}", neg=f"{neg:.4f}")
    return total


def _snapshot(model: ConfidenceModel) -> dict[str, Tensor]:
    return {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}


def _train(
    kg, cfg: TrainConfig, run_dir: str | Path, resume: bool, progress: bool, overwrite: bool, ranks: bool | None
) -> dict[str, Any]:
    """The body of train(), under deterministic kernels."""
    run_dir = Path(run_dir)
    if cfg.dataset != kg.name:
        raise PipelineError(f"config is for data set '{cfg.dataset}' but the loaded data set is '{kg.name}'")
    device = select_device(cfg.device)
    if cfg.psl and (kg.softlogic is None or len(kg.softlogic) == 0):
        raise PipelineError(
            f"{option('psl')} needs the soft-logic facts (softlogic.tsv) of {kg.name}; none were loaded"
        )
    # a data set without valid facts (a user KG ingested with --split 1,0,0, or a tiny one) selected its
    # epoch on a valid MSE of nan: it keeps the last epoch instead, and says so
    select_on = cfg.select_on
    if select_on != "last" and len(kg.split_facts("val")) == 0:
        select_on = "last"
        output(progress).warn(
            f"{kg.name} has no valid facts to select an epoch on: the last epoch is kept (as "
            f"{option('select_on', 'last')}); ingest it with a valid fraction > 0 to select on valid"
        )

    model = build_model(cfg, kg.n_entities, kg.n_relations).to(device)
    opt = adam(model.parameters(), lr=cfg.lr)
    state: dict[str, Any] = {
        "epoch": 0,
        "history": [],
        "best_epoch": -1,
        "best_valid_mse": float("inf"),
        "best_state": None,
        "stopped": False,
    }
    held = [name for name in (CHECKPOINT_FILE, MODEL_FILE) if (run_dir / name).exists()]
    if held and not resume and not overwrite:
        # the same call again (a notebook cell re-run): the same run is reused or resumed, never retrained
        if rerun(run_dir, cfg, kg) == "reuse":
            from pipeline.models.runs import load_run

            load_run(run_dir)  # the model file is the one results.json describes (else CorruptArtifactError)
            return {**read_json(run_dir / RESULTS_FILE), "reused": True}
        resume = True
    if resume:
        state = _load_checkpoint(run_dir, cfg, model, opt, kg)
    else:
        # a fresh run: no file of an earlier run in this directory may outlive it
        for name in (CHECKPOINT_FILE, MODEL_FILE, RESULTS_FILE):
            (run_dir / name).unlink(missing_ok=True)
    write_run_json(run_dir / CONFIG_FILE, cfg.to_dict())
    from pipeline.store.ingest import content_key

    write_run_json(
        run_dir / METADATA_FILE,
        run_metadata(kg.checksums, cfg.seed, device, cfg.to_dict(), dataset_version=content_key(kg)),
    )

    facts = Facts.from_frame(kg.graph("train"), device)
    psl = Facts.from_frame(kg.softlogic, device) if cfg.psl else None
    valid = kg.split_facts("val")
    valid_neg = sampled_negatives(valid, kg.n_entities, cfg.seed)
    out = output(progress)
    # one bar over the epochs (a notebook's only one: the figures as its postfix, not 60 lines)
    with out.bar(total=cfg.epochs, initial=state["epoch"], desc=f"train {cfg.model}", unit="epoch") as epochs:
        loop = cfg if select_on == cfg.select_on else dataclasses.replace(cfg, select_on=select_on)
        _epochs(epochs, out, Fit(model, opt, facts, psl, valid, valid_neg), loop, state, run_dir)
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
    if ranks is None:  # the default: rank unless the forecast says it would take long (BEUrRE on a CPU)
        forecast = estimated_seconds(model, kg)
        ranks = forecast <= AUTO_SECONDS
        if not ranks:
            results["link_prediction_skipped"] = (
                f"link prediction skipped: it would take about {forecast / 60:.0f} minutes on {device}; "
                f"`pipeline train ... --link-prediction` computes it")
            out.warn(results["link_prediction_skipped"])
    if ranks:
        # once, on the selected model: a model's ranking of unseen facts caps SRC's answers; the splits that
        # hold rows, under one bar
        sizes = {split: int((kg.rows["split"] == split).sum()) for split in ("val", "test")}
        splits = [(name, split) for name, split in (("valid", "val"), ("test", "test")) if sizes[split]]
        with out.bar(total=2 * sum(sizes.values()), desc="link prediction", unit="query") as bar:
            results["link_prediction"] = {
                name: link_prediction(model, kg, split, step=bar.update) for name, split in splits
            }
    write_run_json(run_dir / RESULTS_FILE, results)
    return results


@dataclass(frozen=True)
class Fit:
    """What the epochs update and read: the model and its optimiser, the train facts (and soft-logic facts
    of UKGE+PSL), the valid positives and the sampled valid negatives the selection reads."""

    model: ConfidenceModel
    opt: torch.optim.Optimizer
    facts: Facts
    psl: Facts | None
    valid: pd.DataFrame
    valid_neg: pd.DataFrame


def _epochs(bar: Any, out: Output, fit: Fit, cfg: TrainConfig, state: dict[str, Any], run_dir: Path) -> None:
    """The epochs from state["epoch"] on, each checkpointed; ``bar`` counts them and shows the figures."""
    model, opt, facts, psl, valid, valid_neg = fit.model, fit.opt, fit.facts, fit.psl, fit.valid, fit.valid_neg
    for epoch in range(state["epoch"], cfg.epochs):
        if state["stopped"]:
            break
        t0 = time.perf_counter()
        loss = run_epoch(model, opt, facts, psl, cfg, epoch, out)
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
        if cfg.select_on == "last" or sel < state["best_valid_mse"]:
            state.update(best_valid_mse=sel, best_epoch=epoch + 1, best_state=_snapshot(model))
        elif epoch + 1 - state["best_epoch"] >= cfg.patience:
            state["stopped"] = True
        state["epoch"] = epoch + 1
        # a terminal's line per epoch; a notebook's bar shows the same figures as its postfix
        out.step_line(f"epoch {epoch + 1}: loss {loss:.5f}  valid MSE {v['mse']:.5f}  MAE {v['mae']:.5f}  "
                      f"neg MSE {vn['mse']:.5f}  ({seconds:.1f} s)")
        bar.set_postfix_str(f"loss {loss:.4f}, valid MSE {v['mse']:.4f}", refresh=False)
        bar.update(1)
        torch_save(run_dir / CHECKPOINT_FILE, {"model": _snapshot(model), "optim": opt.state_dict(), **state})




def train(
    kg,
    cfg: TrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    progress: bool = True,
    *,
    overwrite: bool = False,
    link_prediction: bool | None = None,
) -> dict[str, Any]:
    """Train cfg.model on kg's train facts, select the epoch of lowest selection MSE on valid, and write the
    run directory (config.json, metadata.json, checkpoint.pt each epoch, model.pt and results.json at the end).
    With link_prediction, the results also hold the selected model's link-prediction figures on valid and
    test as the unKR benchmark computes them (:func:`pipeline.models.link_prediction.link_prediction`; on
    CN15k's test split about a minute for UKGE on two busy CPU cores, hours for BEUrRE on a CPU); None (the
    default) computes them when :func:`~pipeline.models.link_prediction.estimated_seconds` forecasts at most
    ``AUTO_SECONDS``, else records why not under ``link_prediction_skipped`` and warns.

    kg: loaders.KGData. With resume=True, continues from RUN_DIR/checkpoint.pt (same config up to epochs
    and device, same data); overwrite=True deletes a run RUN_DIR holds and starts over. With neither, a
    RUN_DIR holding a run of the same config and data (a re-run of the same call) is reused when finished
    (its results.json, plus ``"reused": True``; nothing trained) and resumed when not; another config or
    changed data is refused with the settings that differ (:func:`rerun`). Returns the results document. Runs with deterministic kernels: multi-threaded embedding
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
        return _train(kg, cfg, run_dir, resume, progress, overwrite, link_prediction)
    finally:
        torch.use_deterministic_algorithms(before, warn_only=before_warn)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def rerun(run_dir: Path, cfg: TrainConfig, kg) -> str:
    """What training ``cfg`` on ``kg`` into ``run_dir``, which holds a run, does without resume/overwrite:
    ``"reuse"`` (a finished run of the same config on the same data: its results, no training) or
    ``"resume"`` (an unfinished one); PipelineError saying which setting differs (or that the data changed)
    and how to start over otherwise."""
    held = ", ".join(name for name in (CHECKPOINT_FILE, MODEL_FILE) if (run_dir / name).exists())
    try:
        saved = read_json(run_dir / CONFIG_FILE) if (run_dir / CONFIG_FILE).exists() else None
    except ArtifactError:
        saved = None
    if not isinstance(saved, dict):
        raise PipelineError(
            f"{run_dir} holds a run ({held}) without a readable {CONFIG_FILE}: {option('overwrite', True)} starts "
            f"over (deleting it), or give another {option('out')}"
        )
    old = TrainConfig.from_dict(saved)
    if old != cfg:
        raise PipelineError(_other_settings(run_dir, cfg, old))
    _check_same_data(run_dir, kg)
    finished = (run_dir / MODEL_FILE).exists() and (run_dir / RESULTS_FILE).exists()
    if not finished and not (run_dir / CHECKPOINT_FILE).exists():
        raise PipelineError(
            f"{run_dir} holds an unfinished run without its {CHECKPOINT_FILE}: {option('overwrite', True)} starts "
            f"over (deleting it), or give another {option('out')}"
        )
    return "reuse" if finished else "resume"


def _other_settings(run_dir: Path, cfg: TrainConfig, old: TrainConfig) -> str:
    """The line for a run directory holding a run of another config: each differing setting, this call's
    value and the saved one, and what to do."""
    new_d, old_d = cfg.to_dict(), old.to_dict()
    differ = [k for k in new_d if new_d[k] != old_d.get(k)]
    said = []
    for k in differ:
        if k == "dataset":
            said.append(f"data set '{new_d[k]}' here, '{old_d[k]}' there")
        else:
            said.append(f"{option(k, new_d[k])} here, {old_d.get(k)!r} there")
    fix = f"{option('overwrite', True)} starts over (deleting it), or give another {option('out')}"
    if set(differ) <= {"epochs", "device"} and (run_dir / CHECKPOINT_FILE).exists():
        fix = f"{option('resume', True)} continues it with these settings; " + fix
    return f"{run_dir} holds a run with other settings ({'; '.join(said)}): {fix}"


def _check_same_data(run_dir: Path, kg) -> None:
    """The run in run_dir was trained on kg's files (the data checksums in its metadata.json)."""
    meta = read_json(run_dir / METADATA_FILE) if (run_dir / METADATA_FILE).exists() else {}
    saved = dict(meta.get("data_checksums") or {}) if isinstance(meta, dict) else {}
    now = dict(kg.checksums or {})
    if saved != now:
        changed = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
        raise PipelineError(
            f"{run_dir} holds a run trained on other data: data set '{kg.name}' changed since "
            f"({', '.join(changed)}); {option('overwrite', True)} trains again on the current data, or give another "
            f"{option('out')}"
        )


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
    run_dir: Path, cfg: TrainConfig, model: ConfidenceModel, opt: torch.optim.Optimizer, kg=None
) -> dict:
    path = _check_resumable(run_dir, cfg)
    if kg is not None:
        _check_same_data(run_dir, kg)
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
