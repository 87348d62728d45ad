"""The Python API's handles on a data set and an export (:mod:`pipeline.api`): small frozen values whose
heavy reads (a data set's tables, an export's facts) happen on first access and are kept. The other values
the API returns are the stages' own (:mod:`pipeline.api` lists them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Dataset:
    """A data set the project knows (a benchmark, or your own KG recorded by :func:`pipeline.ingest`).

    ``entities`` (eid, name), ``relations`` (rid, name) and ``facts`` (head, relation, tail, confidence,
    split: every published row, by name) are read from the data set's files on first use;
    :meth:`stats` reads the graph store, like ``pipeline stats``.

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Dataset)]
    ['name', 'store']
    """

    name: str
    store: str | None = None  # the store URI given to ingest (None: PIPELINE_STORE, else the embedded one)

    @cached_property
    def _kg(self) -> Any:
        from loaders import load

        return load(self.name)

    @property
    def entities(self) -> pd.DataFrame:
        """(eid, name), one row per entity, eid == row position."""
        return self._kg.entities[["eid", "name"]].copy()

    @property
    def relations(self) -> pd.DataFrame:
        """(rid, name), one row per relation, rid == row position."""
        return self._kg.relations[["rid", "name"]].copy()

    @property
    def facts(self) -> pd.DataFrame:
        """Every published row: head, relation, tail (names), confidence in [0, 1], split (train|val|test)."""
        rows = self._kg.rows
        ent, rel = self._kg.entities["name"].to_numpy(), self._kg.relations["name"].to_numpy()
        return pd.DataFrame({
            "head": ent[rows["h"].to_numpy()],
            "relation": rel[rows["r"].to_numpy()],
            "tail": ent[rows["t"].to_numpy()],
            "confidence": rows["conf"].to_numpy(),
            "split": rows["split"].to_numpy(),
        })

    def stats(self) -> pd.DataFrame:
        """``pipeline stats``'s table, read from the store: one row per relation (index rid) with its
        distinct facts per nested graph (train, valid, test) and alpha levels p25, p50, p75."""
        from dataclasses import asdict

        from pipeline.store import open_store
        from pipeline.store.stats import dataset_stats

        with open_store(self.store) as store:
            st = dataset_stats(store, self.name)
        frame = pd.DataFrame([asdict(r) for r in st.per_relation],
                             columns=["rid", "name", "train", "valid", "test", "p25", "p50", "p75"])
        return frame.rename(columns={"name": "relation"}).set_index("rid")


@dataclass(frozen=True)
class Export:
    """A neural adjacency export: ``path``, its ``manifest`` and, read on first use, ``facts`` (head,
    relation, tail, confidence by name: every predicted fact at or above the threshold).

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Export)]
    ['path', 'manifest']
    """

    path: Path
    manifest: dict[str, Any] = field(repr=False)

    @property
    def n_facts(self) -> int:
        return int(self.manifest["nnz"])

    @cached_property
    def facts(self) -> pd.DataFrame:
        from loaders import load
        from pipeline.formats.adjacency import load_adjacency

        kg = load(str(self.manifest["dataset"]))
        g, _ = load_adjacency(self.path, kg.name, "cpu", kg.n_entities, kg.n_relations)
        ent, rel = kg.entities["name"].to_numpy(), kg.relations["name"].to_numpy()
        return pd.DataFrame({
            "head": ent[g.head.numpy()],
            "relation": rel[g.rel.numpy()],
            "tail": ent[g.tail.numpy()],
            "confidence": g.conf.numpy(),
        })
