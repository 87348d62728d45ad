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
    results: dict[str, Any]  # what train returned ("reused": True when a finished run was reused)

    @property
    def path(self) -> Path:
        return Path(self.run.path)

    def summary_lines(self, asked: TrainOptions | None = None) -> list[str]:
        """What the training chose and did, for a person: the settings (and why the batch size is what it
        is when nobody chose it), then the epochs, speed and valid MSE beside the mean predictor's.
        ``pipeline train`` prints them around its table; ``pl.train`` prints them as its summary."""
        from pipeline.core.errors import option
        from pipeline.models.config import steps_per_epoch

        cfg, res, n_train = self.config, self.results, self.n_train
        lines = []
        if res.get("reused"):
            lines.append(f"{self.path} holds the finished run of these settings and data: reused "
                         f"({option('overwrite', True)} trains again)")
        lines.append(
            f"trained {cfg.model} on {cfg.dataset}: {n_train} train facts, batch size {cfg.batch_size} "
            f"({steps_per_epoch(cfg.batch_size, n_train)} steps per epoch{self._batch_note(asked)}), "
            f"{cfg.epochs} epochs at most, dim {cfg.dim}, lr {cfg.lr:g}"
        )
        lines.append(
            f"run {self.path}: {res['epochs_run']} epochs (best {res['best_epoch']}), "
            f"{res['seconds_per_epoch'] or 0:.1f} s/epoch on {res['device']}; {self._against_mean()}"
        )
        return lines

    def link_prediction_rows(self) -> list[dict[str, str]]:
        """The link-prediction figures as table rows (split, ranked, MRR, hits@1/3/10, MR, tied): the tails
        (unKR's tables) and both directions, filtered; none when the run has none (``--no-link-prediction``,
        or a reused run trained before they existed)."""
        rows = []
        for split, res in (self.results.get("link_prediction") or {}).items():
            for direction in ("tail", "both"):
                m = res[direction]["filtered"]
                rows.append({"split": split, "ranked": f"{direction} of {res['rows']}", "MRR": f"{m['mrr']:.4f}",
                             **{f"hits@{k}": f"{m[f'hits@{k}']:.4f}" for k in (1, 3, 10)},
                             "MR": f"{m['mr']:.1f}", "tied": f"{m['tied']:.1%}"})
        return rows

    def _test_ranks(self) -> dict[str, Any] | None:
        """The test split's link-prediction result, None without one."""
        return (self.results.get("link_prediction") or {}).get("test") or None

    def link_prediction_line(self) -> str | None:
        """One sentence on the test tails' filtered ranks, unKR's protocol (None without figures)."""
        lp = self._test_ranks()
        if not lp:
            return None
        m = lp["tail"]["filtered"]
        line = (f"link prediction (unKR's protocol: each test fact's tail among all entities, filtered): "
                f"MRR {m['mrr']:.4f}, hits@1/3/10 {m['hits@1']:.3f}/{m['hits@3']:.3f}/{m['hits@10']:.3f}")
        if m["tied"] > 0:
            line += (f"; {m['tied']:.1%} of the tails tied with another entity (broken by id as unKR's sort does; "
                     f"MRR {m['mrr_expected']:.4f} over random tie orders)")
        return line

    def link_prediction_figures(self) -> dict[str, Any]:
        """The test split's figures under the names of the results pages' rows, as the main tables' backbones
        carry them (:func:`pipeline.models.link_prediction.summary_figures`, rounded); none without figures."""
        from pipeline.models.link_prediction import summary_figures

        lp = self._test_ranks()
        return {} if not lp else {k: round(v, 6) if isinstance(v, float) else v for k, v in summary_figures(lp).items()}

    def warnings(self) -> list[str]:
        """Said plainly: the model is no better than predicting the mean confidence (both NaN without valid
        facts: nothing to compare, no warning)."""
        import math

        from pipeline.core.errors import option

        mse, base = self.results["valid"]["mse"], self.results["mean_predictor"]
        if math.isfinite(base["valid_mse"]) and not mse < base["valid_mse"]:
            return [f"the model is no better than predicting the mean confidence; train longer ({option('epochs')}) "
                    f"or with more steps per epoch ({option('batch_size')})"]
        return []

    def docs_row(self, command: str) -> dict[str, Any]:
        """This run's row of the results pages' confidence-prediction table (``docs/results_backbones.json``,
        :func:`pipeline.stages.docs_data.record_backbone_run`): the settings that identify it, the epochs run
        and kept, seconds per epoch, the MSE/MAE on valid and test (negatives where measured), and the
        command, machine and date."""
        from pipeline.stages.docs_data import provenance

        cfg, res = self.config, self.results
        err = lambda part, key: None if (v := (res.get(part) or {}).get(key)) is None else round(float(v), 6)  # noqa: E731
        return {
            "dataset": cfg.dataset, "model": cfg.model + ("+psl" if cfg.psl else ""), "lr": cfg.lr,
            "selection": cfg.select_on, "dim": cfg.dim, "batch_size": cfg.batch_size,
            "negative_weight": cfg.negative_weight, "epochs": res["epochs_run"], "best": res["best_epoch"],
            "seconds_per_epoch": None if res.get("seconds_per_epoch") is None else round(res["seconds_per_epoch"], 1),
            "device": res.get("device"),
            "valid_mse": err("valid", "mse"), "valid_neg_mse": err("valid_negatives", "mse"),
            "test_mse": err("test", "mse"), "test_mae": err("test", "mae"),
            "test_neg_mse": err("test_negatives", "mse"),
            **self.link_prediction_figures(),
            **provenance(command, res.get("device")),
        }

    def _batch_note(self, asked: TrainOptions | None) -> str:
        """Why the batch size is what it is, when it is not the user's."""
        from pipeline.models.config import MIN_STEPS_PER_EPOCH, MODEL_DEFAULTS, steps_per_epoch

        cfg = self.config
        if asked is not None and (asked.batch_size is not None or asked.config is not None):
            return ""
        reference = MODEL_DEFAULTS.get(cfg.model, {}).get("batch_size", cfg.batch_size)
        if reference == cfg.batch_size:
            return ""
        return (f"; fitted to the graph: the model's default {reference} gives "
                f"{steps_per_epoch(reference, self.n_train)}, fewer than {MIN_STEPS_PER_EPOCH}")

    def _against_mean(self) -> str:
        """The valid MSE beside the mean predictor's."""
        mse, base = self.results["valid"]["mse"], self.results["mean_predictor"]
        return (f"valid MSE {mse:.4f}, predicting the mean confidence ({base['confidence']:.3f}) "
                f"{base['valid_mse']:.4f}")


