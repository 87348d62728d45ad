"""Training configuration: one frozen value per run, saved as the run's config.json.

Defaults follow the reference code of each backbone: UKGE (dim 128, lr 1e-3, batch 1024, 10 negatives per
fact and side, L2 5e-4) and BEUrRE for CN15k (dim 64, lr 1e-4, batch 4096, 30 negatives, Gumbel beta 0.01).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.errors import ArtifactError, PipelineError, option

MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "ukge_logi": {"dim": 128, "lr": 1e-3, "batch_size": 1024, "negatives": 10, "model_kwargs": {"l2": 5e-4}},
    "ukge_rect": {"dim": 128, "lr": 1e-3, "batch_size": 1024, "negatives": 10, "model_kwargs": {"l2": 5e-4}},
    "beurre": {
        "dim": 64,
        "lr": 1e-4,
        "batch_size": 4096,
        "negatives": 30,
        "model_kwargs": {"gumbel_beta": 0.01},
    },
}


SELECT_ON = ("valid_pos_neg", "valid_pos", "last")

# A small graph at the reference batch size is one optimisation step per epoch (406 facts at 1024) and
# barely learns in 100 epochs; every benchmark set is far above this (PPI5k 210 steps, CN15k 201, BEUrRE's
# 4096 still 50+), so their runs are unchanged.
MIN_STEPS_PER_EPOCH = 16
MIN_BATCH_SIZE = 8


def fitted_batch_size(default: int, n_train: int) -> int:
    """The batch size a run uses when none is given: `default`, or smaller where `default` would give
    fewer than MIN_STEPS_PER_EPOCH steps over `n_train` facts (never below MIN_BATCH_SIZE, never above
    `default`)."""
    if n_train <= 0 or -(-n_train // default) >= MIN_STEPS_PER_EPOCH:
        return default
    return min(default, max(MIN_BATCH_SIZE, n_train // MIN_STEPS_PER_EPOCH))


def steps_per_epoch(batch_size: int, n_train: int) -> int:
    """Optimisation steps of one epoch over n_train facts (the last batch may be short; at least 1)."""
    return max(1, -(-n_train // batch_size))


@dataclass(frozen=True)
class TrainConfig:
    """One training run. `negatives` corruptions per fact for heads and as many for tails; early stopping
    after `patience` epochs without a lower selection MSE; `select_on` = "valid_pos_neg" (default, as the
    BEUrRE code: the mean of the MSE on valid positives and on as many sampled valid negatives, so a model
    that calls everything likely is not selected), "valid_pos" (positives only) or "last" (the final
    epoch of the budget, no early stopping, as UKGE's code keeps its last model: sharper on negatives, which
    ranking-based query answering rewards); `psl_weight` scales the soft-logic loss of UKGE+PSL (0.2 in
    UKGE's code); `negative_weight` scales the sampled negatives' squared error against the positives' (1 in
    UKGE's and BEUrRE's code; below 1 a fact the model is unsure of is predicted nearer its confidence than
    near 0)."""

    dataset: str
    model: str
    psl: bool = False
    dim: int = 128
    epochs: int = 100
    lr: float = 1e-3
    batch_size: int = 1024
    negatives: int = 10
    patience: int = 10
    select_on: str = "valid_pos_neg"
    psl_weight: float = 0.2
    negative_weight: float = 1.0
    seed: int = 0
    device: str | None = None
    model_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # every source of a config passes here (flags, a replayed config.json, the Python API): values out
        # of range are one line naming the setting, never clamped and never a traceback in training
        from pipeline.core.checks import check_device, check_float, check_int, check_seed, check_text

        check_text(self.dataset, "dataset")
        check_text(self.model, "model")
        if not isinstance(self.psl, bool):
            raise PipelineError(f"psl: expected true or false, got {self.psl!r}")
        check_int(self.dim, "dim", 1, 1 << 16)
        check_int(self.epochs, "epochs", 1, 10**6)
        check_float(self.lr, "lr", 0.0, 10.0, lo_open=True)
        check_int(self.batch_size, "batch_size", 1, 1 << 30)
        check_int(self.negatives, "negatives", 1, 10**4)
        check_int(self.patience, "patience", 1, 10**6)
        check_float(self.psl_weight, "psl_weight", 0.0)
        check_float(self.negative_weight, "negative_weight", 0.0)
        check_seed(self.seed, "seed")
        object.__setattr__(self, "device", check_device(self.device))  # CPU is cpu
        object.__setattr__(self, "model_kwargs", _checked_model_kwargs(self.model, self.model_kwargs))
        if self.select_on not in SELECT_ON:
            raise PipelineError(f"select_on must be one of {', '.join(SELECT_ON)}, not {self.select_on!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        if not isinstance(d, dict):
            raise ArtifactError(f"config.json: expected a JSON object, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ArtifactError(f"config.json: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in d
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ArtifactError(f"config.json: missing field(s) {', '.join(missing)}")
        return cls(**d)

    def resumable_from(self, other: TrainConfig) -> bool:
        """Same run up to the epoch budget and device (those may change on resume)."""
        strip = lambda c: {k: v for k, v in c.to_dict().items() if k not in ("epochs", "device")}  # noqa: E731
        return strip(self) == strip(other)


def _checked_model_kwargs(model: str, given: Any) -> dict[str, Any]:
    """A run's ``model_kwargs`` checked against the model's declared hyper-parameters
    (:attr:`~pipeline.models.base.ConfidenceModel.hyper_options`): an unknown name (``__class__``, ``seed``,
    which is a setting of its own) or a value of the wrong kind or range is one PipelineError, never a
    TypeError when the model is built."""
    from pipeline.core.options import check_mapping, declare
    from pipeline.models.registry import get_model_class

    cls = get_model_class(model)
    options = [declare(name, o) for name, o in cls.hyper_options.items()]
    return check_mapping(given, options, lambda name, value: f"model_kwargs {name}={value!r} ({model})",
                         "model_kwargs")


def default_config(dataset: str, model: str, *, n_train: int | None = None, **overrides: Any) -> TrainConfig:
    """The reference defaults of `model`, with overrides (None values are ignored). With `n_train` (the
    number of train facts) and no batch size among the overrides, the batch size is fitted to the graph
    (fitted_batch_size): unchanged wherever the reference size already gives enough steps per epoch."""
    from pipeline.models.registry import get_model_class

    get_model_class(model)  # unknown name -> UnknownNameError listing the known ones
    base = dict(MODEL_DEFAULTS.get(model, {}))
    kwargs = dict(base.pop("model_kwargs", {}))
    kwargs.update(overrides.pop("model_kwargs", None) or {})
    base.update({k: v for k, v in overrides.items() if v is not None})
    if n_train is not None and overrides.get("batch_size") is None:
        base["batch_size"] = fitted_batch_size(base.get("batch_size", TrainConfig.batch_size), n_train)
    return TrainConfig(dataset=dataset, model=model, model_kwargs=kwargs, **base)


def train_config(dataset: str, model: str | None, config_file: str | Path | None = None, **overrides: Any) -> TrainConfig:
    """The config of `pipeline train`: the model's reference defaults, or a saved ``config.json`` replayed
    exactly (``--config``), with the options given besides (non-None ``overrides``) on top."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if config_file is None:
        if model is None:
            raise PipelineError(f"give {option('model')} (see `pipeline ls models`) or {option('config')} (a saved "
                                "RUN_DIR/config.json)")
        return default_config(dataset, model, **given)
    from pipeline.formats.meta import read_json

    path = Path(config_file)
    if (path.parent / "checksums.json").exists():
        # a run directory's config.json: sealed by its checksums.json, as export and --resume read it
        from pipeline.models.runs import read_json as read_run_json

        read_run_json(path)
    saved = read_json(path, "--config")
    if not isinstance(saved, dict):
        raise ArtifactError(f"{option('config', str(path))}: not a JSON object")
    try:
        cfg = TrainConfig.from_dict(saved)
    except PipelineError as exc:
        raise ArtifactError(f"{option('config', str(path))}: {str(exc).removeprefix('config.json: ')}") from None
    if cfg.dataset != dataset:
        raise PipelineError(f"{option('config', str(path))}: a config for data set '{cfg.dataset}', not '{dataset}'")
    if model is not None and model != cfg.model:
        raise PipelineError(f"{option('config', str(path))}: a config for model '{cfg.model}', not '{model}'")
    return dataclasses.replace(cfg, **given)
