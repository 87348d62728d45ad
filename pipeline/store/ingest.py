"""`pipeline ingest`: the observed KG of one data set into the store (design sections 1 and 4).

All or nothing as readers see it, first load or replacement alike. Readers find a data set's entities and
relation vocabulary by their ``dataset`` property and its facts only through those entities, so a load
goes in under a staging name (``<name>\\x1fnext``) that no reader asks for, and ONE statement commits it
(cypher/dataset_commit): the nodes readers saw are renamed ``<name>\\x1fold``, the staged ones become
``<name>``, and the ``(:Dataset {name, key, complete, entities, relations, facts})`` load marker is
written complete with the content key, but only when the staged copy is what was loaded (its counts and
a checksum of its (head, tail, relation) triples, checked by the same statement wherever it runs, a
restart's replay included). The old version is deleted after the commit. Killed (the server by
``kill -9`` or ``pipeline store stop``, or this process) at any moment, the store shows the previous
complete version or the new one; the leftovers under the two reserved names are ignored by readers and
deleted by the next ingest, so a killed-then-rerun load ends in the same state as one clean run.

A run that finds the marker complete with the same content key AND the stored counts equal to the
marker's changes nothing; anything else (other content, a killed load of an older version of this code, a
doubled copy) is replaced. Every check on the input runs before the first write: bad input leaves the
store untouched. A replacement reports the data set's query sets and write-backs in the store that were
made from another version (:func:`pipeline.store.status.stale_work`): they are refused from then on.

Concurrent ingests serialise on the store lock ``dataset:<name>`` (see :mod:`pipeline.store.lock`): the
second waits, then finds the first one's load complete. The writes are saved when the lock is released.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from loaders.levels import alpha_levels
from pipeline.core.errors import DataFormatError, PipelineError, StoreUnavailable
from pipeline.core.progress import output
from pipeline.store.base import CONF_COLUMNS, Store, relation_types
from pipeline.store.cypher import cypher_statements, cypher_text
from pipeline.store.lock import dataset_lock
from pipeline.store.status import dataset_status, stale_work

# bump when the graph model changes, so stores loaded by an older version are reloaded
# (2: the relation vocabulary carries the alpha levels p25/p50/p75)
FORMAT_VERSION = 2
DELETE_BATCH = 2_000  # entities per DETACH DELETE round trip (each takes its relationships along)
# a data set name never holds this control character (ASCII unit separator), so ``<name>\x1fnext`` and
# ``<name>\x1fold`` are no data set's name
RESERVED = "\x1f"


def staging_name(dataset: str) -> str:
    """The ``dataset`` of a load before its commit (no reader asks for it)."""
    return f"{dataset}{RESERVED}next"


def replaced_name(dataset: str) -> str:
    """The ``dataset`` of the version a commit replaced, until it is deleted (no reader asks for it)."""
    return f"{dataset}{RESERVED}old"


@dataclass(frozen=True)
class IngestReport:
    """What one ingest did: counts written (or found), whether it was skipped, time and path used."""

    dataset: str
    entities: int
    relations: int
    facts: int
    skipped: bool
    replaced: bool
    seconds: float
    method: str
    # the data set's query sets and (set, method) write-backs in the store made from another version: a
    # replacing load made them stale (empty when nothing was replaced)
    stale_sets: tuple[str, ...] = ()
    stale_writebacks: tuple[tuple[str, str], ...] = ()

    @property
    def facts_per_s(self) -> float:
        return self.facts / self.seconds if self.seconds > 0 and not self.skipped else float("nan")


def content_key(kg) -> str:
    """A hash of exactly what ingest stores (format version, names, facts with their nested-graph
    confidences): equal keys mean an identical graph, whatever files it came from. Computed once per
    version of the data set's files and kept with its parsed tables (:meth:`loaders.KGData.derived`)."""
    derived = getattr(kg, "derived", None)
    if derived is None:
        return _content_key(kg)
    return str(derived(f"content_key/v{FORMAT_VERSION}", lambda: _content_key(kg)))


def _content_key(kg) -> str:
    h = hashlib.sha256(f"v{FORMAT_VERSION}\0{kg.name}\0".encode())
    for frame in (kg.entities[["eid", "name"]], kg.relations[["rid", "name"]], kg.facts_with_splits()):
        h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
        h.update("\0".join(map(str, frame.columns)).encode())
    # the alpha levels count duplicate rows, which the merged facts above do not show
    h.update(repr(sorted(alpha_levels(kg).items())).encode())
    return h.hexdigest()[:32]


CHECKSUM_P = 2147483647  # 2^31 - 1


