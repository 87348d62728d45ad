"""The graph store (design section 4): ``open_store(uri)`` gives a :class:`Store` with ``run``,
``run_batches`` and the backend-specific index creation and bulk load; ``cypher_text(name)`` reads the
shared ``cypher/<name>.cypher`` files.

>>> from pipeline.store import open_store
>>> with open_store() as store:               # PIPELINE_STORE, else the embedded FalkorDB server
...     store.run("MATCH (n:Entity {dataset: $d}) RETURN count(n) AS n", {"d": "ppi5k"})

URIs: ``embedded`` (started under PIPELINE_HOME when needed, authenticated from its credentials file),
``falkordb://[user:password@]host:port[/graph]`` (without a password: the file PIPELINE_STORE_CREDENTIALS
names, else the embedded server's own credentials when it is the server at that address),
``bolt://[user:pass@]host:port[/database]``, ``neo4j://...`` (also ``+s``/``+ssc`` variants).
The store never imports torch.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from pipeline import config
from pipeline.errors import PipelineError
from pipeline.store.base import (
    CONF_COLUMNS,
    CypherError,
    Store,
    quote_rel_type,
    relation_type,
    relation_types,
    with_rel_type,
)
from pipeline.store.cypher import cypher_text
from pipeline.store.lock import StoreLocked, StoreLockLost, dataset_lock

BOLT_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def open_store(uri: str | None = None, graph: str | None = None) -> Store:
    """Connect to a store by URI (default: PIPELINE_STORE, else ``embedded``). ``graph`` overrides the
    FalkorDB graph / Neo4j database named in the URI. Raises StoreUnavailable when it cannot be reached,
    PipelineError on a malformed URI."""
    uri = (uri or config.default_store_uri()).strip()
    if uri in ("embedded", "embedded:", "embedded://"):
        from pipeline.store import embedded
        from pipeline.store.falkordb_store import DEFAULT_GRAPH, FalkorDBStore

        info = embedded.start()
        return FalkorDBStore(info.host, info.port, graph or DEFAULT_GRAPH, **embedded.login(info))
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise PipelineError(f"store URI {uri!r}: the port is not a number") from None
    if scheme == "falkordb":
        from pipeline.store.falkordb_store import DEFAULT_GRAPH, FalkorDBStore

        if not parts.hostname:
            raise PipelineError(f"store URI {uri!r} names no host; expected falkordb://host:port[/graph]")
        from pipeline.store import embedded

        user = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        if password is None:  # e.g. the address `pipeline store status` prints: the embedded server's own users
            creds = embedded.credentials_for(parts.hostname, port or 6379)
            if creds is not None:
                user, password = creds.user, creds.password
        return FalkorDBStore(
            parts.hostname, port or 6379, graph or parts.path.strip("/") or DEFAULT_GRAPH, password,
            username=user,
        )
    if scheme in BOLT_SCHEMES:
        from pipeline.store.bolt_store import BoltStore

        return BoltStore(uri, database=graph)
    raise PipelineError(
        f"unknown store URI {uri!r}; expected embedded, falkordb://host:port[/graph], bolt://host:port "
        "or neo4j://host:port"
    )


__all__ = [
    "CONF_COLUMNS",
    "CypherError",
    "Store",
    "StoreLockLost",
    "StoreLocked",
    "cypher_text",
    "dataset_lock",
    "open_store",
    "quote_rel_type",
    "relation_type",
    "relation_types",
    "with_rel_type",
]


def query_store(statement: str, params: dict[str, Any] | None = None, store_uri: str | None = None) -> list[dict]:
    """``pipeline cypher``: one statement on the store at ``store_uri`` (default: PIPELINE_STORE, else the
    embedded server, logged in from its credentials file); its rows. An empty statement is refused before
    the store is opened (or started)."""
    from pipeline.store.statement import run_statement

    if not statement.strip():
        raise PipelineError("empty Cypher statement")
    with open_store(store_uri) as store:
        return run_statement(store, statement, params)
