"""Soft queries over uncertain knowledge graphs (SRC: exact max-plus search over predicted confidences).

``import pipeline as pl`` is the Python API (:mod:`pipeline.api`): ``pl.ingest``, ``pl.dataset``,
``pl.query``, ``pl.train``, ``pl.export``, ``pl.sample``, ``pl.answer``, ``pl.evaluate``, ``pl.cypher``, the
values they return and ``pl.PipelineError``. Its names load on first use, so ``import pipeline`` (and the
CLI's start) stays cheap: no torch, no pandas until a stage runs.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "Answers",
    "Dataset",
    "Experiment",
    "Explanation",
    "Export",
    "PipelineError",
    "QuerySet",
    "Ranking",
    "Run",
    "WitnessAtom",
    "answer",
    "cypher",
    "dataset",
    "evaluate",
    "export",
    "ingest",
    "query",
    "run",
    "sample",
    "train",
]


def __getattr__(name: str) -> Any:
    # by its name as a string: the API imports every stage, and no stage may import the package back. Whole:
    # the API's first import loads torch (seconds), and a Ctrl-C in the middle of it would leave torch half
    # imported and the process unusable (pipeline.core.imports); the interrupt lands once it is complete
    if name in __all__:
        from pipeline.core.imports import import_whole

        return getattr(import_whole("pipeline.api"), name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the public names only: what a notebook's completion and dir(pl) offer (not this module's own imports)
    return sorted([*__all__, "__version__"])
