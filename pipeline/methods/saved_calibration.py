"""A saved SRC calibration applied to one query (`pipeline query --calibration PATH`): the D file
(``RUN/calibration/D-<key>.json``, holding delta) and/or the L folder (``RUN/calibration/L-<key>/``, the
fitted affine correction) that `pipeline answer` chose, so that `pipeline query` prints the utilities the
answers file holds. No fitting here: only what was saved is read, and its model is checked by content hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.engine.adjacency import Adjacency


@dataclass(frozen=True)
class SavedCalibration:
    adjacency: Adjacency  # calibrated by L when an L folder was given
    delta: float  # D's delta (0 when no D file)
    label: str  # e.g. "D (delta 0.1) + L (L-ab12...)"


def apply_saved(
    adj: Adjacency, manifest: dict[str, Any], paths: Sequence[str | Path], run_dir: str | Path | None = None
) -> SavedCalibration:
    """adj calibrated by the saved D file and/or L folder of paths (at most one of each)."""
    delta, parts, l_seen = 0.0, [], False
    for raw in paths:
        p = Path(raw)
        if p.is_file() and p.name.startswith("D-") and p.suffix == ".json":
            if parts and parts[0].startswith("D"):
                raise PipelineError(f"{p}: a second D file (give at most one D and one L)")
            from pipeline.methods.calibration import read_saved_delta

            delta = read_saved_delta(p)  # sealed: an edited delta is refused, naming the file
            parts.insert(0, f"D (delta {delta:g})")
        elif p.is_dir() and p.name.startswith("L-"):
            if l_seen:
                raise PipelineError(f"{p}: a second L folder (give at most one D and one L)")
            adj = _apply_l(adj, manifest, p, run_dir)
            l_seen = True
            parts.append(f"L ({p.name})")
        else:
            raise PipelineError(
                f"{p}: not a saved calibration (a D-<key>.json file or an L-<key> folder under RUN/calibration/)"
            )
    return SavedCalibration(adj, delta, " + ".join(parts) or "none")


def _apply_l(adj: Adjacency, manifest: dict[str, Any], folder: Path, run_dir: str | Path | None) -> Adjacency:
    import torch

    from pipeline.methods.calibration import calibrated_adjacency, feature_tables, load_affine
    from pipeline.models import load_run

    run_path = Path(run_dir) if run_dir else folder.parent.parent  # RUN/calibration/L-<key>
    if not (run_path / "config.json").exists():
        raise PipelineError(f"{folder}: calibration L needs its backbone's run directory; {run_path} is not one")
    model = load_run(run_path, device=str(adj.device))
    if manifest.get("model_hash") and model.content_hash() != manifest["model_hash"]:
        raise ArtifactError(f"{run_path}: its model is not the one of this export (content hash differs)")
    tables = feature_tables(model, adj.device)
    calib = load_affine(folder, tables[0].shape[1], tables[1].shape[1], adj.device)
    if calib is None:
        raise ArtifactError(f"{folder}: holds no saved calibration L (L.pt)")
    with torch.no_grad():
        return calibrated_adjacency(adj, calib, tables)
