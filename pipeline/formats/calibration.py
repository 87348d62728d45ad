"""The saved delta of calibration D: ``RUN/calibration/D-<key>.json``, written by ``pipeline answer`` when it
chooses delta on the valid queries and read back by the next answer with the same inputs (the key) and by
``pipeline query --calibration`` (so a query prints the utilities the answers file holds).

The document is sealed (:func:`pipeline.core.provenance.seal`): an edited delta, or one without its digest,
is refused with one line naming the file, never used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core import atomic, jsontext
from pipeline.core.errors import ArtifactError
from pipeline.core.provenance import is_sealed, provenance, seal

FORMAT = "pipeline-delta"


def delta_path(folder: Path, key: str) -> Path:
    """Where the delta of content key ``key`` is saved under a run's calibration folder."""
    return folder / f"D-{key}.json"


def is_delta_file(path: Path) -> bool:
    """A saved delta's name (``D-<key>.json``), whatever its content."""
    return path.name.startswith("D-") and path.suffix == ".json"


def write_delta(path: Path, delta: float, scores: dict[float, float], inputs: dict[str, Any]) -> Path:
    """Save the chosen delta with every candidate's valid score and the inputs of its key, sealed."""
    doc = {"format": FORMAT, "delta": float(delta), "scores": {str(k): v for k, v in scores.items()},
           "inputs": inputs, "provenance": provenance(inputs)}
    return atomic.write_json(path, seal(doc))


def read_delta(path: Path) -> float:
    """The delta saved at ``path``; ArtifactError (naming the file) when it is missing, not JSON, not a
    saved delta, edited after it was written, or not a number in [0, 1]."""
    try:
        doc = jsontext.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such saved delta") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: not a saved delta (not valid JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or "delta" not in doc:
        raise ArtifactError(f"{path}: not a saved delta of calibration D (format {FORMAT!r})")
    if not is_sealed(doc):
        raise ArtifactError(f"{path}: the saved delta was edited after it was written (digest mismatch); "
                            "answer again to choose delta")
    delta = doc["delta"]
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 <= float(delta) <= 1.0:
        raise ArtifactError(f"{path}: delta {delta!r} is not a number in [0, 1]")
    return float(delta)
