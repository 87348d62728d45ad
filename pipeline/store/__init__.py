"""The graph store (design section 4): ``open_store(uri)`` gives a :class:`Store` with ``run``,
``run_batches`` and the backend-specific index creation and bulk load; ``cypher_text(name)`` reads the
shared ``cypher/<name>.cypher`` files.

>>> from pipeline.store import open_store
>>> with open_store() as store:               # PIPELINE_STORE, else the embedded FalkorDB server
...     store.run("MATCH (n:Entity {dataset: $d}) RETURN count(n) AS n", {"d": "ppi5k"})

URIs: ``embedded`` (started under PIPELINE_HOME when needed, authenticated from its credentials file),
``falkordb://[user:password@]host:port[/graph]`` (without a password: the file PIPELINE_STORE_CREDENTIALS
names, else the embedded server's own credentials when it is the server at that address),
``bolt://[user:pass@]host:port[/database]``, ``neo4j://...`` (also ``+s``/``+ssc`` variants): the
backends registered by scheme in :mod:`pipeline.store.backends` (``pipeline ls stores``).
The store never imports torch.
"""

from __future__ import annotations

from typing import Any

from pipeline.core import config
from pipeline.core.checks import check_unicode
from pipeline.core.errors import PipelineError
from pipeline.store.backends import STORES, StoreBackend, backend_for
from pipeline.store.base import (
    CONF_COLUMNS,
    CypherError,
    Outcome,
    Store,
    quote_rel_type,
    relation_type,
    relation_types,
    with_rel_type,
)
from pipeline.store.cypher import cypher_text
from pipeline.store.lock import StoreLocked, StoreLockLost, dataset_lock


def open_store(uri: str | None = None, graph: str | None = None) -> Store:
    """Connect to a store by URI (default: PIPELINE_STORE, else ``embedded``): the backend registered for
    its scheme opens it (:mod:`pipeline.store.backends`, ``pipeline ls stores``). ``graph`` overrides the
    FalkorDB graph / Neo4j database named in the URI. Raises StoreUnavailable when it cannot be reached,
    PipelineError on a malformed URI or an unknown scheme."""
    if uri is not None and not isinstance(uri, str):
        raise PipelineError(f"store: expected a store URI, got {type(uri).__name__}")
    uri = (uri or config.default_store_uri()).strip()
    check_unicode(uri, "store")
    return backend_for(uri).open(uri, graph)


__all__ = [
    "CONF_COLUMNS",
    "STORES",
    "CypherError",
    "Outcome",
    "Store",
    "StoreBackend",
    "StoreLockLost",
    "StoreLocked",
    "cypher_text",
    "backend_for",
    "dataset_lock",
    "open_store",
    "quote_rel_type",
    "relation_type",
    "relation_types",
    "run_cypher",
    "with_rel_type",
]


def query_store(statement: str, params: dict[str, Any] | None = None, store_uri: str | None = None) -> list[dict]:
    """``pipeline cypher``: one statement on the store at ``store_uri`` (default: PIPELINE_STORE, else the
    embedded server, logged in from its credentials file); its rows. An empty statement or a parameter the
    store cannot take exactly is refused before the store is opened (or started)."""
    return run_cypher(statement, params, store_uri).rows


def run_cypher(
    statement: str, params: dict[str, Any] | None = None, store_uri: str | None = None, timeout_s: float | None = None
) -> Outcome:
    """:func:`query_store` with the write counters (nodes deleted, relationships created, ...); the server
    stops the statement after ``timeout_s`` (default ``statement.USER_TIMEOUT_S``). A ``range()`` the text
    bounds past what a statement may hold is refused before the store is opened (:mod:`pipeline.store.bounds`),
    and so is a statement that ends a trial server at the store's memory cap or does not finish there within
    its time limit (:mod:`pipeline.store.trial`)."""
    from pipeline.store.bounds import check_ranges
    from pipeline.store.statement import check_params, check_statement, execute_statement

    check_statement(statement)
    check_params(params)
    if store_uri is not None and not isinstance(store_uri, str):
        raise PipelineError(f"store: expected a store URI, got {type(store_uri).__name__}")
    check_ranges(statement, params, *_statement_memory(store_uri))
    if _scheme(store_uri) in ("embedded", "falkordb"):
        from pipeline.store.trial import trial

        refused = trial(statement, params, timeout_s)
        if refused:
            raise PipelineError(refused)
    with open_store(store_uri) as store:
        return execute_statement(store, statement, params, timeout_s)


def _statement_memory(store_uri: str | None) -> tuple[int, str]:
    """The memory one statement may hold on the store at ``store_uri`` and what sets it (the embedded
    server's own limit; FalkorDB's default elsewhere), for :func:`pipeline.store.bounds.check_ranges`."""
    import pipeline.store.embedded as embedded

    if _scheme(store_uri) == "embedded":
        return embedded.query_memory_bytes(), (
            f"a quarter of the server's memory cap of {embedded.memory_cap_text()}, at most 1 GiB"
        )
    return embedded.QUERY_MEM_CAPACITY, "1 GiB"


def _scheme(store_uri: str | None) -> str:
    from pipeline.store.backends import scheme_of

    return scheme_of((store_uri or config.default_store_uri()).strip())
