"""Is a data set really in the store? Its load marker next to counts of what is stored. Ingest skips a
load only when this says complete with the same content key, and `stats` refuses anything else, so a
doubled graph (two overlapping loads) or a partial one (a killed load) is never reported as complete.

The counts are cheap: entities and vocabulary by index (cypher/stats_dataset.cypher), facts by the
servers' per-type relationship counts (no scan) summed over the data set's relation types. Where a type
is shared (another data set's vocabulary, or an edge type of the store's own) that sum would count
foreign edges, so the facts are then counted by a scan of the data set's edges instead (O(facts))."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.store.base import Store, with_rel_type
from pipeline.store.cypher import cypher_text

COUNTS = ("entities", "relations", "facts")
# relationship types the store itself writes besides facts (cypher/writeback_*, write_queries, witnesses):
# a relation of one of these names shares its type with them
STORE_EDGE_TYPES = frozenset({"ANCHOR", "ANSWER", "EXPLAINED_BY", "FOR", "USES", "HEAD", "TAIL"})


@dataclass(frozen=True)
class DatasetStatus:
    """A data set's marker(s) and stored counts. ``marked``: the marker's (entities, relations, facts),
    None without a single marker; ``stored``: the same, counted in the graph."""

    dataset: str
    markers: int
    key: str | None
    marked_complete: bool
    marked: tuple[int, int, int] | None
    stored: tuple[int, int, int]
    relation_names: tuple[str, ...]

    @property
    def present(self) -> bool:
        """Anything of the data set is in the store (a marker or any entity, relation or fact)."""
        return self.markers > 0 or any(self.stored)

    @property
    def complete(self) -> bool:
        """One marker, saying complete, with exactly the stored counts."""
        return self.markers == 1 and self.marked_complete and self.marked == self.stored

    def problem(self) -> str | None:
        """Why the stored copy cannot be used (None when it is complete)."""
        if self.complete:
            return None
        if not self.present:
            return f"'{self.dataset}' is not in the store"
        if self.markers == 0:
            return f"the store holds parts of '{self.dataset}' but no load marker"
        if self.markers > 1:
            return f"the store holds {self.markers} load markers of '{self.dataset}' (loads overlapped)"
        if not self.marked_complete:
            return f"the load of '{self.dataset}' did not complete"
        stored = ", ".join(f"{n} {what}" for n, what in zip(self.stored, COUNTS, strict=True))
        marked = ", ".join(map(str, self.marked)) if self.marked else "nothing"
        return (
            f"the copy of '{self.dataset}' does not match its load marker ({stored} stored; "
            f"the marker says {marked})"
        )


def dataset_status(store: Store, dataset: str) -> DatasetStatus:
    """Read the marker and count the stored entities, relations and facts of ``dataset``."""
    r = store.run(cypher_text("stats_dataset"), {"dataset": dataset})[0]  # aggregates: one row
    marked = tuple(r[f"marked_{c}"] for c in COUNTS)
    markers = int(r["markers"])
    facts = count_facts(store, dataset, list(r["relation_types"] or ()))
    if markers == 1 and r["marked_facts"] is not None and facts != int(r["marked_facts"]):
        # the per-type counts are the server's statistics, not the edges: before a copy is called
        # damaged, its facts are counted one by one
        facts = scan_facts(store, dataset)
    return DatasetStatus(
        dataset=dataset,
        markers=markers,
        key=r["key"],
        marked_complete=r["marked_complete"] is True,
        marked=tuple(int(x) for x in marked) if markers == 1 and None not in marked else None,
        stored=(int(r["entities"]), int(r["relations"]), facts),
        relation_names=tuple(r["relation_names"] or ()),
    )


def count_facts(store: Store, dataset: str, types: list[str]) -> int:
    """The data set's facts: the per-type counts when its types are its own, else a scan."""
    shared = {row["type"] for row in store.run(cypher_text("dataset_shared_types"), {"dataset": dataset})}
    if not types or shared or STORE_EDGE_TYPES & set(types):
        # (no vocabulary: nothing or a fragment is stored, and the scan is short)
        return scan_facts(store, dataset)
    template = cypher_text("dataset_type_count")
    return sum(int(store.run(with_rel_type(template, t))[0]["n"]) for t in types)


def scan_facts(store: Store, dataset: str) -> int:
    """The data set's facts counted edge by edge through its entities (O(facts))."""
    return int(store.run(cypher_text("dataset_facts"), {"dataset": dataset})[0]["n"])


def dataset_names(store: Store) -> list[str]:
    """The data sets that have a load marker in the store's graph."""
    return [r["name"] for r in store.run(cypher_text("dataset_names")) if r["name"] is not None]


def stale_work(store: Store, dataset: str, version: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The query sets and (set, method) write-backs of ``dataset`` in the store recorded with another
    version than ``version`` (content key): what a replacing ingest made stale. Work recorded without a
    version (written before versions existed) is not listed."""
    params = {"dataset": dataset, "version": version}
    sets = tuple(str(r["set"]) for r in store.run(cypher_text("dataset_stale_sets"), params))
    backs = tuple(
        (str(r["set"]), str(r["method"])) for r in store.run(cypher_text("dataset_stale_writebacks"), params)
    )
    return sets, backs
