"""``pipeline train``: the config (model defaults or a replayed ``config.json``, options on top), the data
set, a batch size fitted to a small graph, the default run directory, then :func:`pipeline.models.train`.
The CLI and the Python API (:func:`pipeline.api.train`) both call :func:`train_dataset`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError, option


@dataclass(frozen=True)
class Trained:
    """What one training did: the results document, the config used, the data set's name, its number of
    train facts and the run directory."""

    results: dict[str, Any]
    config: Any  # pipeline.models.TrainConfig
    dataset: str
    n_train: int
    path: Path


def train_dataset(
    dataset: str,
    model: str | None,
    out: str | Path | None = None,
    *,
    config_file: str | Path | None = None,
    source: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    **overrides: Any,
) -> Trained:
    """Train ``model`` on ``dataset`` into ``out`` (default PIPELINE_HOME/runs/DATASET-MODEL[-psl]-sSEED).

    overrides: the TrainConfig settings given besides (psl, epochs, dim, lr, batch_size, negatives,
    patience, select_on, seed, device; None = the default or the replayed config's). Without a given batch
    size or config file, the model's default is fitted to a small graph (pipeline.models.config)."""
    from loaders import load
    from pipeline.core import config
    from pipeline.core.atomic import check_folder
    from pipeline.models import train
    from pipeline.models.config import fitted_batch_size, train_config

    check_folder(out, "out")
    cfg = train_config(dataset.lower(), model, config_file, **overrides)
    if resume and overwrite:
        raise PipelineError(f"{option('resume', True)} and {option('overwrite', True)} exclude each other")
    kg = load(cfg.dataset, source=source)
    n_train = len(kg.graph("train"))
    if overrides.get("batch_size") is None and config_file is None:  # a replayed config keeps its own
        cfg = dataclasses.replace(cfg, batch_size=fitted_batch_size(cfg.batch_size, n_train))
    out = Path(out or config.home() / "runs" / f"{kg.name}-{cfg.model}{'-psl' if cfg.psl else ''}-s{cfg.seed}")
    results = train(kg, cfg, out, resume=resume, progress=progress, overwrite=overwrite)
    return Trained(results, cfg, kg.name, n_train, out)
