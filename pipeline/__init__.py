"""Soft queries over uncertain knowledge graphs (SRC: exact max-plus search over predicted confidences).

``import pipeline as pl`` is the Python API (:mod:`pipeline.api`): ``pl.ingest``, ``pl.dataset``,
``pl.query``, ``pl.train``, ``pl.export``, ``pl.sample``, ``pl.answer``, ``pl.evaluate``, ``pl.cypher``, the
values they return and ``pl.PipelineError``. Its names load on first use, so ``import pipeline`` (and the
CLI's start) stays cheap: no torch, no pandas until a stage runs.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "Answers",
    "Atom",
    "Dataset",
    "Explanation",
    "Export",
    "PipelineError",
    "QuerySet",
    "Ranking",
    "Run",
    "answer",
    "cypher",
    "dataset",
    "evaluate",
    "export",
    "ingest",
    "query",
    "sample",
    "train",
]


def __getattr__(name: str) -> Any:
    # by its name as a string: the API imports every stage, and no stage may import the package back
    if name in __all__:
        from importlib import import_module

        return getattr(import_module("pipeline.api"), name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


class _Package(ModuleType):
    """The package, whose API names win over its submodules of the same name (``pipeline.query``, the
    package of query types and parsing): importing it leaves it in ``sys.modules`` without binding it here,
    so ``pl.query`` stays the function. The stages live under ``pipeline.stages`` and the foundation under
    ``pipeline.core``, so no other name is shared."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in __all__ and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
