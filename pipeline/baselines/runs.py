"""Run directories of the query-embedding baselines (the same layout as the backbones' runs):

    RUN_DIR/config.json      QEConfig (data set, model, hyper-parameters, loss, query-set files, seed)
    RUN_DIR/metadata.json    versions, git hash, query-set checksums, seed, device, dates
    RUN_DIR/results.json     per-epoch loss and valid score, the selected epoch, timings
    RUN_DIR/model.pt         {"config": model config, "state_dict"} of the best valid epoch
    RUN_DIR/checkpoint.pt    last epoch's model + optimiser state, for resuming

Writes are atomic (the helpers of pipeline.models.runs), so a killed run resumes from its last epoch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pipeline.baselines.models import QueryEmbeddingModel, get_qe_model_class
from pipeline.core.errors import ArtifactError
from pipeline.models.runs import model_from_doc, read_json, torch_load, torch_save

MODEL_FILE, CHECKPOINT_FILE = "model.pt", "checkpoint.pt"
CONFIG_FILE, METADATA_FILE, RESULTS_FILE = "config.json", "metadata.json", "results.json"


def save_qe_model(path: Path, model: QueryEmbeddingModel) -> None:
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    torch_save(path, {"config": model.config(), "state_dict": state})


def qe_model_from_doc(doc: Any, path: Path) -> QueryEmbeddingModel:
    return model_from_doc(doc, path, get_qe_model_class)


def load_qe_run(
    run_dir: str | Path, device: str | torch.device = "cpu"
) -> tuple[QueryEmbeddingModel, dict[str, Any]]:
    """The selected model of a baseline run (eval mode, on device) and the run's config."""
    path = Path(run_dir)
    if not (path / CONFIG_FILE).is_file():
        raise ArtifactError(f"{path}: not a query-embedding run directory (no {CONFIG_FILE})")
    cfg = read_json(path / CONFIG_FILE)
    if cfg.get("model") not in ("logice_ne", "cone_ne"):
        raise ArtifactError(f"{path}: a run of model {cfg.get('model')!r}, not a query-embedding baseline")
    model = qe_model_from_doc(torch_load(path / MODEL_FILE), path / MODEL_FILE)
    return model.to(device).eval(), cfg
