"""Answering methods by name: each turns queries into utilities (see :class:`.base.Method`).

>>> from pipeline.methods import METHODS
>>> METHODS.names()
['src', 'logice_ne', 'cone_ne']
"""

from __future__ import annotations

from pipeline.methods.base import BuildInputs, Capabilities, Method, MethodOptions
from pipeline.methods.qe import ConENE, LogicENE, QueryEmbedding
from pipeline.methods.src import SRC
from pipeline.registry import Registry

METHODS: Registry[type[Method]] = Registry("method", (SRC, LogicENE, ConENE))

__all__ = [
    "METHODS", "SRC", "BuildInputs", "Capabilities", "ConENE", "LogicENE", "Method", "MethodOptions", "QueryEmbedding",
]