def train_dataset(dataset: str, options: TrainOptions | None = None, /, **settings: Any) -> Trained:
    """Train ``options.model`` on ``dataset`` into ``options.out`` (default
    PIPELINE_HOME/runs/DATASET-MODEL[-psl]-sSEED). options: a :class:`TrainOptions`, or its fields as keywords.
    Settings left None take the model's default or the replayed config's; without a given batch size or
    config file, the model's default is fitted to a small graph (pipeline.models.config)."""
    from loaders import dataset_name, load
    from pipeline.core import config
    from pipeline.core.atomic import check_folder
    from pipeline.models import read_run, train
    from pipeline.models.config import fitted_batch_size, train_config

    o = options if options is not None else TrainOptions(**settings)
    check_folder(o.out, "out")
    cfg = train_config(dataset_name(dataset), o.model, o.config, **o.overrides())
    kg = load(cfg.dataset, source=o.source)
    n_train = len(kg.graph("train"))
    if o.batch_size is None and o.config is None:  # a replayed config keeps its own
        cfg = dataclasses.replace(cfg, batch_size=fitted_batch_size(cfg.batch_size, n_train))
    out = Path(o.out or config.home() / "runs" / f"{kg.name}-{cfg.model}{'-psl' if cfg.psl else ''}-s{cfg.seed}")
    results = train(kg, cfg, out, resume=o.resume, progress=o.output, overwrite=o.overwrite,
                    link_prediction=o.link_prediction)
    return Trained(read_run(out), cfg, n_train, results)
