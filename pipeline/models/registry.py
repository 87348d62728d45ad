"""The registered backbones by name (``ukge_logi``, ``ukge_rect``, ``beurre``)."""

from __future__ import annotations

from pipeline.core.registry import Registry
from pipeline.models.base import ConfidenceModel
from pipeline.models.beurre import BEUrRE
from pipeline.models.ukge import UKGELogi, UKGERect

BACKBONES: Registry[type[ConfidenceModel]] = Registry("model", (UKGELogi, UKGERect, BEUrRE))


def get_model_class(name: str) -> type[ConfidenceModel]:
    """The registered class of a model name; an unknown name raises UnknownNameError."""
    return BACKBONES.get(name)
