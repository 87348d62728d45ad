"""Data set loaders: one module per data set, and the registry that names them.

>>> from loaders import load
>>> kg = load("ppi5k")            # PIPELINE_DATA/ppi5k, else the download cache, else the upstream URL
>>> kg.graph("valid")             # h, r, t, conf merged by mean over train ∪ val
"""

from __future__ import annotations

from pathlib import Path

from loaders import cn15k, onet20k, ppi5k
from loaders.base import GRAPHS, SPLITS, DatasetSpec, KGData, load_dataset, merge_mean
from pipeline.registry import Registry


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
    }


REGISTRY: Registry[DatasetSpec] = Registry("data set", (cn15k.SPEC, ppi5k.SPEC, onet20k.SPEC), row=_row)


def get_spec(name: str) -> DatasetSpec:
    """The registered spec of a data set; an unknown name raises UnknownNameError listing the known ones."""
    return REGISTRY.get(name)


def load(name: str, source: str | Path | None = None, verify: bool = True) -> KGData:
    """Load a registered data set into validated tables (see :class:`loaders.base.KGData`)."""
    return load_dataset(get_spec(name), source=source, verify=verify)


__all__ = ["GRAPHS", "REGISTRY", "SPLITS", "DatasetSpec", "KGData", "get_spec", "load", "merge_mean"]