def fact_keys(h: np.ndarray, t: np.ndarray, r: np.ndarray) -> np.ndarray:
    """One number per fact, ``((((h*1000003 + t) % P) * (h + 2t + 7919)) % P * 131 + r) % P``: products
    of head and tail, so swapping two entities changes the sum (a linear key would keep it whenever their
    degrees match). int64 without overflow for ids below 10^9."""
    a = (h * 1000003 + t) % CHECKSUM_P
    return ((a * (h + 2 * t + 7919)) % CHECKSUM_P * 131 + r) % CHECKSUM_P


def facts_checksum(facts: pd.DataFrame) -> int:
    """The sum of :func:`fact_keys` over the facts: cypher/dataset_commit computes the same over the staged
    copy and commits only when they agree, so facts wired to other nodes are never committed."""
    h, t, r = (facts[c].to_numpy(np.int64) for c in ("h", "t", "r"))
    return int(fact_keys(h, t, r).sum())


def validate(kg) -> pd.DataFrame:
    """Check everything ingest relies on and return the facts table (h, r, t, conf_train, conf_valid,
    conf_test); raises DataFormatError naming the field before anything is written."""
    where = f"data set {kg.name!r}"
    if not isinstance(kg.name, str) or not kg.name or "\0" in kg.name or RESERVED in kg.name:
        raise DataFormatError(where, None, "name", f"a data set needs a non-empty name without NUL or {RESERVED!r}")
    ne, nr = kg.n_entities, kg.n_relations
    for frame, key, n, fld in ((kg.entities, "eid", ne, "entities"), (kg.relations, "rid", nr, "relations")):
        if not np.array_equal(frame[key].to_numpy(np.int64), np.arange(n)):
            raise DataFormatError(where, None, f"{fld}.{key}", f"ids must be exactly 0..{n - 1} in order")
        bad = [i for i, v in enumerate(frame["name"]) if not isinstance(v, str)]
        if bad:
            raise DataFormatError(
                where, None, f"{fld}.name", f"row {bad[0]}: name {frame['name'].iloc[bad[0]]!r} is not text"
            )
    try:
        relation_types(kg.relation_names())
    except PipelineError as exc:
        raise DataFormatError(where, None, "relations.name", str(exc)) from None
    facts = kg.facts_with_splits()
    for col, n in (("h", ne), ("r", nr), ("t", ne)):
        v = facts[col].to_numpy(np.int64)
        out = (v < 0) | (v >= n)
        if out.any():
            raise DataFormatError(where, None, col, f"id {int(v[out][0])} out of range 0..{n - 1}")
    conf = facts[list(CONF_COLUMNS)].to_numpy(np.float64)
    finite = conf[~np.isnan(conf)]
    if ((finite < 0) | (finite > 1)).any():
        raise DataFormatError(where, None, "conf", "a confidence is outside [0, 1]")
    if np.isnan(facts["conf_test"].to_numpy()).any():
        raise DataFormatError(where, None, "conf_test", "every fact must be in the test graph")
    return facts


def delete_dataset(store: Store, dataset: str) -> int:
    """Remove a data set's entities, relationships, vocabulary and marker; returns entities deleted."""
    total = 0
    while True:
        rows = store.run(cypher_text("dataset_delete_entities"), {"dataset": dataset, "limit": DELETE_BATCH})
        n = int(rows[0]["deleted"]) if rows else 0
        total += n
        if n == 0:
            break
    store.run(cypher_text("dataset_delete_rest"), {"dataset": dataset})
    return total


def schema_indexes() -> list[tuple[str, str]]:
    """The (label, property) node indexes listed in cypher/schema.cypher, one CREATE INDEX statement each."""
    found = []
    for statement in cypher_statements("schema"):
        m = re.fullmatch(r"CREATE INDEX FOR \(n:(\w+)\) ON \(n\.(\w+)\)", " ".join(statement.split()))
        if m is None:
            raise PipelineError(f"cypher/schema.cypher: cannot read {statement!r}")
        found.append((m.group(1), m.group(2)))
    return found


def ensure_schema(store: Store) -> None:
    """Create the indexes of cypher/schema.cypher that the store does not have yet."""
    for label, prop in schema_indexes():
        store.ensure_index(label, prop)


