"""One registry class behind every named component (data sets, models, query types, metrics, calibrations,
alpha/beta modes, answering methods), as PyKEEN's class resolver is behind its registries.

A :class:`Registry` maps a canonical name to an item and behaves like a read-only mapping. Every registry
looks names up the same way: exact name first, then case-insensitively, then through the item's
``synonyms``; an unknown name raises :class:`~pipeline.core.errors.UnknownNameError` with the closest names
("did you mean"). The rows of ``pipeline ls KIND`` and the CLI's choice lists come from the same object,
so the docs, the help text and the lookup cannot drift apart.

>>> from pipeline.core.metrics import METRICS
>>> METRICS.get("NDCG") is METRICS.get("normalized_dcg")
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from pipeline.core.errors import PipelineError, unknown_name

T = TypeVar("T")


def _default_row(item: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"name": getattr(item, "name", str(item))}
    desc = getattr(item, "description", None)
    if desc:
        row["description"] = desc
    return row


class Registry(Mapping[str, T], Generic[T]):
    """Named items of one kind (``kind`` names them in messages, e.g. "query type").

    Items carry ``name`` (the canonical key) and optionally ``synonyms`` (other accepted names) and
    ``description``; ``row`` turns an item into its ``pipeline ls`` row (default: name and description).
    Iteration order is registration order (the order tables and choices show)."""

    def __init__(
        self,
        kind: str,
        items: Iterable[T] = (),
        row: Callable[[T], dict[str, Any]] | None = None,
    ) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._row = row or _default_row
        for item in items:
            self.register(item)

    # ------------------------------------------------------------------------------------------ building
    def register(self, item: T) -> T:
        """Add an item (usable as a class decorator); a name or synonym already taken is an error."""
        name = str(getattr(item, "name", ""))
        if not name:
            raise PipelineError(f"a {self.kind} needs a non-empty name: {item!r}")
        for alias in (name, *getattr(item, "synonyms", ())):
            key = str(alias).lower()
            if key in self._aliases and self._aliases[key] != name:
                raise PipelineError(f"{self.kind} name '{alias}' is taken by '{self._aliases[key]}'")
            self._aliases[key] = name
        self._items[name] = item
        return item

    # ------------------------------------------------------------------------------------------ lookup
    def canonical(self, name: str) -> str:
        """The registered name of ``name`` (exact, case-insensitive or a synonym)."""
        if name in self._items:
            return name
        try:
            return self._aliases[str(name).lower()]
        except KeyError:
            raise unknown_name(self.kind, str(name), list(self._items)) from None

    def get(self, name: str, default: Any = None) -> T:  # type: ignore[override]
        """The item named ``name`` (any accepted spelling). Unlike ``dict.get`` an unknown name raises
        UnknownNameError with close matches unless a default is given."""
        try:
            return self._items[self.canonical(name)]
        except PipelineError:
            if default is not None:
                return default
            raise

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._items or name.lower() in self._aliases)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def names(self) -> list[str]:
        """Canonical names in registration order (the CLI's choices)."""
        return list(self._items)

    def rows(self) -> list[dict[str, Any]]:
        """The rows ``pipeline ls`` prints for this kind."""
        return [self._row(item) for item in self._items.values()]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


# ``pipeline ls KIND`` -> (module, registry attribute): every registry of the project, each imported on demand
# (by name, so this foundation module imports no stage and ``pipeline ls`` starts without torch)
REGISTRIES: dict[str, tuple[str, str]] = {
    "datasets": ("loaders", "REGISTRY"),
    "models": ("pipeline.models.registry", "BACKBONES"),
    "methods": ("pipeline.methods.registry", "METHODS"),
    "baselines": ("pipeline.baselines", "QE_MODELS"),
    "calibrations": ("pipeline.methods.src.calibrations", "CALIBRATIONS"),
    "query-types": ("pipeline.softquery.types", "QUERY_TYPES"),
    "metrics": ("pipeline.core.metrics", "METRICS"),
    "alpha-modes": ("pipeline.sampling.requirements", "ALPHA_MODES"),
    "beta-modes": ("pipeline.sampling.requirements", "BETA_MODES"),
    "executors": ("pipeline.executors", "EXECUTORS"),
    "stores": ("pipeline.store.backends", "STORES"),
}


def registry(kind: str) -> Registry[Any]:
    """The registry behind ``pipeline ls KIND`` (a key of :data:`REGISTRIES`)."""
    from importlib import import_module

    if kind not in REGISTRIES:
        raise PipelineError(f"nothing to list for {kind}; expected one of {', '.join(REGISTRIES)}")
    module, attr = REGISTRIES[kind]
    return getattr(import_module(module), attr)


def registry_rows(kind: str) -> list[dict[str, Any]]:
    """The rows ``pipeline ls KIND`` prints, straight from the registry."""
    return registry(kind).rows()
