"""Run directories: everything a table needs to be traced back to its run.

    RUN_DIR/config.json      TrainConfig (data set, model, hyper-parameters, seed)
    RUN_DIR/metadata.json    versions, git hash, data checksums, seed, device, dates
    RUN_DIR/results.json     valid/test MSE and MAE (test negatives too where the data set has them), timings
    RUN_DIR/model.pt         {"config": model config, "state_dict": ...} of the selected (best valid) epoch
    RUN_DIR/checkpoint.pt    last epoch's model + optimiser state, for --resume

Files are written atomically (temp file + rename), so an interrupted run never leaves a half-written one.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pipeline import atomic
from pipeline.errors import ArtifactError
from pipeline.formats.meta import read_json
from pipeline.models.base import ConfidenceModel
from pipeline.provenance import provenance

MODEL_FILE, CHECKPOINT_FILE = "model.pt", "checkpoint.pt"
CONFIG_FILE, METADATA_FILE, RESULTS_FILE = "config.json", "metadata.json", "results.json"


@dataclass(frozen=True)
class Run:
    """A run directory's JSON documents."""

    path: Path
    config: dict[str, Any]
    metadata: dict[str, Any]
    results: dict[str, Any]

    @property
    def dataset(self) -> str:
        return str(self.config["dataset"])


def write_json(path: Path, doc: Any) -> None:
    atomic.write_json(path, doc)


def torch_save(path: Path, obj: Any) -> None:
    atomic.write_with(path, lambda tmp: torch.save(obj, tmp))


def torch_load(path: Path) -> Any:
    if not path.exists():
        raise ArtifactError(f"{path}: missing (is {path.parent} a run directory?)")
    try:
        # weights_only: a run directory holds tensors and plain values, never pickled modules
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, foreign file: torch raises several types
        raise ArtifactError(
            f"{path}: not a readable model file ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None


def save_model(run_dir: Path, model: ConfidenceModel) -> None:
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    torch_save(run_dir / MODEL_FILE, {"config": model.config(), "state_dict": state})


def model_from_doc(doc: Any, path: Path, get_class: Any) -> Any:
    """Rebuild a model from a {"config", "state_dict"} document read from ``path``; ``get_class`` maps the
    config's "model" name to its class (a registry lookup). ArtifactError when the document does not fit."""
    if not isinstance(doc, dict) or "config" not in doc or "state_dict" not in doc:
        raise ArtifactError(f"{path}: not a model file of this project (no config/state_dict)")
    cls = get_class(str(doc["config"].get("model", "?")))
    model = cls.from_config(doc["config"])
    try:
        model.load_state_dict(doc["state_dict"])
    except RuntimeError as exc:
        raise ArtifactError(f"{path}: state dict does not fit its config ({str(exc)[:160]})") from None
    return model


def model_from_file(path: Path) -> ConfidenceModel:
    """Rebuild a model from a {"config", "state_dict"} file (model.pt or a checkpoint's part)."""
    from pipeline.models.registry import get_model_class

    return model_from_doc(torch_load(path), path, get_model_class).eval()


def read_run(run_dir: str | Path) -> Run:
    """The JSON documents of a run directory; ArtifactError if it is not one."""
    path = Path(run_dir)
    if not path.is_dir():
        raise ArtifactError(f"{path}: not a run directory")
    results = read_json(path / RESULTS_FILE) if (path / RESULTS_FILE).exists() else {}
    return Run(path, read_json(path / CONFIG_FILE), read_json(path / METADATA_FILE), results)


def load_run(
    run_dir: str | Path, device: str | torch.device = "cpu", dataset: str | None = None
) -> ConfidenceModel:
    """The trained model of a run directory (eval mode, on `device`). With `dataset`, a run of another
    data set raises ArtifactError."""
    run = read_run(run_dir)
    if dataset is not None and run.dataset != dataset:
        raise ArtifactError(f"{run.path}: a run on data set '{run.dataset}', not '{dataset}'")
    model = model_from_file(run.path / MODEL_FILE)
    cfg = run.config
    if (model.name != cfg.get("model")) or (model.dim != cfg.get("dim")):
        raise ArtifactError(
            f"{run.path}: model.pt ({model.name}, dim {model.dim}) does not match config.json"
        )
    return model.to(device)


def run_metadata(checksums: dict[str, str], seed: int, device: str, cfg: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's provenance (:func:`pipeline.provenance.provenance`: versions, git hash, config, seed, data
    checksums) plus its device."""
    return {
        **provenance(cfg, seed, inputs={"data_checksums": dict(checksums)}),
        "data_checksums": dict(checksums),
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "cpu",
        "torch_threads": torch.get_num_threads(),
    }
