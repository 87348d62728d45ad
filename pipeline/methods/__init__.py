"""Answering methods by name: each turns queries into utilities (see :class:`.base.Method`). SRC and its
calibrations live in :mod:`pipeline.methods.src`, the query-embedding baselines in :mod:`pipeline.methods.qe`.
Names load on first use (torch only then).

>>> from pipeline.methods import METHODS
>>> METHODS.names()
['src', 'logice_ne', 'cone_ne']
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "METHODS": "pipeline.methods.registry",
    "SRC": "pipeline.methods.src.method",
    "BuildInputs": "pipeline.methods.base",
    "Capabilities": "pipeline.methods.base",
    "Method": "pipeline.methods.base",
    "MethodOptions": "pipeline.methods.base",
    "ConENE": "pipeline.methods.qe",
    "LogicENE": "pipeline.methods.qe",
    "QueryEmbedding": "pipeline.methods.qe",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipeline.methods' has no attribute {name!r}")
