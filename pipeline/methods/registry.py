"""The answering methods by name (``pipeline answer --method NAME``, ``pipeline ls methods``).

>>> METHODS.names()
['src', 'logice_ne', 'cone_ne']
"""

from __future__ import annotations

from typing import Any

from pipeline.core.registry import Registry
from pipeline.methods.base import Method
from pipeline.methods.qe import ConENE, LogicENE
from pipeline.methods.src.method import SRC


def _row(m: type[Method]) -> dict[str, Any]:
    """`pipeline ls methods`: what each method is built from and which answer options it takes."""
    caps = m.capabilities
    takes = [opt for opt, ok in (("--calibration", caps.calibration), ("--explain", caps.explain),
                                 ("--union", caps.union), ("--from-store", caps.any_shape)) if ok]
    return {"name": m.name, "from": caps.source_flag, "options": " ".join(takes), "description": m.description}


METHODS: Registry[type[Method]] = Registry("method", (SRC, LogicENE, ConENE), row=_row)
