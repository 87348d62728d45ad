"""`pipeline stats`: counts and per-relation alpha levels of a data set, read back FROM THE STORE (so they
show what ingest really wrote).

Two definitions, one per kind of column:
- ``train``/``valid``/``test``: DISTINCT facts of the relation in each nested graph (duplicate rows merged),
  counted from the stored relationships;
- ``p25``/``p50``/``p75``: the ``low/normal/high`` alpha levels of design section 1, i.e. the SQUK
  benchmark's percentiles over ALL published rows of train+val+test (duplicates kept, CN15k's test
  negatives excluded, linear interpolation, 4 decimals). The store keeps merged facts only, so ingest
  computes them (:func:`loaders.levels.alpha_percentiles`) and stores them on the
  ``(:Relation)`` vocabulary nodes, from where they are read here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.core.errors import PipelineError, UnknownNameError, close_matches
from pipeline.store.base import Store
from pipeline.store.cypher import cypher_text
from pipeline.store.status import dataset_names, dataset_status

LEVELS = {"low": "p25", "normal": "p50", "high": "p75"}


@dataclass(frozen=True)
class RelationStats:
    """One relation: distinct facts in each nested graph; alpha levels p25/p50/p75 over all its published
    rows (None if it has none)."""

    rid: int
    name: str
    train: int
    valid: int
    test: int
    p25: float | None
    p50: float | None
    p75: float | None


@dataclass(frozen=True)
class DatasetStats:
    """A data set as stored: entity and relation counts, facts per nested graph, per-relation stats."""

    dataset: str
    entities: int
    relations: int
    facts: dict[str, int]
    per_relation: list[RelationStats] = field(default_factory=list)

    def alpha_levels(self) -> dict[str, list[float]]:
        """``{"low"|"normal"|"high": [alpha of relation rid, ...]}`` (0.0 where a relation has no facts)."""
        return {lvl: [getattr(r, p) or 0.0 for r in self.per_relation] for lvl, p in LEVELS.items()}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def dataset_stats(store: Store, dataset: str) -> DatasetStats:
    """Read the statistics of a completely ingested data set from ``store``. Raises UnknownNameError for
    a name neither in the store nor registered (with close matches of both), PipelineError when a
    registered data set is not ingested, or when its stored copy is partial or doubled (the marker's
    counts are checked against the stored ones)."""
    from loaders import dataset_name

    dataset = dataset_name(dataset)  # PPI5K is ppi5k, the name the store keys it by
    st = dataset_status(store, dataset)
    if not st.present:
        raise absent(store, dataset)
    if not st.complete:
        raise PipelineError(f"{st.problem()} in {store.uri}; run `pipeline ingest {dataset}` again")
    names = list(st.relation_names)
    found = {int(r["rid"]): r for r in store.run(cypher_text("stats_relations"), {"dataset": dataset})}
    levels = {int(r["rid"]): r for r in store.run(cypher_text("stats_levels"), {"dataset": dataset})}
    per = []
    for rid, name in enumerate(names):
        r = found.get(rid, {}) | levels.get(rid, {})
        per.append(
            RelationStats(
                rid,
                name,
                int(r.get("train", 0)),
                int(r.get("valid", 0)),
                int(r.get("test", 0)),
                r.get("p25"),
                r.get("p50"),
                r.get("p75"),
            )
        )
    facts = {g: sum(getattr(r, g) for r in per) for g in ("train", "valid", "test")}
    return DatasetStats(dataset, st.stored[0], len(names), facts, per)


def absent(store: Store, dataset: str) -> PipelineError:
    """The error for a data set the store does not hold: a registered one is to be ingested; any other
    name is unknown, with close matches among the data sets in the store and the registered ones."""
    registered = registered_datasets()
    if dataset.lower() in registered:
        return PipelineError(
            f"data set '{dataset}' is not in the store {store.uri}; run `pipeline ingest {dataset.lower()}`"
        )
    present = dataset_names(store)
    msg = f"unknown data set '{dataset}'"
    hint = close_matches(dataset, present + [n for n in registered if n not in present])
    if hint:
        msg += f" (did you mean {', '.join(hint)}?)"
    msg += f"; in the store {store.uri}: {', '.join(present) or 'none'}; registered: {', '.join(registered)}"
    return UnknownNameError(msg)


def registered_datasets() -> list[str]:
    """The names the loaders' registry knows (what `pipeline ingest NAME` accepts)."""
    from loaders import REGISTRY

    return sorted(REGISTRY)
