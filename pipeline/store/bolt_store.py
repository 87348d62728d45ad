"""Neo4j 5 (or any Bolt server) through the official neo4j driver: one driver for the store's life,
every query in a managed transaction (``session.execute_read/execute_write``).

Credentials: user:password in the URI, else ``NEO4J_AUTH`` ("user/password", or "none"), else none.
The database is the URI path (``bolt://host:7687/neo4j``), else the server's default.
FalkorDB's experimental Bolt port ignores the database in transactions and always uses its graph
named ``falkordb``; it also prints float parameters with 6 decimals and fails on parameters over a few KB,
so use small batches there (the CI smoke test does).
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any
from urllib.parse import unquote, urlsplit

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store.base import CypherError, Outcome, Store, is_write, plain, read_counters
from pipeline.store.cypher import cypher_text
from pipeline.store.liveness import Watch


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
        self._address = (parts.hostname, parts.port or 7687)
        # no wait on a server that stopped answering (pipeline.store.liveness): the driver reads its socket
        # without a time limit once connected
        self._watch = Watch(self._answers, self._break_calls)
        self._driver = None
        try:
            with self._watch.call(60.0):
                self._driver = neo4j.GraphDatabase.driver(
                    f"{parts.scheme}://{netloc}", auth=auth, connection_timeout=5,
                    # a port that takes the connection and never answers the handshake: given up in seconds;
                    # a transaction whose connection broke is retried for 5 s (a call cut off by the
                    # liveness watch then ends within its bound: 15 s of silence, one retry)
                    connection_acquisition_timeout=5, max_transaction_retry_time=5,
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
            if self._watch.tripped:  # the driver retries a broken connection: not one that stopped answering
                raise _Cut(self._watch.tripped)
            result = tx.run(cypher, params or {})
            rows = [{k: _value(v) for k, v in rec.items()} for rec in result]
            return Outcome(rows, read_counters(result.consume().counters, _COUNTERS))

        write = is_write(cypher)
        try:
            with self._watch.call(timeout_s + _REPLY_MARGIN_S), self._driver.session(database=self.database) as session:
                # plain reads go to execute_read (replicas in a cluster), anything that writes to execute_write
                if write:
                    return session.execute_write(work)
                return session.execute_read(work)
        except (ServiceUnavailable, SessionExpired, OSError, neo4j.exceptions.DriverError, _Cut) as exc:
            if self._watch.tripped:
                fate = "whether it was applied is not known: look before you run it again" if write else "run it again"
                raise StoreUnavailable(
                    f"the Bolt server at {self.uri} stopped answering ({self._watch.tripped}); the statement "
                    f"({' '.join(cypher.split())[:80]}): {fate}"
                ) from None
            if "handshake" in str(exc):
                raise StoreUnavailable(
                    f"the Bolt server at {self.uri} takes connections but does not answer them (its handshake): "
                    f"it is stopped or hung; the statement ({' '.join(cypher.split())[:80]}) was not run"
                ) from None
            raise StoreUnavailable(f"lost the Bolt server at {self.uri}: {_one_line(exc)}") from None
        except neo4j.exceptions.Neo4jError as exc:
            raise CypherError(
                f"{self.uri} rejected the query: {exc.message or exc}\n  query: {' '.join(cypher.split())[:200]}"
            ) from None

    def _answers(self, timeout_s: float) -> bool | None:
        """Whether the server answers a Bolt handshake on a connection of its own (the liveness probe)."""
        try:
            with socket.create_connection(self._address, timeout=timeout_s) as s:
                s.sendall(_HANDSHAKE)
                return len(s.recv(4)) > 0
        except ConnectionRefusedError:
            return None
        except OSError:
            return False

    def _break_calls(self) -> None:
        """Make the calls waiting on the driver's connections fail at once: their sockets are shut down
        (the driver's pool keeps its connections by address, each with its socket)."""
        pool = getattr(self._driver, "_pool", None)
        for conns in list(getattr(pool, "connections", {}).values()):
            for conn in list(conns):
                sock = getattr(getattr(conn, "socket", None), "_socket", None)
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

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


# The driver logs a retried transaction as a warning; with no handler configured Python prints it on stderr
# (several lines per retry under a one-line error). A person who configures logging still sees it.
logging.getLogger("neo4j").addHandler(logging.NullHandler())


class _Cut(Exception):
    """A call the liveness watch cut off (the driver must not retry it)."""


# a statement's reply may come this long after the server's own limit stopped it
_REPLY_MARGIN_S = 30.0
# the Bolt preamble and four version proposals (5.x, 4.4, 4.3, 3): any server answers with 4 bytes
_HANDSHAKE = bytes.fromhex("6060B017") + bytes.fromhex("00000405 00000404 00000403 00000003".replace(" ", ""))


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
