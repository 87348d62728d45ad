"""Which answering method ``pipeline answer`` builds, and from what: :class:`MethodOptions`, declared once
(:mod:`pipeline.core.options`), so the command line's options, the Python API's keywords and their checks
come from these fields. No torch here: the command line builds its options from this module at start."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.options import check, setting


@dataclass(frozen=True, kw_only=True)
class MethodOptions:
    """What the person chose about the method (each method reads the fields its
    :class:`~pipeline.methods.base.Capabilities` declare). kg: the loaded data set when the caller has it
    (not an option: saves loading it again)."""

    method: str | None = setting(None, registry="methods",
                                 help="Answering method (`pipeline ls methods`; default: src, or the baseline that trained --model).")
    adjacency: str | Path | None = setting(None, help="A neural adjacency export directory (SRC).")
    model: str | Path | None = setting(None, help="A query-embedding baseline run (`pipeline train-qe`) instead of SRC.")
    calibration: str = setting("none", registry="calibrations", help="SRC's calibration (`pipeline ls calibrations`).")
    union: str | None = setting(None, choices=("dnf", "conorm"),
                                help="Baselines: answer disjunctions by DNF (max over branches, default) or LogicE's t-conorm.")
    run: str | Path | None = setting(None, help="The backbone's run directory, for calibration L (default: the export's).")
    l_epochs: int = setting(20, low=0, high=10**6, help="Epochs of calibration L.")
    device: str | None = setting(None, help="cpu | cuda | cuda:N (default: cuda when present).")
    seed: int = setting(0, low=0, high=2**32 - 1, help="Seed of calibration L's training.")
    cycle_cap: int | None = setting(None, low=1, help="SRC: at most this many candidates per cycle variable of a query "
                                                      "with cycles (its utilities are then lower bounds).")
    kg: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check(self)
