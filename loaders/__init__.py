"""Data set loaders: one module per data set, and the registry that names them.

>>> from loaders import load
>>> kg = load("ppi5k")            # PIPELINE_DATA/ppi5k if set (refused there when missing), else downloaded
>>> kg.graph("valid")             # h, r, t, conf merged by mean over train ∪ val
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loaders import cn15k, onet20k, ppi5k, user
from loaders.base import GRAPHS, SPLITS, DatasetSpec, KGData, merge_mean
from loaders.parsed import load_dataset
from pipeline.core.errors import PipelineError, unknown_name
from pipeline.core.registry import Registry


def _row(s: DatasetSpec) -> dict:
    return {
        "name": s.name,
        "domain": s.domain,
        "entities": s.n_entities,
        "relations": s.n_relations,
        "train": s.facts.get("train"),
        "val": s.facts.get("val"),
        "test": s.facts.get("test"),
        "source": s.source_url,
        "kind": getattr(s, "kind", "benchmark"),
        "checksum": getattr(s, "checksum", "")[:16] or "md5 per file",
    }


class DatasetRegistry(Registry[DatasetSpec]):
    """The benchmarks registered in code plus the user data sets recorded under PIPELINE_HOME/datasets
    (:mod:`loaders.user`), read at each lookup so a data set ingested by another process is seen at
    once. Benchmarks win every lookup; ingest refuses a user name that would shadow one."""

    def __init__(self, benchmarks: Registry[DatasetSpec]) -> None:
        super().__init__(benchmarks.kind, benchmarks.values(), row=_row)

    def _users(self) -> dict[str, DatasetSpec]:
        return {s.name: s for s in user.user_specs()}

    def canonical(self, name: str) -> str:
        if name in self._items or str(name).lower() in self._aliases:
            return super().canonical(name)
        # a user data set's name is lowercase (loaders.user.NAME_RE): MY_KG is my_kg, as PPI5K is ppi5k
        if user.user_spec(str(name).lower()) is not None:
            return str(name).lower()
        raise unknown_name(self.kind, str(name), [*self._items, *self._users()])

    def get(self, name: str, default: Any = None) -> DatasetSpec:  # type: ignore[override]
        try:
            canon = self.canonical(name)
        except PipelineError:
            if default is not None:
                return default
            raise
        spec = self._items.get(canon) or user.user_spec(canon)
        assert spec is not None
        return spec

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (isinstance(name, str) and user.user_spec(name) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def names(self) -> list[str]:
        return [*self._items, *self._users()]

    def rows(self) -> list[dict[str, Any]]:
        damaged = [
            {"name": name, "domain": "user", "kind": "user (damaged record)", "source": why}
            for name, why in user.damaged_records()
        ]
        return [*super().rows(), *(_row(s) for s in self._users().values()), *damaged]


# the benchmarks alone (what a user data set may not shadow) and every data set
BENCHMARKS: Registry[DatasetSpec] = Registry("data set", (cn15k.SPEC, ppi5k.SPEC, onet20k.SPEC), row=_row)
REGISTRY: DatasetRegistry = DatasetRegistry(BENCHMARKS)


def get_spec(name: str) -> DatasetSpec:
    """The spec of a benchmark or recorded user data set; an unknown name raises UnknownNameError listing
    the known ones."""
    return REGISTRY.get(name)


def dataset_name(name: str) -> str:
    """The registered spelling of a data set name given in any case (PPI5K is ppi5k), so every file, config
    and store key made from it has one spelling; a name that is not registered comes back as given (the
    step that needs the data set says it is unknown, with the close names)."""
    try:
        return REGISTRY.canonical(name)
    except PipelineError:
        return name


def load(name: str, source: str | Path | None = None, verify: bool = True) -> KGData:
    """Load a data set into validated tables (see :class:`loaders.base.KGData`). A user data set is read
    from its record (``source`` is ignored for it: the record is its only source)."""
    spec = get_spec(name)
    if isinstance(spec, user.UserDatasetSpec):
        return load_dataset(spec, source=spec.folder, verify=True)
    return load_dataset(spec, source=source, verify=verify)


__all__ = ["BENCHMARKS", "GRAPHS", "REGISTRY", "SPLITS", "DatasetSpec", "KGData", "dataset_name", "get_spec", "load",
           "merge_mean"]


def stage_user_files(name: str, path: str | Path, **options: Any) -> user.Staged:
    """Validate and stage a user data set from files (:func:`loaders.user.stage_from_path`); a benchmark
    name is refused."""
    return user.stage_from_path(name, path, BENCHMARKS, **options)


def stage_user_rows(name: str, rows: Any, source: str, **options: Any) -> user.Staged:
    """Validate and stage a user data set from named rows pulled from a store."""
    return user.stage_from_rows(name, rows, source, BENCHMARKS, **options)


def stage_user_frame(name: str, frame: Any, **options: Any) -> user.Staged:
    """Validate and stage a user data set from a pandas DataFrame of named facts (:func:`loaders.user.stage_from_frame`)."""
    return user.stage_from_frame(name, frame, BENCHMARKS, **options)
