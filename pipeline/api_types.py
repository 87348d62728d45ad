"""What the Python API (:mod:`pipeline.api`) returns: small frozen values with pandas frames, so a notebook
reads results as tables and a program never parses the CLI's text. Heavy reads (a data set's tables, an
export's facts) happen on first access and are kept."""

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
class Atom:
    """One atom of an explained answer, with the numbers ``pipeline query --explain`` prints: its
    confidence, where it came from (observed, predicted or missing = c 0), alpha, beta and its value; the
    values of an answer's atoms sum to its utility. negated: a ``!`` atom (then forbids says what).

    >>> import pipeline as pl
    >>> pl.Atom("knows", "ann", "bob", 0.9, "observed", 0.5, 1.0, 0.9).value
    0.9
    """

    relation: str
    head: str
    tail: str
    confidence: float
    source: str
    alpha: float
    beta: float
    value: float | None  # None: the atom fails (-inf)
    negated: bool = False
    forbids: str | None = None


@dataclass(frozen=True)
class Explanation:
    """Why one answer ranks where it does: ``witness`` maps each existential variable to the entity the
    engine chose (name), ``atoms`` the winning conjunction's atoms, ``text`` the lines ``pipeline query
    --explain`` prints.

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Explanation)]
    ['rank', 'eid', 'name', 'utility', 'witness', 'atoms', 'text', 'record']
    """

    rank: int
    eid: int
    name: str
    utility: float
    witness: dict[str, str]
    atoms: list[Atom]
    text: str
    record: dict[str, Any] = field(repr=False)  # the JSON record of `pipeline query --explain --json`


@dataclass(frozen=True)
class Ranking:
    """One query's answers: ``frame`` (rank, eid, name, utility; best first, the rows of ``pipeline query
    --json``), ``explanations`` (one per explained answer, best first), the normalised ``query`` text, the
    ``source`` answered, ``n_answers`` before the top cut, ``approximate`` (a cycle cap made utilities lower
    bounds) and ``empty_reason`` (one line when nothing answers).

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Ranking)][:3]
    ['frame', 'explanations', 'query']
    """

    frame: pd.DataFrame
    explanations: list[Explanation]
    query: str
    source: str
    n_answers: int
    approximate: bool
    empty_reason: str | None = None


@dataclass(frozen=True)
class Run:
    """A trained backbone's run directory: ``path``, ``metrics`` (index split; n, MSE, MAE) and the full
    ``results`` document (``results.json``).

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Run)]
    ['path', 'metrics', 'results']
    """

    path: Path
    metrics: pd.DataFrame
    results: dict[str, Any] = field(repr=False)


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


@dataclass(frozen=True)
class QuerySet:
    """A sampled query set file: ``path``, ``frame`` (one row per query: id, type, text and its ground
    truth), ``meta`` (data set, split, alpha, beta, seed, ...) and ``summary`` (what ``pipeline sample
    --json`` prints).

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.QuerySet)]
    ['path', 'frame', 'meta', 'summary']
    """

    path: Path
    frame: pd.DataFrame = field(repr=False)
    meta: dict[str, Any] = field(repr=False)
    summary: dict[str, Any] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.frame)


@dataclass(frozen=True)
class Answers:
    """An answers file: ``path``, ``label`` (the method's row name in the tables), ``frame`` (the file's
    rows, see :mod:`pipeline.formats.answers`, plus ``name``, each entity's name) and ``report`` (what
    ``pipeline answer --json`` prints); ``name`` is the method's registry name (``src``, ``cone_ne``...).

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Answers)]
    ['path', 'label', 'frame', 'report']
    """

    path: Path
    label: str
    frame: pd.DataFrame = field(repr=False)
    report: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str | None:
        """The method's registry name (``pipeline answer --method NAME``)."""
        name = self.report.get("method_name")
        return None if name is None else str(name)