def ingest(
    kg, store: Store, batch_size: int = 10_000, progress: bool = True, lock_timeout_s: float | None = None
) -> IngestReport:
    """Load ``kg`` (loaders.KGData) into ``store``: entities, the relation vocabulary and one
    relationship per distinct fact of the test graph with its train/valid/test confidences. Holds the
    store lock of the data set throughout (waiting up to ``lock_timeout_s``, see Store.lock)."""
    t0 = time.perf_counter()
    facts = validate(kg)
    ds = kg.name
    types = relation_types(kg.relation_names())
    key = content_key(kg)
    method = f"{store.backend}-bulk" if store.bulk_load and store.bulk else f"{store.backend}-cypher"
    counts = dict(entities=kg.n_entities, relations=kg.n_relations, facts=len(facts))

    ensure_schema(store)
    bar = None if progress else False  # the waiting bar: on a terminal only, never when quiet
    committed = False
    try:
        with store.lock(dataset_lock(ds), purpose=f"ingest {ds}", timeout_s=lock_timeout_s, progress=bar):
            staging, old = staging_name(ds), replaced_name(ds)
            for leftover in (staging, old):  # of a killed ingest
                delete_dataset(store, leftover)
            st = dataset_status(store, ds)
            if st.complete and st.key == key and st.stored == tuple(counts.values()):
                return IngestReport(
                    ds, **counts, skipped=True, replaced=False, seconds=time.perf_counter() - t0, method=method
                )
            replaced = st.present
            _load(kg, store, facts, types, staging, batch_size, progress)
            try:
                committed = bool(store.run(
                    cypher_text("dataset_commit"),
                    {"dataset": ds, "staging": staging, "old": old, "key": key, "checksum": facts_checksum(facts),
                     **counts},
                ))
            except StoreUnavailable as exc:
                raise _commit_fate(store, ds, key, exc) from None
            if not committed:
                staged = dataset_status(store, staging)
                raise PipelineError(
                    f"the copy of '{ds}' staged in the store is not what was loaded ({staged.stored[0]} entities, "
                    f"{staged.stored[1]} relations, {staged.stored[2]} facts staged; {kg.n_entities}, "
                    f"{kg.n_relations}, {len(facts)} loaded, or facts wired to other entities): nothing was "
                    "committed, the previous version stays; run the ingest again"
                )
            delete_dataset(store, old)
            stale = stale_work(store, ds, key) if replaced else ((), ())
    except StoreUnavailable as exc:
        if not committed:
            raise
        raise StoreUnavailable(
            f"'{ds}' is loaded and committed (the new version is what readers see, durable); the store was lost "
            f"after that, while the version it replaced was being removed and its lock released (the next ingest "
            f"finishes that): {exc}"
        ) from None
    return IngestReport(
        ds, **counts, skipped=False, replaced=replaced, seconds=time.perf_counter() - t0, method=method,
        stale_sets=stale[0], stale_writebacks=stale[1],
    )


def _commit_fate(store: Store, ds: str, key: str, lost: StoreUnavailable) -> StoreUnavailable:
    """The error of an ingest whose commit statement lost the store: what is known of it, asked of the
    store again (the embedded one is started again for that): committed or not."""
    try:
        store.recover()  # (the embedded server, started again from its append-only file, can be asked)
        st = dataset_status(store, ds)
    except PipelineError:
        return StoreUnavailable(f"the store was lost during the commit of '{ds}'; whether it was committed is not "
                                f"known (the store cannot be asked now): run the ingest again later: {lost}")
    if st.complete and st.key == key:
        return StoreUnavailable(f"the store was lost right after it committed '{ds}': the new version is in and "
                                f"what readers see; only the removal of the one it replaced did not run: {lost}")
    return StoreUnavailable(f"the store was lost during the commit of '{ds}': it was not committed, the previous "
                            f"version stays; run the ingest again: {lost}")


def _load(kg, store: Store, facts, types, staging: str, batch_size: int, progress: bool) -> None:
    """Write entities, vocabulary and facts with entities and vocabulary under the name ``staging``
    (the facts carry the data set's own name: readers reach them only through their entities)."""
    ds = kg.name
    store.create_entities(staging, kg.entities["eid"].to_numpy(np.int64), kg.entity_names(), batch_size)
    levels = alpha_levels(kg)
    no_rows = (None, None, None)
    vocab = [
        {
            "rid": i,
            "name": n,
            "type": t,
            **dict(zip(("p25", "p50", "p75"), levels.get(i, no_rows), strict=True)),
        }
        for i, (n, t) in enumerate(zip(kg.relation_names(), types, strict=True))
    ]
    store.run_batches(cypher_text("ingest_relations"), vocab, batch_size, {"dataset": staging})
    with output(progress).bar(total=len(facts), unit="fact", desc=f"ingest {ds}") as bar:
        for rid, part in facts.groupby("r", sort=True):
            store.create_facts(
                ds,
                types[int(rid)],
                int(rid),
                part["h"].to_numpy(np.int64),
                part["t"].to_numpy(np.int64),
                {k: part[k].to_numpy(np.float64) for k in CONF_COLUMNS},
                batch_size,
                bar,
                entity_dataset=staging,
            )
