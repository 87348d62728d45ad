"""Task functions the executor tests send to workers (module level, so a Ray worker imports them)."""

from __future__ import annotations

import os
from pathlib import Path


def die_once(marker: str, x: int) -> int:
    """Kill the worker process on the first attempt (as an out-of-memory kill would), succeed on the retry."""
    m = Path(marker)
    if not m.exists():
        m.write_text("killed once")
        os._exit(1)
    return 2 * x
