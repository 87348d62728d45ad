"""Names <-> ids for the text form of queries: a data set's entity and relation vocabularies.

Resolution is exact; an unknown name fails with the closest names as hints, a name shared by several ids
fails listing the `#id` forms to use instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.core.errors import ResolutionError, close_matches, printable

# A vocabulary this short (a graph's relations, usually) is listed in full when a name is unknown; a longer
# one shows its closest names and a count (a notebook cell should not print 32 or 15,000 names).
LIST_ALL = 10
CLOSEST = 5


def unknown_hint(name: str, known: list[str]) -> str:
    """What follows "unknown entity 'X'": the close names (did you mean), else the whole list of a short
    vocabulary, else the closest few and how many there are."""
    import difflib

    if len(name) > 200:  # nothing is close to a name this long; matching it would take seconds
        return f" ({len(known)} known; no close match)"
    hints = close_matches(name, known)
    if hints:
        return f" (did you mean {', '.join(repr(h) for h in hints)}?)"
    if len(known) <= LIST_ALL:
        return f"; known: {', '.join(sorted(known))}"
    nearest = difflib.get_close_matches(name, known, n=CLOSEST, cutoff=0.0)
    return f"; closest: {', '.join(repr(h) for h in nearest)} (of {len(known)} known)"


@dataclass(frozen=True)
class Vocabulary:
    """Entity names (index = eid) and relation names (index = rid)."""

    entities: tuple[str, ...]
    relations: tuple[str, ...]
    _entity_ids: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)
    _relation_ids: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entities", tuple(str(n) for n in self.entities))
        object.__setattr__(self, "relations", tuple(str(n) for n in self.relations))
        for names, index in ((self.entities, self._entity_ids), (self.relations, self._relation_ids)):
            for i, n in enumerate(names):
                index.setdefault(n, []).append(i)

    @classmethod
    def from_names(cls, entities: Sequence[str], relations: Sequence[str]) -> Vocabulary:
        return cls(tuple(entities), tuple(relations))

    @classmethod
    def from_kg(cls, kg) -> Vocabulary:
        """From a loaded data set (loaders.KGData); one per data set while it stays loaded (its memo)."""
        memo = getattr(kg, "memo", None)
        got = memo.get("vocabulary") if memo is not None else None
        if not isinstance(got, cls):
            got = cls(tuple(kg.entity_names()), tuple(kg.relation_names()))
            if memo is not None:
                memo["vocabulary"] = got
        return got

    def entity_id(self, name: str, column: int | None = None) -> int:
        return self._lookup("entity", name, self._entity_ids, self.entities, column)

    def relation_id(self, name: str, column: int | None = None) -> int:
        return self._lookup("relation", name, self._relation_ids, self.relations, column)

    def entity_unique(self, eid: int) -> bool:
        """True when eid's name names it alone (so printing the name round-trips)."""
        return len(self._entity_ids.get(self.entities[eid], ())) == 1

    def relation_unique(self, rid: int) -> bool:
        return len(self._relation_ids.get(self.relations[rid], ())) == 1

    @staticmethod
    def _lookup(
        kind: str, name: str, index: dict[str, list[int]], names: tuple[str, ...], column: int | None
    ) -> int:
        where = f"column {column}: " if column is not None else ""
        ids = index.get(name)
        if ids is None:
            # a name is shown escaped and cut (a 100k-character name, a terminal escape)
            raise ResolutionError(f"{where}unknown {kind} '{printable(name, 80)}'{unknown_hint(name, list(index))}")
        if len(ids) > 1:
            forms = ", ".join(f"#{i}" for i in ids[:10])
            raise ResolutionError(
                f"{where}ambiguous {kind} '{name}' names {len(ids)} ids; write one of {forms}"
            )
        return ids[0]
