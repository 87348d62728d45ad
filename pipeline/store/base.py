"""The graph-store interface (design section 4): one small API with two implementations, FalkorDB's
native client (the embedded default and CI) and the official neo4j driver over Bolt (Neo4j 5).

Graph model, shared by both backends and every .cypher file:

- ``(:Entity {dataset, eid, name})``: one node per entity of a data set;
- one relationship per distinct (h, r, t), typed by the relation's *type* (see :func:`relation_type`),
  with properties ``dataset, rid, conf_train, conf_valid, conf_test`` (absent = null where the fact is
  not in that nested graph; design section 1);
- ``(:Relation {dataset, rid, name, type})``: the validated relation vocabulary of a data set;
- ``(:Dataset {name, key, complete, entities, relations, facts})``: the load marker; ``complete = true``
  and the counts are written last, and a copy is trusted only when the stored counts match them
  (:mod:`pipeline.store.status`);
- ``(:Lock {name, owner, host, pid, purpose, since, expires})``: the store's own locks
  (:mod:`pipeline.store.lock`); a node without owner is a free lock.

Durability: the embedded server keeps an append-only file, so every write it acknowledged survives a
kill -9 of the server (:mod:`pipeline.store.embedded`). A query that may write still marks the Store dirty
and :meth:`Store.checkpoint` runs when the store is closed, when a lock scope ends, or at interpreter exit:
a hook for a server that persists nothing by itself (``FalkorDBStore.snapshot_on_checkpoint``); a no-op on
the embedded server and on Neo4j, which commit durably.
"""

from __future__ import annotations

import atexit
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.core.errors import PipelineError
from pipeline.store.cypher import cypher_text, fill
from pipeline.store.lock import StoreLock, new_owner

# the Cypher placeholder for a relationship type; formatted in only by :func:`with_rel_type`
REL_PLACEHOLDER = "REL"

# FalkorDB accepts no backtick inside a quoted identifier and its bulk loader splits type names on ':'
# (and reads NUL-terminated strings), so these characters (and '%', to stay injective) are
# percent-encoded; every other relation name is its own type, verbatim.
_TYPE_ESCAPE = re.compile(r"[%`:\\\x00-\x1f]")


class CypherError(PipelineError):
    """The store rejected a query (syntax, constraint, server-side failure); names the query."""


def relation_type(name: str) -> str:
    """The relationship type of a relation name: the name itself, with '%', '`', ':', '\\' and control
    characters percent-encoded (an injective map, the identity on ordinary names). Raises PipelineError on
    an empty name."""
    if not isinstance(name, str) or not name:
        raise PipelineError(f"relation name {name!r} cannot be a relationship type (empty)")
    return _TYPE_ESCAPE.sub(lambda m: f"%{ord(m.group()):02X}", name)


def relation_types(names: Sequence[str]) -> list[str]:
    """Types of a whole relation vocabulary (rid order); raises PipelineError on an empty or repeated
    name (the encoding is injective, so distinct names give distinct types)."""
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise PipelineError(f"relation name {n!r} appears twice in the vocabulary")
        seen.add(n)
    return [relation_type(n) for n in names]


def quote_rel_type(rel_type: str) -> str:
    """A relationship type as query text, backtick-quoted; only types made by :func:`relation_type` are
    accepted, so no text from the data reaches a query unescaped. The one place that formats a type into
    Cypher (``with_rel_type`` and the sampling walks' ``{Rk}`` placeholders both use it)."""
    if not isinstance(rel_type, str) or not rel_type or "`" in rel_type:
        raise PipelineError(f"{rel_type!r} is not a validated relationship type")
    if rel_type != relation_type(_decode(rel_type)):
        raise PipelineError(f"{rel_type!r} is not a validated relationship type")
    return f"`{rel_type}`"


def with_rel_type(cypher: str, rel_type: str) -> str:
    """Format a relationship type into a query at its ``{REL}`` placeholder (see :func:`quote_rel_type`)."""
    return fill(cypher, {REL_PLACEHOLDER: quote_rel_type(rel_type)})


def _decode(rel_type: str) -> str:
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), rel_type)


