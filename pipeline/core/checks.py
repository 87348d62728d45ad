"""Inputs checked at the door (issue 45, items 12 and 13): the checks that the CLI, config files, the
environment and the Python API all pass through, so a value out of range is one PipelineError naming it,
never a traceback from deep inside and never a value silently clamped or ignored.

Seeds: any integer in 0..2^32 - 1, the range every generator the project seeds accepts (numpy's legacy
seed, torch, Python's random); a negative or larger one is refused rather than folded into that range.
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.core.errors import PipelineError

SEED_MAX = 2**32 - 1


def check_int(value: Any, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int in [lo, hi]; bools, floats and strings are refused (``"16"`` is not 16)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PipelineError(f"{name}: expected an integer, got {_show(value)}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise PipelineError(f"{name}: {_show(value)} is out of range ({_range(lo, hi)})")
    return int(value)


def check_float(
    value: Any, name: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False
) -> float:
    """``value`` as a finite float in [lo, hi] (``lo_open``: (lo, hi]); NaN, infinities, bools and strings
    are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PipelineError(f"{name}: expected a number, got {_show(value)}")
    v = float(value)
    if not math.isfinite(v):
        raise PipelineError(f"{name}: {v} is not a finite number")
    if (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and v > hi):
        low = "(" if lo_open else "["
        raise PipelineError(f"{name}: {v:g} is out of range ({_range(lo, hi, low)})")
    return v


def check_seed(value: Any, name: str = "seed") -> int:
    """A seed: an integer in 0..2^32 - 1."""
    return check_int(value, name, 0, SEED_MAX)


def check_text(value: Any, name: str) -> str:
    """A non-empty string."""
    if not isinstance(value, str):
        raise PipelineError(f"{name}: expected text, got {_show(value)}")
    if not value.strip():
        raise PipelineError(f"{name}: empty")
    return value


def _range(lo: Any, hi: Any, low: str = "[") -> str:
    if lo is None:
        return f"at most {hi}"
    if hi is None:
        return f">= {lo}" if low == "[" else f"> {lo}"
    return f"{low}{lo}, {hi}]"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
