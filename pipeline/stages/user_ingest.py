"""``pipeline ingest NAME --from PATH | --from-store URI``: record a user's own uncertain KG and load it
into the graph store, in that order of checks and the reverse order of commits.

The files (or the pulled rows) are validated and staged in a hidden folder (:mod:`loaders.user`), read
back through the benchmark loader, loaded into the store, and only then renamed into place: a failure at
any step (bad row, unreachable store) leaves no user data set record. Re-ingesting unchanged input is a
no-op (same source checksum and settings); changed input replaces the record and the store's copy. The
store's copy is replaced all or nothing as readers see it (:mod:`pipeline.store.ingest`: staged, then one
committing statement); the record is renamed into place after that commit, so a run killed between the two
leaves the new version in the store and the old record until it is run again. The report's
``store_report`` lists the query sets and write-backs in the store that the replacement made stale.

Two ingests of one NAME at a time (two shells, two jobs) take turns on a lock file beside the records:
the second waits for the first, then finds its work done (unchanged input: a no-op) or replaces it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict
from typing import Any

from pipeline.core.errors import PipelineError


def ingest_user(
    name: str,
    from_path: str | None,
    from_store: str | None,
    store_uri: str | None,
    *,
    split: str = "0.8,0.1,0.1",
    seed: int = 0,
    columns: str | None = None,
    confidence_property: str | None = None,
    rel_types: str | None = None,
    name_property: str = "name",
    batch_size: int = 10_000,
    progress: bool = True,
) -> dict[str, Any]:
    """Stage, load into the store, commit. Returns the report (counts, source, checksum, store report)."""
    from pipeline.core.checks import check_int, check_text

    check_text(name, "name")
    check_int(batch_size, "batch_size", 1, 10**7)
    for value, option in ((from_path, "--from"), (from_store, "--from-store"), (store_uri, "--store")):
        if value is not None and not isinstance(value, str):
            raise PipelineError(f"{option}: expected a path or URI, got {type(value).__name__}")
    if bool(from_path) == bool(from_store):
        raise PipelineError("give exactly one of --from PATH and --from-store URI")
    with _one_at_a_time(name):
        return _ingest(name, from_path=from_path, from_store=from_store, store_uri=store_uri, split=split, seed=seed,
                       columns=columns, confidence_property=confidence_property, rel_types=rel_types,
                       name_property=name_property, batch_size=batch_size, progress=progress)


def _one_at_a_time(name: str) -> AbstractContextManager[None]:
    """The lock of user data set ``name`` (none for a name that staging will refuse anyway)."""
    from loaders.user import NAME_RE, datasets_root
    from pipeline.core.atomic import exclusive

    if not NAME_RE.fullmatch(name):
        return nullcontext()
    return exclusive(datasets_root() / f".{name}.lock", f"another ingest of '{name}'")


def _ingest(
    name: str, *, from_path: str | None, from_store: str | None, store_uri: str | None, split: str, seed: int,
    columns: str | None, confidence_property: str | None, rel_types: str | None, name_property: str,
    batch_size: int, progress: bool,
) -> dict[str, Any]:
    """:func:`ingest_user` under its lock."""
    from loaders import stage_user_files, stage_user_rows
    from pipeline.store import open_store
    from pipeline.store.ingest import ingest

    if from_store:
        if not confidence_property:
            raise PipelineError("--from-store needs --confidence-property (the relationship property holding c)")
        from pipeline.store.pull import pull_rows

        types = [t.strip() for t in rel_types.split(",") if t.strip()] if rel_types else None
        with open_store(from_store) as src:
            rows = pull_rows(src, confidence_property, types, name_property)
            where = src.uri
        settings = {"confidence_property": confidence_property, "rel_types": types, "name_property": name_property}
        staged = stage_user_rows(name, rows, where, split=split, seed=seed, settings=settings)
    else:
        assert from_path is not None
        staged = stage_user_files(name, from_path, split=split, seed=seed, columns=columns)
    with staged:
        kg = staged.load()
        with open_store(store_uri) as store:
            report = ingest(kg, store, batch_size=batch_size, progress=progress)
            where_to = store.uri
        spec = staged.commit()
    return {
        "dataset": name,
        "record": spec.folder,
        "source": spec.source,
        "checksum": spec.checksum,
        "unchanged": staged.unchanged,
        "entities": kg.n_entities,
        "relations": kg.n_relations,
        "rows": staged.report.get("rows"),
        "duplicate_rows": staged.report.get("duplicate_rows"),
        "store": where_to,
        "store_report": asdict(report),
    }


def ingest_benchmark(
    name: str, source: str | None = None, store_uri: str | None = None, batch_size: int = 10_000,
    progress: bool = True,
) -> tuple[Any, str]:
    """``pipeline ingest NAME [--source DIR]`` for a registered data set: validate its files, then load the
    store. Returns (the store's :class:`pipeline.store.ingest.IngestReport`, the store's URI)."""
    from loaders import load
    from pipeline.core.checks import check_int, check_text
    from pipeline.store import open_store
    from pipeline.store.ingest import ingest

    check_text(name, "name")
    check_int(batch_size, "batch_size", 1, 10**7)
    kg = load(name, source=source)  # validated before the store is touched
    with open_store(store_uri) as store:
        report = ingest(kg, store, batch_size=batch_size, progress=progress)
        return report, store.uri
