"""Inputs checked at the door: the checks that the CLI, config files, the
environment and the Python API all pass through, so a value out of range is one PipelineError naming it,
never a traceback from deep inside and never a value silently clamped or ignored.

Seeds: any integer in 0..2^32 - 1, the range every generator the project seeds accepts (numpy's legacy
seed, torch, Python's random); a negative or larger one is refused rather than folded into that range.

Numbers as Python gives them: an integer is any integral number but a bool (``8``, ``np.int64(8)``), never
a float, even a whole one (``dim=1e3`` is a typo for ``1000`` or for ``0.001``: refused, not truncated); a
real number is any of those or a float (``np.float32(0.3)``), finite; a complex number is refused whatever
its imaginary part (its real part alone would be a silent guess). Text must be valid Unicode: a lone
surrogate (``'\\ud800'``, what Python makes of undecodable bytes) cannot be written to any file.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

from pipeline.core.errors import PipelineError

SEED_MAX = 2**32 - 1
DEVICE = re.compile(r"cpu|mps|cuda(?::\d+)?")  # torch's spellings the project runs on (that it exists: at use)


def as_int(value: Any) -> int | None:
    """``value`` as a Python int when it is an integer (an int or a numpy integer, not a bool); else None."""
    if isinstance(value, (bool, complex)) or not isinstance(value, numbers.Integral) or type(value).__name__ == "bool_":
        return None
    return int(value)


def as_real(value: Any) -> float | None:
    """``value`` as a Python float when it is a real number (int, float, numpy integer or floating, not a
    bool; NaN and infinities included: the caller checks them); else None (complex numbers, strings)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_" or not isinstance(value, numbers.Real):
        return None
    if not isinstance(value, float) and getattr(getattr(value, "dtype", None), "kind", "") == "f":
        return float(str(value))  # np.float32(0.3) is the 0.3 typed, not 0.30000001192092896
    return float(value)


def number_kind(value: Any) -> str:
    """What a value that is not the number expected is, for the message: 'a complex number', 'a bool'..."""
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        return "a complex number"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "a bool"
    if isinstance(value, numbers.Real):
        return "a float"
    if isinstance(value, str):
        return "text"
    return type(value).__name__


def check_int(value: Any, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int in [lo, hi]; bools, floats, complex numbers and strings are refused (``"16"`` is
    not 16, nor is ``16.0``); numpy integers are taken."""
    got = as_int(value)
    if got is None:
        raise PipelineError(f"{name}: expected an integer, got {_show(value)} ({number_kind(value)})")
    value = got
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise PipelineError(f"{name}: {_show(value)} is out of range ({_range(lo, hi)})")
    return int(value)


def check_float(
    value: Any, name: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False
) -> float:
    """``value`` as a finite float in [lo, hi] (``lo_open``: (lo, hi]); NaN, infinities, bools, complex
    numbers and strings are refused; numpy numbers are taken."""
    v = as_real(value)
    if v is None:
        raise PipelineError(f"{name}: expected a number, got {_show(value)} ({number_kind(value)})")
    if not math.isfinite(v):
        raise PipelineError(f"{name}: {v} is not a finite number")
    if (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and v > hi):
        low = "(" if lo_open else "["
        raise PipelineError(f"{name}: {v:g} is out of range ({_range(lo, hi, low)})")
    return v


def check_seed(value: Any, name: str = "seed") -> int:
    """A seed: an integer in 0..2^32 - 1."""
    return check_int(value, name, 0, SEED_MAX)


def check_device(value: Any, name: str = "device") -> str | None:
    """None (the default device) or a device's spelling (cpu, cuda, cuda:N, mps); "" is refused, not taken
    for the default (a value lost on the way: an unset shell variable)."""
    if value is None:
        return None
    if not isinstance(value, str) or not DEVICE.fullmatch(value.lower()):
        raise PipelineError(f"{name}: expected cpu, cuda, cuda:N or mps, got {_show(value)}")
    return value.lower()  # CPU is cpu (torch takes the lowercase spelling only)


def check_text(value: Any, name: str) -> str:
    """A non-empty string of valid Unicode."""
    if not isinstance(value, str):
        raise PipelineError(f"{name}: expected text, got {_show(value)}")
    if not value.strip():
        raise PipelineError(f"{name}: empty")
    return check_unicode(value, name)


def lone_surrogate(text: str) -> int | None:
    """The position of the first lone surrogate of ``text`` (a character no UTF-8 file can hold), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return int(exc.start)
    return None


def check_unicode(value: str, name: str) -> str:
    """``value`` unless it holds a lone surrogate (``'\\ud800'``: undecodable bytes of a file name or an
    argument, or a bad escape), which no file can be written with: one line naming it and where."""
    at = lone_surrogate(value)
    if at is not None:
        raise PipelineError(f"{name}: {unicode_problem(value, at)}")
    return value


def unicode_problem(text: str, at: int) -> str:
    """What is wrong with text whose character ``at`` is a lone surrogate, for a message."""
    return (f"not valid Unicode: a lone surrogate \\u{ord(text[at]):04x} at character {at + 1} "
            "(undecodable bytes, or half of an escaped pair)")


def _range(lo: Any, hi: Any, low: str = "[") -> str:
    if lo is None:
        return f"at most {hi}"
    if hi is None:
        return f">= {lo}" if low == "[" else f"> {lo}"
    return f"{low}{lo}, {hi}]"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
