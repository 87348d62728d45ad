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
    """'cuda' when present unless a device is requested explicitly; never hard-coded. A requested device
    must exist here: ``cpu``, ``cuda``/``cuda:N`` with CUDA in this torch build and that GPU visible, or
    ``mps``; anything else is one PipelineError (not torch's traceback at the first tensor)."""
    import torch

    from pipeline.core.errors import PipelineError

    if requested is None or requested == "":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not isinstance(requested, str):
        raise PipelineError(f"--device: expected cpu, cuda or cuda:N, got {requested!r}")
    try:
        dev = torch.device(requested)
    except (RuntimeError, ValueError):
        raise PipelineError(f"--device {requested!r}: not a device; expected cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, no GPU visible"
            raise PipelineError(f"--device {requested}: torch {torch.__version__} here is {build}; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise PipelineError(f"--device {requested}: only {torch.cuda.device_count()} GPU(s) visible")
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise PipelineError(f"--device {requested}: no MPS device here; use --device cpu")
    elif dev.type != "cpu":
        raise PipelineError(f"--device {requested!r}: expected cpu, cuda or cuda:N")
    return requested
