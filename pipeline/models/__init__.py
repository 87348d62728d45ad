"""Uncertain KG embeddings (the backbones of SRC): a registry by name, training, and run directories.

>>> from pipeline.models import MODELS, load_run
>>> model = load_run("runs/ppi5k-ukge_logi-s0")       # a ConfidenceModel in eval mode
>>> model.score(h, r, t)                               # (N,) float32 confidences in [0, 1]
>>> eh, er, et = model.features(h, r, t)               # feature vectors for calibration L

`--psl` (UKGE+PSL) is a training option, not a model name.
"""

from __future__ import annotations

from pipeline.errors import unknown_name
from pipeline.models.base import ConfidenceModel
from pipeline.models.beurre import BEUrRE
from pipeline.models.ukge import UKGELogi, UKGERect

MODELS: dict[str, type[ConfidenceModel]] = {cls.name: cls for cls in (UKGELogi, UKGERect, BEUrRE)}


def get_model_class(name: str) -> type[ConfidenceModel]:
    """The registered class of a model name; an unknown name raises UnknownNameError."""
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise unknown_name("model", name, list(MODELS)) from None


from pipeline.models.runs import Run, load_run, read_run  # noqa: E402
from pipeline.models.training import TrainConfig, default_config, train  # noqa: E402

__all__ = [
    "MODELS",
    "BEUrRE",
    "ConfidenceModel",
    "Run",
    "TrainConfig",
    "UKGELogi",
    "UKGERect",
    "default_config",
    "get_model_class",
    "load_run",
    "read_run",
    "train",
]
