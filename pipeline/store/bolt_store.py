"""Neo4j 5 (or any Bolt server) through the official neo4j driver: one driver for the store's life,
every query in a managed transaction (``session.execute_read/execute_write``).

Credentials: user:password in the URI, else ``NEO4J_AUTH`` ("user/password", or "none"), else none.
The database is the URI path (``bolt://host:7687/neo4j``), else the server's default.
FalkorDB's experimental Bolt port ignores the database in transactions and always uses its graph
named ``falkordb``; it also prints float parameters with 6 decimals and fails on parameters over a few KB,
so use small batches there (the CI smoke test does).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store.base import CypherError, Outcome, Store, is_write, plain, read_counters
from pipeline.store.cypher import cypher_text


def auth_from(uri: str) -> tuple[str, str] | None:
    """(user, password) from the URI's userinfo or NEO4J_AUTH; None for no authentication."""
    parts = urlsplit(uri)
    if parts.username is not None:
        return unquote(parts.username), unquote(parts.password or "")
    env = os.environ.get("NEO4J_AUTH")
    if not env or env.lower() == "none":
        return None
    user, sep, password = env.partition("/")
    if not sep:
        raise PipelineError("NEO4J_AUTH must be 'user/password' or 'none'")
    return user, password


class BoltStore(Store):
    """A Bolt server (Neo4j 5) at ``bolt://`` / ``neo4j://`` URIs."""

    backend = "neo4j"
    # FalkorDB's experimental Bolt (the only Bolt server CI can run) takes ~30 rows a batch and breaks on
    # parameters over ~4 KB (a witness row holds its atoms: a few hundred bytes); Neo4j takes far more
    write_batch = 30
    witness_batch = 2
    index_listing = "neo4j_indexes"
    bulk_load = False
    cannot = ("drop graph", "bulk load", "snapshot")  # UNWIND batches only; commits are durable by themselves

    def __init__(self, uri: str, auth: tuple[str, str] | None = None, database: str | None = None) -> None:
        import neo4j
        from neo4j.exceptions import AuthError, ServiceUnavailable

        parts = urlsplit(uri)
        if not parts.hostname:
            raise PipelineError(f"store URI {uri!r} names no host")
        self.database = database or (parts.path.strip("/") or None)
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        self.uri = f"{parts.scheme}://{netloc}" + (f"/{self.database}" if self.database else "")
        self.graph = self.database or "(default)"
        auth = auth if auth is not None else auth_from(uri)
        try:
            self._driver = neo4j.GraphDatabase.driver(
                f"{parts.scheme}://{netloc}", auth=auth, connection_timeout=5,
                # a port that takes the connection and never answers the handshake: given up in seconds
                connection_acquisition_timeout=10, max_transaction_retry_time=10,
            )
            self._driver.verify_connectivity()
        except AuthError as exc:
            raise StoreUnavailable(
                f"{self.uri} refused the credentials ({exc.message}); set NEO4J_AUTH=user/password"
            ) from None
        except (ServiceUnavailable, OSError, ValueError) as exc:
            raise StoreUnavailable(f"cannot reach a Bolt server at {self.uri}: {_one_line(exc)}") from None
        except neo4j.exceptions.Neo4jError as exc:
            raise StoreUnavailable(f"{self.uri}: {exc.message or exc}") from None

    def _execute(self, cypher: str, params: dict[str, Any] | None, timeout_s: float) -> Outcome:
        import neo4j
        from neo4j.exceptions import ServiceUnavailable, SessionExpired

        # the transaction timeout of the driver: the server stops the transaction after it, uncommitted
        # (its memory limits are the server's own settings, e.g. Neo4j's db.memory.transaction.max)
        @neo4j.unit_of_work(timeout=timeout_s)
        def work(tx: Any) -> Outcome:
            result = tx.run(cypher, params or {})
            rows = [{k: _value(v) for k, v in rec.items()} for rec in result]
            return Outcome(rows, read_counters(result.consume().counters, _COUNTERS))

        try:
            with self._driver.session(database=self.database) as session:
                # plain reads go to execute_read (replicas in a cluster), anything that writes to execute_write
                if is_write(cypher):
                    return session.execute_write(work)
                return session.execute_read(work)
        except (ServiceUnavailable, SessionExpired, OSError) as exc:
            raise StoreUnavailable(f"lost the Bolt server at {self.uri}: {_one_line(exc)}") from None
        except neo4j.exceptions.Neo4jError as exc:
            raise CypherError(
                f"{self.uri} rejected the query: {exc.message or exc}\n  query: {' '.join(cypher.split())[:200]}"
            ) from None

    def indexes(self) -> set[tuple[str, str]]:
        try:
            return super().indexes()
        except CypherError:
            # a Bolt server that is not Neo4j: FalkorDB's Bolt port (the contract suite) lists them its way
            from pipeline.store.falkordb_store import FalkorDBStore

            return FalkorDBStore._index_pairs(self.run(cypher_text(FalkorDBStore.index_listing)))

    @staticmethod
    def _index_pairs(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {
            (r["labelsOrTypes"][0], r["properties"][0])
            for r in rows
            if r["entityType"] == "NODE" and r["labelsOrTypes"] and len(r["properties"] or []) == 1
        }

    def _disconnect(self) -> None:
        driver = getattr(self, "_driver", None)
        if driver is not None:
            driver.close()
            self._driver = None


def _one_line(exc: BaseException) -> str:
    """The driver's message on one line (it spreads an unreachable address over several)."""
    return " ".join(str(exc).split())


# the driver's summary counters, by the names the project reports (base.COUNTER_NAMES)
_COUNTERS = {
    "nodes_created": "nodes created", "nodes_deleted": "nodes deleted",
    "relationships_created": "relationships created", "relationships_deleted": "relationships deleted",
    "properties_set": "properties set", "labels_added": "labels added", "labels_removed": "labels removed",
    "indexes_added": "indexes created", "indexes_removed": "indexes deleted",
}  # fmt: skip


def _value(v: Any) -> Any:
    from neo4j.graph import Node, Path, Relationship

    if isinstance(v, (Node, Relationship)):
        return dict(v.items())
    if isinstance(v, Path):
        return [dict(n.items()) for n in v.nodes]
    if isinstance(v, list):
        return [_value(x) for x in v]
    return plain(v)
