"""Uncertain KG embeddings (the backbones of SRC): a registry by name, training, and run directories.

>>> from pipeline.models import BACKBONES, load_run
>>> model = load_run("runs/ppi5k-ukge_logi-s0")       # a ConfidenceModel in eval mode
>>> model.score(h, r, t)                               # (N,) float32 confidences in [0, 1]
>>> eh, er, et = model.features(h, r, t)               # feature vectors for calibration L

`--psl` (UKGE+PSL) is a training option, not a model name.
"""

from __future__ import annotations

from pipeline.models.base import ConfidenceModel
from pipeline.models.beurre import BEUrRE
from pipeline.models.registry import BACKBONES, get_model_class
from pipeline.models.runs import Run, load_run, read_run
from pipeline.models.training import TrainConfig, default_config, train
from pipeline.models.ukge import UKGELogi, UKGERect

__all__ = [
    "BACKBONES",
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
