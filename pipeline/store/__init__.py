"""The graph store (design section 4): ``open_store(uri)`` gives a :class:`Store` with ``run``,
``run_batches`` and the backend-specific index creation and bulk load; ``cypher_text(name)`` reads the
shared ``cypher/<name>.cypher`` files.

>>> from pipeline.store import open_store
>>> with open_store() as store:               # PIPELINE_STORE, else the embedded FalkorDB server
...     store.run("MATCH (n:Entity {dataset: $d}) RETURN count(n) AS n", {"d": "ppi5k"})

URIs: ``embedded`` (started under PIPELINE_HOME when needed), ``falkordb://host:port[/graph]``,
``bolt://[user:pass@]host:port[/database]``, ``neo4j://...`` (also ``+s``/``+ssc`` variants).
The store never imports torch.
"""

from __future__ import annotations

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
        store = FalkorDBStore(info.host, info.port, graph or DEFAULT_GRAPH)
        store.snapshot_on_checkpoint = True
        return store
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
        password = unquote(parts.password) if parts.password else None
        return FalkorDBStore(
            parts.hostname, port or 6379, graph or parts.path.strip("/") or DEFAULT_GRAPH, password
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
