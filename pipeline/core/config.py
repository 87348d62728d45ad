"""Environment-driven locations: PIPELINE_HOME, PIPELINE_DATA, PIPELINE_STORE (design section 5)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """Root of caches, models and the embedded store (default ~/.cache/pipeline)."""
    return Path(os.environ.get("PIPELINE_HOME", Path.home() / ".cache" / "pipeline")).expanduser()


def data_mirror() -> Path | None:
    """A local mirror root holding one folder per data set, or None."""
    root = os.environ.get("PIPELINE_DATA")
    return Path(root).expanduser() if root else None


def default_store_uri() -> str:
    """The store URI used when --store is not given."""
    return os.environ.get("PIPELINE_STORE", "embedded")


def repo_root() -> Path:
    """The checkout root (holds cypher/, docs/)."""
    return Path(__file__).resolve().parents[2]


def select_device(requested: str | None = None) -> str:
    """'cuda' when present unless a device is requested explicitly; never hard-coded."""
    if requested:
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