def plain(value: Any) -> Any:
    """A result value as plain Python: numpy scalars to Python, NaN to None, lists recursively."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


# what a statement changed, as the servers count it (FalkorDB's statistics, Neo4j's summary counters)
COUNTER_NAMES = (
    "nodes created", "nodes deleted", "relationships created", "relationships deleted", "properties set",
    "properties removed", "labels added", "labels removed", "indexes created", "indexes deleted",
)  # fmt: skip


def read_counters(source: Any, names: dict[str, str]) -> dict[str, int]:
    """The nonzero write counters a client reports as attributes of ``source`` (the neo4j driver's summary
    counters, a FalkorDB result), by the project's names: ``names`` maps the client's attribute to one of
    :data:`COUNTER_NAMES`."""
    out: dict[str, int] = {}
    for attr, label in names.items():
        n = getattr(source, attr, 0) or 0
        if n:
            out[label] = int(n)
    return out


@dataclass(frozen=True)
class Outcome:
    """A statement's rows and what it changed: ``counters`` by :data:`COUNTER_NAMES` (only those the server
    reported, zeros left out)."""

    rows: list[dict[str, Any]]
    counters: dict[str, int]


@dataclass(frozen=True)
class RelationFacts:
    """The facts of one relation of a data set, as create_facts receives them (see there)."""

    dataset: str
    rel_type: str
    rid: int
    heads: np.ndarray
    tails: np.ndarray
    confs: dict[str, np.ndarray]
    entity_dataset: str  # the `dataset` its endpoint entities carry (a staging name while a load is staged)


class Store(ABC):
    """A connection to one graph: ``run`` a query, ``run_batches`` of UNWIND rows, plus the
    backend-specific index creation and bulk load. Use as a context manager or call :meth:`close`."""

    # What differs between backends, declared by each Store class and read by the rest of the project
    # (which never asks which backend it talks to); `pipeline ls stores` prints them.
    backend: str = ""  # the implementation's name (ingest reports "<backend>-bulk" / "<backend>-cypher")
    write_batch: int = 1000  # rows per UNWIND batch of a write-back (answers, query nodes)
    witness_batch: int = 100  # witness rows per batch (each row holds its atoms: a few hundred bytes)
    index_listing: str = ""  # the cypher/ file that lists the existing indexes (label, property)
    bulk_load: bool = False  # a native bulk path besides the portable UNWIND batches (``bulk`` switches it)
    # what callers must not ask of it ("drop graph", "bulk load", "snapshot", "rollback"; the contract suite
    # checks each claim)
    cannot: tuple[str, ...] = ()
    uri: str = ""
    graph: str = ""

    # set when a query that may write has run and the store was not saved since (see checkpoint)
    dirty: bool = False

    # The longest the server lets one of the project's statements run before it stops it (FalkorDB rolls
    # a stopped write back, Neo4j does not commit its transaction: nothing of it is written). A statement a
    # person types (`pipeline cypher`) gets USER_TIMEOUT_S instead (pipeline.store.statement).
    statement_timeout_s: float = 600.0

    # ------------------------------------------------------------------------------------------ queries
    def run(
        self, cypher: str, params: dict[str, Any] | None = None, timeout_s: float | None = None
    ) -> list[dict[str, Any]]:
        """Run one query; rows keyed by the RETURN aliases. Nodes and relationships come back as their
        property maps. ``timeout_s``: the server stops it after that long (default
        :attr:`statement_timeout_s`). Raises CypherError (bad query, stopped at its time or memory limit)
        or StoreUnavailable (connection lost). A query that may write marks the store dirty: it is saved
        when the store is closed, when a lock scope ends, or at the latest when the process exits."""
        return self.execute(cypher, params, timeout_s).rows

    def execute(
        self, cypher: str, params: dict[str, Any] | None = None, timeout_s: float | None = None
    ) -> Outcome:
        """:meth:`run` with what the statement changed (:class:`Outcome`: rows and write counters)."""
        if is_write(cypher):
            self._mark_dirty()
        return self._execute(cypher, params, self._timeout(timeout_s))

    def _run_untracked(self, cypher: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        # the lock's own bookkeeping: its node is gone again when the lock is released, nothing to save
        return self._execute(cypher, params, self.statement_timeout_s).rows

    def _timeout(self, timeout_s: float | None) -> float:
        t = self.statement_timeout_s if timeout_s is None else timeout_s
        if not (isinstance(t, (int, float)) and 0 < t <= self.statement_timeout_s):
            raise PipelineError(f"a statement's time limit must be in (0, {self.statement_timeout_s:g}] s, got {t!r}")
        return float(t)

    @abstractmethod
    def _execute(self, cypher: str, params: dict[str, Any] | None, timeout_s: float) -> Outcome:
        """The backend's round trip for :meth:`execute`, stopped by the server after ``timeout_s``."""

    def run_batches(
        self,
        cypher: str,
        rows: Sequence[Any],
        batch_size: int = 10_000,
        params: dict[str, Any] | None = None,
        progress: Any | None = None,
    ) -> int:
        """Run ``cypher`` once per slice of ``rows`` bound to ``$rows`` (use ``UNWIND $rows AS row``),
        with ``params`` besides; advances ``progress`` by the rows sent. Returns the number of rows."""
        if batch_size < 1:
            raise PipelineError(f"batch_size must be >= 1, got {batch_size}")
        extra = dict(params or {})
        for i in range(0, len(rows), batch_size):
            chunk = list(rows[i : i + batch_size])
            self.run(cypher, {**extra, "rows": chunk})
            if progress is not None:
                progress.update(len(chunk))
            self._after_batch()
        return len(rows)

    def _after_batch(self) -> None:
        """A hook after each batch of a long write (the embedded store compacts its log there too, so a
        crash in the middle of a large write-back leaves little to replay)."""
        return None

    # ------------------------------------------------------------------------------------------ schema
    def indexes(self) -> set[tuple[str, str]]:
        """The existing single-property node indexes as (label, property) pairs (from ``index_listing``)."""
        return self._index_pairs(self.run(cypher_text(self.index_listing)))

    @staticmethod
    @abstractmethod
    def _index_pairs(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
        """(label, property) pairs from the rows of ``index_listing``."""

    def drop(self) -> None:
        """Delete this whole graph (tests and benchmarks; ingest deletes one data set instead). Raises
        PipelineError where the backend cannot (``"drop graph"`` in ``cannot``)."""
        raise PipelineError(f"the {self.backend} store {self.uri} cannot drop a graph")

    def ensure_index(self, label: str, prop: str) -> bool:
        """Create ``INDEX FOR (n:label) ON (n.prop)`` unless it exists (the common subset has no
        IF NOT EXISTS). Returns True when it was created."""
        for s in (label, prop):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s):
                raise PipelineError(f"not a plain identifier: {s!r}")
        if (label, prop) in self.indexes():
            return False
        try:
            self.run(fill(cypher_text("create_index"), {"LABEL": label, "PROP": prop}))
        except CypherError:
            if (label, prop) in self.indexes():
                return False  # another client created it between the check and the CREATE
            raise
        return True

    # ------------------------------------------------------------------------------------------ bulk load
    def create_entities(
        self, dataset: str, eids: np.ndarray, names: Sequence[str], batch_size: int = 10_000
    ) -> None:
        """Create one (:Entity {dataset, eid, name}) per entry (the data set must have none yet)."""
        rows = [{"eid": int(e), "name": str(n)} for e, n in zip(eids, names, strict=True)]
        self.run_batches(cypher_text("ingest_entities"), rows, batch_size, {"dataset": dataset})

    def create_facts(
        self,
        dataset: str,
        rel_type: str,
        rid: int,
        heads: np.ndarray,
        tails: np.ndarray,
        confs: dict[str, np.ndarray],
        batch_size: int = 10_000,
        progress: Any | None = None,
        entity_dataset: str | None = None,
    ) -> None:
        """Create one relationship of type ``rel_type`` per (head, tail) between existing entities of
        ``dataset``, with rid and ``conf_train/conf_valid/conf_test`` from ``confs`` (NaN = absent).
        heads, tails: (n,) int eids; confs values: (n,) float64. ``entity_dataset``: the ``dataset`` the
        endpoint entities carry when it is not ``dataset`` (a staged load, :mod:`pipeline.store.ingest`);
        the relationships still carry ``dataset``."""
        facts = RelationFacts(
            dataset, rel_type, int(rid), np.asarray(heads, np.int64), np.asarray(tails, np.int64), confs,
            entity_dataset if entity_dataset is not None else dataset,
        )
        self._write_facts(facts, batch_size, progress)

    def _write_facts(self, facts: RelationFacts, batch_size: int, progress: Any | None) -> None:
        """The portable path: UNWIND batches of cypher/ingest_facts (backends may override)."""
        cols = {k: [None if x != x else float(x) for x in facts.confs[k].tolist()] for k in CONF_COLUMNS}
        rows = [
            {"h": h, "t": t, **{k: cols[k][i] for k in CONF_COLUMNS}}
            for i, (h, t) in enumerate(zip(facts.heads.tolist(), facts.tails.tolist(), strict=True))
        ]
        cypher = with_rel_type(cypher_text("ingest_facts"), facts.rel_type)
        params = {"dataset": facts.dataset, "entity_dataset": facts.entity_dataset, "rid": facts.rid}
        self.run_batches(cypher, rows, batch_size, params, progress)

    # ------------------------------------------------------------------------------------------ locks
    def lock(
        self,
        name: str,
        purpose: str,
        timeout_s: float | None = None,
        lease_s: float | None = None,
        progress: bool | None = None,
    ) -> StoreLock:
        """A lock held by the store itself, for writers that must not interleave (wherever they run):
        ``with store.lock("dataset:ppi5k", purpose="ingest"): ...``. Waits up to ``timeout_s`` (default
        PIPELINE_LOCK_TIMEOUT, else 600 s), then raises StoreLocked naming the holder; re-entering it on
        this Store does not wait. Writes made under it are saved before it is released. See
        :mod:`pipeline.store.lock`."""
        return StoreLock(self, name, purpose, timeout_s, lease_s, progress)

    @property
    def lock_owner(self) -> str:
        """This Store's owner token in lock nodes (one per Store object)."""
        if "_owner" not in self.__dict__:
            self._owner = new_owner()
        return self._owner

    @property
    def _held_locks(self) -> dict[str, StoreLock]:
        return self.__dict__.setdefault("_held", {})

    def _twin(self) -> Store:
        """A connection the lock's renewal thread may use beside this one (this one if it is thread-safe)."""
        return self

    # ------------------------------------------------------------------------------------------ lifecycle
    def recover(self) -> bool:
        """After a StoreUnavailable: start the server again where the project runs it (the embedded one,
        from its append-only file) and point this store at it, so the store can be asked what became of
        the last write (committed or not). True when a server was started; False elsewhere (a server of
        its own is not the project's to start)."""
        return False

    def _mark_dirty(self) -> None:
        self.dirty = True
        _UNSAVED.add(self)

    def checkpoint(self) -> None:
        """Make the writes so far durable where the server does not do it itself (a FalkorDB server with
        ``snapshot_on_checkpoint``). A no-op on the embedded server (append-only file) and on Neo4j. Called for
        you by :meth:`close`, at the end of a lock scope and at exit; call it to save at a point of
        your choosing."""
        self._save()
        self.dirty = False
        _UNSAVED.discard(self)

    def _save(self) -> None:
        return None

    def close(self) -> None:
        """Save unsaved writes (see :meth:`checkpoint`), then release the connection (idempotent).
        Raises StoreUnavailable when the save fails: the writes are then not known to be durable."""
        try:
            if self.dirty and not self.__dict__.get("_closed"):
                self.checkpoint()
        finally:
            self._closed = True
            _UNSAVED.discard(self)
            self._disconnect()

    @abstractmethod
    def _disconnect(self) -> None:
        """Release the backend's connection (idempotent)."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except PipelineError:
            pass  # the error already on its way out says more than a failed save after it

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r}, graph={self.graph!r})"


CONF_COLUMNS = ("conf_train", "conf_valid", "conf_test")



# A statement reads only when it starts like a read and holds no write clause and no procedure call that
# may write. Words are matched whole, in the statement's code only (strings and comments left out): matched
# as substrings, ``$dataset RETURN`` held "SET " and every read naming a data set counted as a write, so on
# a full disk ``pipeline stats`` was refused like a write.
_READ_STARTS = ("MATCH", "OPTIONAL", "RETURN", "UNWIND", "WITH", "CALL", "SHOW")
_WRITE_CLAUSE = re.compile(r"\b(CREATE|MERGE|DELETE|SET|REMOVE|DROP|FOREACH|LOAD\s+CSV)\b")
_NAME_AFTER = ("AS", "BY", "DISTINCT", "RETURN", "WITH", "UNWIND")  # a word after these is a name, never a clause
_PROCEDURE = re.compile(r"\bCALL\s+([A-Z_][A-Z0-9_.]*)")
_WRITE_PROCEDURE = ("CREATE", "DROP", "DELETE", "SET", "REMOVE", "MERGE", "ADD", "CONFIG", "ALTER")


def statement_code(cypher: str) -> str:
    """``cypher`` without its comments (``//`` to the line's end, ``/* */``) and with every string literal
    emptied (``'it''s'`` -> ``''``); backtick-quoted names are kept (a write word there counts: the
    conservative side)."""
    out, i, n = [], 0, len(cypher)
    while i < n:
        c = cypher[i]
        if c in "'\"":
            j = i + 1
            while j < n and cypher[j] != c:
                j += 2 if cypher[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        elif c == "`":
            j = cypher.find("`", i + 1)
            j = n if j < 0 else j
            out.append(cypher[i:j + 1])
            i = j + 1
        elif cypher.startswith("//", i):
            j = cypher.find("\n", i)
            i = n if j < 0 else j
        elif cypher.startswith("/*", i):
            j = cypher.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_write(cypher: str) -> bool:
    """Whether a query may write: anything but a query that starts like a read and has no write clause and
    no procedure call that may write (conservative: a false 'write' costs one save and is refused on a full
    disk, a false 'read' would lose durability). Comments and strings never count, nor a write word that
    is a name: a parameter or property (``$set``, ``q.set``), a map key (``{set: 1}``), an item after a
    comma, an alias or a sort key (``ORDER BY dataset, set``, ``AS set``, ``ORDER BY set``).

    >>> is_write("MATCH (q {dataset: $dataset, set: $set}) RETURN q.set AS set ORDER BY q.dataset, set")
    False
    >>> is_write("// a comment before\\nMATCH (n) SET n.x = 1")
    True
    >>> is_write("MATCH (n) WHERE n.name = 'CREATE' RETURN n")
    False
    """
    text = " ".join(statement_code(cypher).upper().split())
    if not text.startswith(_READ_STARTS) or any(_is_clause(text, m) for m in _WRITE_CLAUSE.finditer(text)):
        return True
    return any(not name.startswith("DB.") or any(w in name for w in _WRITE_PROCEDURE)
               for name in _PROCEDURE.findall(text))


def _is_clause(text: str, match: re.Match[str]) -> bool:
    """Whether a write word found in normalised statement code (single spaces) stands as a clause."""
    before = text[:match.start()].rstrip()
    after = text[match.end():].lstrip()
    if before.endswith(("$", ".", ",")) or before.rsplit(" ", 1)[-1] in _NAME_AFTER:
        return False
    return not (after.startswith(":") and before.endswith("{"))


# Stores with writes not saved yet. Strong references on purpose: a store dropped without close() (e.g.
# ``open_store().run("CREATE ...")``) must still be saved when the interpreter exits.
_UNSAVED: set[Store] = set()


@atexit.register
def _save_unsaved_at_exit() -> None:
    for store in list(_UNSAVED):
        try:
            store.checkpoint()
        except PipelineError as exc:
            sys.stderr.write(f"error: unsaved writes to {store.uri} may be lost: {exc}\n")
