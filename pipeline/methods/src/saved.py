"""Saved calibrations of SRC as a person names them (``pipeline query --calibration PATH``): a saved D
(``RUN/calibration/D-<key>.json``, delta) and/or L (``RUN/calibration/L-<key>/``, the fitted affine
correction). They are applied by :meth:`SRC.apply_saved <pipeline.methods.src.method.SRC.apply_saved>`, the one
place a saved calibration is applied, so a query prints the utilities the answers file holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.core.errors import PipelineError
from pipeline.formats.calibration import is_delta_file


def saved_paths(paths: Sequence[str | Path]) -> tuple[Path | None, Path | None]:
    """(the D file, the L folder) among the paths a person gave (at most one of each); PipelineError for
    anything else."""
    d_file: Path | None = None
    l_dir: Path | None = None
    for raw in paths:
        p = Path(raw)
        if p.is_file() and is_delta_file(p):
            if d_file is not None:
                raise PipelineError(f"{p}: a second D file (give at most one D and one L)")
            d_file = p
        elif p.is_dir() and p.name.startswith("L-"):
            if l_dir is not None:
                raise PipelineError(f"{p}: a second L folder (give at most one D and one L)")
            l_dir = p
        else:
            raise PipelineError(
                f"{p}: not a saved calibration (a D-<key>.json file or an L-<key> folder under RUN/calibration/)"
            )
    return d_file, l_dir


def saved_label(d_file: Path | None, delta: float, l_dir: Path | None) -> str:
    """How ``pipeline query`` names the calibration it applied, e.g. ``D (delta 0.1) + L (L-ab12...)``."""
    parts = ([f"D (delta {delta:g})"] if d_file is not None else []) + ([f"L ({l_dir.name})"] if l_dir else [])
    return " + ".join(parts) or "none"
