"""The calibrations of SRC by name (``--calibration``, ``pipeline ls calibrations``): what each applies and
the label its results carry in the tables. Imports no torch, so the results tables (:mod:`pipeline.stages.
evaluate`) read the labels and their order without loading the engine.

>>> [c.label for c in CALIBRATIONS.values()]
['SRC', 'SRC(D)', 'SRC(L)', 'SRC(D+L)']
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.registry import Registry


@dataclass(frozen=True)
class Calibration:
    """A calibration of SRC: its name (``--calibration``), table label and which corrections it applies
    (D: alpha lowered by delta; L: the learned affine correction of the predicted confidences)."""

    name: str
    label: str
    uses_delta: bool
    uses_l: bool
    description: str


CALIBRATIONS: Registry[Calibration] = Registry(
    "calibration",
    (
        Calibration("none", "SRC", False, False, "predicted confidences as exported"),
        Calibration("D", "SRC(D)", True, False, "alpha - delta, delta chosen on the valid queries"),
        Calibration("L", "SRC(L)", False, True, "learned affine correction, fitted on alpha-0 train queries"),
        Calibration("D+L", "SRC(D+L)", True, True, "L, then delta chosen with L applied"),
    ),
    row=lambda c: {"name": c.name, "label": c.label, "description": c.description},
)

# D's candidates (0 included, so D never does worse on the valid queries than none)
DELTA_GRID = (0.0, 0.05, 0.1, 0.15, 0.2)

# Bumped whenever L's training changes what it learns, so saved calibrations of older code are never reused.
L_VERSION = 2


def method_label(calibration: str) -> str:
    """The table name of a calibration: none -> SRC, D -> SRC(D), ..."""
    return CALIBRATIONS[calibration].label
