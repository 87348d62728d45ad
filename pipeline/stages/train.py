"""``pipeline train``: the config (model defaults or a replayed ``config.json``, options on top), the data
set, a batch size fitted to a small graph, the default run directory, then :func:`pipeline.models.train`.
The CLI and the Python API (:func:`pipeline.api.train`) both call :func:`train_dataset`; its options are
:class:`pipeline.stages.options.TrainOptions`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.stages.options import TrainOptions


@dataclass(frozen=True)
class Trained:
    """What one training did: the run (:class:`pipeline.models.runs.Run`, what the API returns), the config
    used (a :class:`pipeline.models.config.TrainConfig`) and the number of train facts."""

    run: Any
    config: Any
    n_train: int

    @property
    def results(self) -> dict[str, Any]:
        return self.run.results

    @property
    def path(self) -> Path:
        return Path(self.run.path)


def train_dataset(dataset: str, options: TrainOptions | None = None, /, **settings: Any) -> Trained:
    """Train ``options.model`` on ``dataset`` into ``options.out`` (default
    PIPELINE_HOME/runs/DATASET-MODEL[-psl]-sSEED). options: a :class:`TrainOptions`, or its fields as keywords.
    Settings left None take the model's default or the replayed config's; without a given batch size or
    config file, the model's default is fitted to a small graph (pipeline.models.config)."""
    from loaders import load
    from pipeline.core import config
    from pipeline.core.atomic import check_folder
    from pipeline.models import read_run, train
    from pipeline.models.config import fitted_batch_size, train_config

    o = options if options is not None else TrainOptions(**settings)
    check_folder(o.out, "out")
    cfg = train_config(dataset.lower(), o.model, o.config, **o.overrides())
    kg = load(cfg.dataset, source=o.source)
    n_train = len(kg.graph("train"))
    if o.batch_size is None and o.config is None:  # a replayed config keeps its own
        cfg = dataclasses.replace(cfg, batch_size=fitted_batch_size(cfg.batch_size, n_train))
    out = Path(o.out or config.home() / "runs" / f"{kg.name}-{cfg.model}{'-psl' if cfg.psl else ''}-s{cfg.seed}")
    train(kg, cfg, out, resume=o.resume, progress=o.output, overwrite=o.overwrite)
    return Trained(read_run(out), cfg, n_train)
