"""Is a data set really in the store? Its load marker next to counts of what is stored (one Cypher query,
cypher/stats_dataset.cypher). Ingest skips a load only when this says complete with the same content key,
and `stats` refuses anything else, so a doubled graph (two overlapping loads) or a partial one (a killed
load) is never reported as complete."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.store.base import Store
from pipeline.store.cypher import cypher_text

COUNTS = ("entities", "relations", "facts")


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
    complete: bool

    @property
    def present(self) -> bool:
        """Anything of the data set is in the store (a marker or any entity or relation)."""
        return self.markers > 0 or any(self.stored)

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
        return f"the copy of '{self.dataset}' does not match its load marker ({stored} stored; the marker says {marked})"


def dataset_status(store: Store, dataset: str) -> DatasetStatus:
    """Read the marker and count the stored entities, relations and facts of ``dataset``."""
    rows = store.run(cypher_text("stats_dataset"), {"dataset": dataset})
    r = rows[0]  # aggregates: always one row
    marked = tuple(r[f"marked_{c}"] for c in COUNTS)
    return DatasetStatus(
        dataset=dataset,
        markers=int(r["markers"]),
        key=r["key"],
        marked_complete=r["marked_complete"] is True,
        marked=tuple(int(x) for x in marked) if int(r["markers"]) == 1 and None not in marked else None,
        stored=tuple(int(r[c]) for c in COUNTS),
        relation_names=tuple(r["relation_names"] or ()),
        complete=r["complete"] is True,
    )


def dataset_names(store: Store) -> list[str]:
    """The data sets that have a load marker in the store's graph."""
    return [r["name"] for r in store.run(cypher_text("dataset_names")) if r["name"] is not None]
