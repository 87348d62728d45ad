"""What an answering method is: anything that turns a batch of soft queries into a utility for every entity.

SRC over an export with a calibration (:mod:`pipeline.methods.src`) is one; a query-embedding baseline is
another. ``pipeline answer``, ``pipeline evaluate``, ``pipeline reproduce`` and the results tables only see
this interface, so a new method is one new module registered in :data:`pipeline.methods.METHODS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch

from pipeline.query.model import Query


class Method(ABC):
    """A built method, ready to answer queries of one data set.

    Class attributes: ``name`` (the registry key, ``pipeline answer --method NAME``) and ``description``.
    Instance attributes: ``dataset``, ``n_entities`` and ``label``, the method's row name in the results
    tables (e.g. ``ukge_logi SRC(D+L)``; unique per configuration that should get its own row)."""

    name: ClassVar[str]
    description: ClassVar[str]
    dataset: str
    n_entities: int
    label: str

    @abstractmethod
    def utilities(self, queries: Sequence[Query]) -> torch.Tensor:
        """(len(queries), n_entities) float predicted utilities, -inf where a query fails for an entity.
        Queries of one batch share one shape (one query type)."""

    def settings(self) -> dict[str, Any]:
        """What the answers file records about this method (its inputs, fitted parameters, device)."""
        return {}

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def portable(self) -> tuple[Callable[..., Method], tuple[Any, ...]]:
        """How another process (a Ray actor) gets this method: ``build(*args)``, both picklable. Default:
        the method itself, pickled; a method over large files overrides it to reopen them there instead."""
        return _same, (self,)


def _same(method: Method) -> Method:
    return method
