"""Answering methods by name: each turns queries into utilities (see :class:`.base.Method`).

>>> from pipeline.methods import METHODS
>>> METHODS.names()
['src', 'logice_ne', 'cone_ne']
"""

from __future__ import annotations

from typing import Any

from pipeline.core.registry import Registry
from pipeline.methods.base import BuildInputs, Capabilities, Method, MethodOptions
from pipeline.methods.qe import ConENE, LogicENE, QueryEmbedding
from pipeline.methods.src import SRC


def _row(m: type[Method]) -> dict[str, Any]:
    """`pipeline ls methods`: what each method is built from and which answer options it takes."""
    caps = m.capabilities
    takes = [opt for opt, ok in (("--calibration", caps.calibration), ("--explain", caps.explain),
                                 ("--union", caps.union), ("--from-store", caps.any_shape)) if ok]
    return {"name": m.name, "from": caps.source_flag, "options": " ".join(takes), "description": m.description}


METHODS: Registry[type[Method]] = Registry("method", (SRC, LogicENE, ConENE), row=_row)

__all__ = [
    "METHODS", "SRC", "BuildInputs", "Capabilities", "ConENE", "LogicENE", "Method", "MethodOptions", "QueryEmbedding",
]
