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

from pipeline.core.errors import PipelineError, front_end, option
from pipeline.stages.options import IngestOptions


def ingest_user(
    name: str,
    *,
    from_path: str | None = None,
    from_store: str | None = None,
    from_frame: Any = None,
    options: IngestOptions | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Stage, load into the store, commit: your KG from files (``from_path``), from a graph store
    (``from_store``) or from a pandas DataFrame (``from_frame``: head, relation, tail, confidence and an
    optional split column). options: an :class:`~pipeline.stages.options.IngestOptions`, or its fields as
    keywords. Returns the report (counts, source, checksum, store report)."""
    from pipeline.core.checks import check_text

    check_text(name, "name")
    for value, what in ((from_path, "from"), (from_store, "from_store")):
        if value is not None and not isinstance(value, str):
            raise PipelineError(f"{option(what)}: expected a path or URI, got {type(value).__name__}")
    if sum(x is not None and x is not False and not (isinstance(x, str) and not x)
           for x in (from_path, from_store, from_frame)) != 1:
        raise PipelineError(f"give exactly one of {_source_option()} and {option('from_store')} (a store URI)")
    o = options if options is not None else IngestOptions(**settings)
    with _one_at_a_time(name):
        return _ingest(name, from_path, from_store, o, from_frame)


def _source_option() -> str:
    """The option naming the user's file: ``--from PATH`` under the CLI, ``source=`` in Python."""
    return "--from PATH" if front_end() == "cli" else "source= (a file or folder)"


def _one_at_a_time(name: str) -> AbstractContextManager[None]:
    """The lock of user data set ``name`` (none for a name that staging will refuse anyway)."""
    from loaders.user import NAME_RE, datasets_root
    from pipeline.core.atomic import exclusive

    if not NAME_RE.fullmatch(name):
        return nullcontext()
    return exclusive(datasets_root() / f".{name}.lock", f"another ingest of '{name}'")


def _ingest(name: str, from_path: str | None, from_store: str | None, o: IngestOptions, from_frame: Any = None) -> dict[str, Any]:
    """:func:`ingest_user` under its lock."""
    from loaders import stage_user_files, stage_user_frame, stage_user_rows
    from pipeline.store import open_store
    from pipeline.store.ingest import ingest

    split, seed, name_property = o.split, o.seed, o.name_property
    if from_store:
        if not o.confidence_property:
            raise PipelineError(f"{option('from_store')} needs {option('confidence_property')} (the relationship "
                                "property holding c)")
        from pipeline.store.pull import pull_rows

        types = [t.strip() for t in o.rel_types.split(",") if t.strip()] if o.rel_types else None
        with open_store(from_store) as src:
            rows = pull_rows(src, o.confidence_property, types, name_property)
            where = src.uri
        settings = {"confidence_property": o.confidence_property, "rel_types": types, "name_property": name_property}
        staged = stage_user_rows(name, rows, where, split=split, seed=seed, settings=settings)
    elif from_frame is not None:
        staged = stage_user_frame(name, from_frame, split=split, seed=seed, columns=o.columns)
    else:
        assert from_path is not None
        staged = stage_user_files(name, from_path, split=split, seed=seed, columns=o.columns)
    for note in staged.notes:  # what the input holds that was taken one way of several (names merged by spacing)
        o.output.warn(note)
    with staged:
        kg = staged.load()
        with open_store(o.store) as store:
            report = ingest(kg, store, batch_size=o.batch_size, progress=o.output)
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
        "notes": list(staged.notes),
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
