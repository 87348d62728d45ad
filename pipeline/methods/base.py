"""What an answering method is: anything that turns a batch of soft queries into a utility for every entity.

SRC over an export with a calibration (:mod:`pipeline.methods.src`) is one; a query-embedding baseline is
another. ``pipeline answer``, ``pipeline evaluate``, ``pipeline reproduce`` and the results tables only see
this interface, so a new method is one new module registered in :data:`pipeline.methods.METHODS`.

How a method is built for the answering stage (:func:`pipeline.stages.answer.answer_queries`) is declared here
too: :class:`MethodOptions` (what the person chose), :class:`BuildInputs` (what the stage hands over: the
valid/train query sets and the selection score calibration needs) and :class:`Capabilities` (which options
a method accepts), so the stage checks every method's options the same way and never imports a method.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pipeline.methods.options import MethodOptions

if TYPE_CHECKING:
    import torch

    from pipeline.formats.queryset import QuerySet
    from pipeline.softquery.model import Query

__all__ = ["BuildInputs", "Capabilities", "Method", "MethodOptions"]


@dataclass(frozen=True)
class Capabilities:
    """What a method accepts, declared on its class (the answering stage and the CLI read it).

    source: the :class:`MethodOptions` field it is built from ("adjacency" or "model") and source_what
    what that option names (e.g. "DIR"); calibration: it takes none|D|L|D+L;
    explain: it writes witnesses (``--explain K``); union: its disjunctions can be answered another way
    (``--union``); any_shape: it answers queries of any shape (the typed queries of ``--from-store``), not
    only the registered query types."""

    source: str
    source_what: str
    calibration: bool = False
    explain: bool = False
    union: bool = False
    any_shape: bool = False

    @property
    def source_flag(self) -> str:
        """The command line's option naming the source, e.g. ``--adjacency DIR``."""
        return f"--{self.source.replace('_', '-')} {self.source_what}"


@dataclass(frozen=True, kw_only=True)
class BuildInputs:
    """What the answering stage hands a method to build it. dataset: the query set's; valid/train: the
    checked query sets of those roles; score: the selection score of a built method on ``valid`` (None
    without valid queries; calibration chooses with it); load=False: the batches run on remote actors that
    each load the method themselves, so the driver may leave large files unloaded."""

    dataset: str
    valid: QuerySet | None = None
    train: QuerySet | None = None
    score: Callable[[Method], float] | None = None  # pipeline.stages.selection.ValidScorer: also .many(methods)
    progress: bool = True
    load: bool = True


class Method(ABC):
    """A built method, ready to answer queries of one data set.

    Class attributes: ``name`` (the registry key, ``pipeline answer --method NAME``), ``description`` and
    ``capabilities`` (which options it accepts).
    Instance attributes: ``dataset``, ``n_entities`` and ``label``, the method's row name in the results
    tables (e.g. ``ukge_logi SRC(D+L)``; unique per configuration that should get its own row)."""

    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    dataset: str
    n_entities: int
    label: str

    @classmethod
    @abstractmethod
    def from_options(cls, options: MethodOptions, inputs: BuildInputs) -> Method:
        """The method built from ``options`` (already checked against :attr:`capabilities`)."""

    @abstractmethod
    def utilities(self, queries: Sequence[Query]) -> torch.Tensor:
        """(len(queries), n_entities) float predicted utilities, -inf where a query fails for an entity.
        Queries of one batch share one shape (one query type)."""

    def utilities_of(self, variants: Sequence[Method], queries: Sequence[Query]) -> list[torch.Tensor]:
        """The utilities of the same queries under several variants of this method (calibration's valid
        selection scores every delta of D, every epoch of L): one call each here; a method that answers its
        variants together overrides it (SRC: one engine pass for every delta)."""
        return [v.utilities(queries) for v in variants]

    def settings(self) -> dict[str, Any]:
        """What the answers file records about this method (its inputs, fitted parameters, device)."""
        return {}

    @property
    def device(self) -> torch.device:
        import torch

        return torch.device("cpu")

    def made_from(self) -> tuple[str, str | None] | None:
        """(what, the content key of the data set version it was made from) for the version check of the
        answering stage (:mod:`pipeline.core.versions`); None: made from query sets only (checked there)."""
        return None

    def relation_sizes(self) -> list[int] | None:
        """The facts per relation this method streams (for balancing the parts of a query type cut
        across workers: :mod:`pipeline.stages.answer_plan`; never for results), or None (parts by counts)."""
        return None

    def portable(self) -> tuple[Callable[..., Method], tuple[Any, ...]]:
        """How another process (a Ray actor) gets this method: ``build(*args)``, both picklable. Default:
        the method itself, pickled; a method over large files overrides it to reopen them there instead."""
        return _same, (self,)


def _same(method: Method) -> Method:
    return method
