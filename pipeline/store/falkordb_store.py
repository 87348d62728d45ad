"""FalkorDB through its native client (exact commands, real error messages): the embedded default and
CI backend. Bulk loads use the server's GRAPH.BULK binary endpoint, ~10x faster than UNWIND batches."""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store.base import (
    CONF_COLUMNS,
    CypherError,
    Outcome,
    RelationFacts,
    Store,
    is_write,
    plain,
    read_counters,
)
from pipeline.store.cypher import cypher_text
from pipeline.store.liveness import Watch

DEFAULT_GRAPH = "pipeline"
# GRAPH.BULK property type tags (FalkorDB src/bulk_insert/bulk_insert.c)
_BI_STRING, _BI_LONG, _BI_DOUBLE = 3, 4, 2
# edges per GRAPH.BULK command: bounds the request size (~60 B/edge) and keeps the progress bar moving
_BULK_EDGES = 50_000
# seconds a server has to answer the first PING: a port that takes the connection and says nothing (not a
# FalkorDB server, or a hung one) is reported instead of waited on
CONNECT_TIMEOUT_S = 5.0
# a statement's reply may come this long after the server's own limit stopped it
_REPLY_MARGIN_S = 30.0
# how long a write may sit in the server's buffer before it counts as not written (Redis writes it at the
# latest 2 s after a slow background fsync began)
_DURABLE_WAIT_S = 5.0
# GRAPH.RO_QUERY on a server without the graph yet
_NO_GRAPH = "empty key"
# what open_embedded sets on a store (see __init__), copied to its fresh() twins
_HOOKS = (
    "server", "on_unresponsive", "on_lost", "on_gone", "before_write", "on_not_durable", "require_durable",
    "on_checkpoint",
)  # fmt: skip
# the client's statistics properties, by the names the project reports (base.COUNTER_NAMES)
_COUNTERS = {
    "nodes_created": "nodes created", "nodes_deleted": "nodes deleted",
    "relationships_created": "relationships created", "relationships_deleted": "relationships deleted",
    "properties_set": "properties set", "properties_removed": "properties removed",
    "labels_added": "labels added", "labels_removed": "labels removed",
    "indices_created": "indexes created", "indices_deleted": "indexes deleted",
}  # fmt: skip


class FalkorDBStore(Store):
    """A FalkorDB graph on host:port. ``bulk=False`` forces the portable UNWIND Cypher path."""

    backend = "falkordb"
    write_batch = 1000
    witness_batch = 100
    index_listing = "falkordb_indexes"
    bulk_load = True
    cannot = ("rollback",)  # no transactions: every write is an idempotent MERGE or a one-statement commit

    def __init__(
        self,
        host: str,
        port: int,
        graph: str = DEFAULT_GRAPH,
        password: str | None = None,
        bulk: bool = True,
        timeout_s: float | None = None,
        username: str | None = None,
    ) -> None:
        import redis
        from falkordb import FalkorDB
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        if not graph:
            raise PipelineError("empty FalkorDB graph name")
        self.host, self.port, self.graph, self.bulk = host, int(port), graph, bulk
        self.uri = f"falkordb://{host}:{port}/{graph}"
        self._password, self._username = password, username
        # The hooks of the embedded server (pipeline.store.recovery.attach); None elsewhere: server: its
        # ServerInfo (a message names its pid); on_unresponsive(why) restarts a server that stopped
        # answering and says so; on_lost() says why the connection was lost (the server ended: out of its
        # memory cap, killed...); on_gone() starts a server that had ended and follows it (recover());
        # before_write(need) refuses a write the disk cannot take; on_not_durable() stops a server that
        # acknowledged a write it could not append.
        self.server: Any = None
        self.on_unresponsive: Any = None
        self.on_lost: Any = None
        self.before_write: Any = None
        self.on_not_durable: Any = None
        self.on_gone: Any = None
        # After each write, ask the server whether it is in its append-only file (the embedded server: an
        # acknowledged write must survive kill -9; Redis acknowledges one its full disk did not take).
        self.require_durable = False
        _preflight(host, int(port))
        # No command is ever sent twice: a write re-sent after a lost reply could run twice. (A connection
        # the server dropped while idle is replaced before use: the pool checks it when it hands it out.)
        self._pool = redis.ConnectionPool(
            host=host, port=int(port), username=username, password=password,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            # a reply later than the server's own limit plus a margin: the server or the link is gone
            socket_timeout=timeout_s or self.statement_timeout_s + _REPLY_MARGIN_S,
            retry=Retry(NoBackoff(), 0), decode_responses=True, encoding="utf-8", protocol=2,  # as FalkorDB's own
        )  # fmt: skip
        # and no wait on a server that stopped answering: see pipeline.store.liveness
        self._watch = Watch(self._answers, self._break_calls)
        try:
            with self._watch.call():
                self._db = FalkorDB(connection_pool=self._pool)
                try:
                    self._db.connection.ping()
                except redis.exceptions.ResponseError as exc:
                    if "MISCONF" not in str(exc):  # (it answers; it refuses writes until its disk has room)
                        raise
        except (redis.exceptions.AuthenticationError, redis.exceptions.AuthenticationWrongNumberOfArgsError) as exc:
            raise StoreUnavailable(f"FalkorDB at {host}:{port} refused the credentials: {exc}") from None
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            if self._watch.tripped:
                raise StoreUnavailable(
                    f"FalkorDB at {host}:{port} took the connection and stopped answering ({self._watch.tripped})"
                ) from None
            raise StoreUnavailable(
                f"cannot reach FalkorDB at {host}:{port} ({exc}); start the embedded server with "
                "`pipeline store start` or pass another --store URI"
            ) from None
        except redis.exceptions.ResponseError as exc:
            if "NOAUTH" in str(exc) or "HELLO must be called" in str(exc):
                raise StoreUnavailable(
                    f"FalkorDB at {host}:{port} requires a password: put user:password in the URI "
                    "(falkordb://user:password@host:port) or set PIPELINE_STORE_CREDENTIALS to its credentials file"
                ) from None
            raise StoreUnavailable(f"{host}:{port} is not a usable FalkorDB server: {exc}") from None
        except (redis.exceptions.RedisError, ValueError, IndexError, TypeError) as exc:
            # (InvalidResponse and the like: something answers there, but not as a FalkorDB server does)
            raise StoreUnavailable(
                f"{host}:{port} is not a usable FalkorDB server: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            ) from None
        self._graph = self._db.select_graph(graph)
        # (dataset, node id per eid) for GRAPH.BULK, and the server life (run_id) they were read in
        self._node_ids: tuple[str, np.ndarray] | None = None
        self._ids_life: str | None = None
        # a synchronous SAVE at each checkpoint, for a server that persists nothing by itself (the
        # embedded one has its append-only file instead: nothing to do there)
        self.snapshot_on_checkpoint = False
        # the embedded server's compaction of its append-only file (pipeline.store.embedded.compact), run
        # at each checkpoint after writes: a restart after a crash then replays little
        self.on_checkpoint: Any = None

    def fresh(self, graph: str | None = None) -> FalkorDBStore:
        """A new connection to the same server on another graph (default: a unique new name)."""
        import uuid

        other = FalkorDBStore(
            self.host, self.port, graph or f"g_{uuid.uuid4().hex[:12]}", self._password, self.bulk,
            username=self._username,
        )
        for hook in _HOOKS:
            setattr(other, hook, getattr(self, hook))
        return other

    # ------------------------------------------------------------------------------------------ queries
    def _execute(self, cypher: str, params: dict[str, Any] | None, timeout_s: float) -> Outcome:
        ms = max(1, int(timeout_s * 1000))
        write = is_write(cypher)
        if write and self.before_write is not None:
            self.before_write(0)

        def query(limit: int | None, read_only: bool) -> Outcome:
            run = self._graph.ro_query if read_only else self._graph.query
            result = run(cypher, params, timeout=limit)
            return Outcome(self._rows(result), read_counters(result, _COUNTERS))

        # a read goes as GRAPH.RO_QUERY: it is answered while the server refuses writes (its disk full)
        read_only = not write
        for _ in range(3):
            try:
                done = self._call(lambda m=ms, ro=read_only: query(m, ro), cypher, timeout_s, write)
                break
            except CypherError as exc:
                if read_only and _NO_GRAPH in str(exc):
                    read_only = False  # a statement without a graph (RETURN 1) on a server that has none yet
                elif "TIMEOUT_MAX" in str(exc) and ms is not None:
                    ms = None  # a server of its own whose TIMEOUT_MAX is below ours: its own limits apply
                else:
                    raise
        if write:
            self._ensure_durable(cypher)
        return done

    def _call(self, fn: Any, what: str, timeout_s: float | None = None, write: bool = False) -> Any:
        """One round trip, watched (:mod:`pipeline.store.liveness`): the server's errors as CypherError,
        a lost or silent server as StoreUnavailable saying what is known of the statement's fate."""
        import redis

        try:
            with self._watch.call(None if timeout_s is None else timeout_s + _REPLY_MARGIN_S):
                return fn()
        except redis.exceptions.ResponseError as exc:
            text = str(exc)
            if "timed out" in text.lower():
                limit = f" of {timeout_s:g} s" if timeout_s else ""
                raise CypherError(
                    f"FalkorDB stopped the statement at its time limit{limit} (nothing of it was written): "
                    f"{_short(what, 120)}"
                ) from None
            if "mem consumption exceeded" in text:
                raise CypherError(
                    "FalkorDB stopped the statement at its memory limit (QUERY_MEM_CAPACITY; nothing of it "
                    f"was written): {_short(what, 120)}"
                ) from None
            if text.startswith("MISCONF"):
                where = f" ({self.server.data_dir})" if self.server is not None else ""
                raise StoreUnavailable(
                    f"the store refuses writes: it cannot write its append-only file (its disk{where} is full "
                    f"or failing); nothing of this statement was written; free some space and run it again"
                ) from None
            raise CypherError(f"FalkorDB rejected the query: {exc}\n  query: {_short(what)}") from None
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise self._lost(exc, what, write) from None
        except redis.exceptions.RedisError as exc:
            if self._watch.tripped:
                raise self._lost(exc, what, write) from None
            raise StoreUnavailable(
                f"FalkorDB at {self.host}:{self.port} answered in a way the client cannot read: "
                f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            ) from None
        except (ValueError, AttributeError, TypeError) as exc:
            if self._watch.tripped:  # (what a client says when its connection is broken mid-read)
                raise self._lost(exc, what, write) from None
            raise

    def _break_calls(self) -> None:
        """Make the calls waiting on this store's connections fail at once (the liveness thread calls it
        on a server that stopped answering): their sockets are shut down, not closed, so the waiting
        thread reads an end of stream and the client closes the connection in its own thread."""
        import socket

        # (redis-py keeps the connections handed out in this set and each socket in ``_sock``)
        in_use = getattr(self._pool, "_in_use_connections", None)
        if in_use is None:
            self._pool.disconnect(inuse_connections=True)
            return
        for conn in list(in_use):
            sock = getattr(conn, "_sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _lost(self, exc: BaseException, what: str, write: bool) -> StoreUnavailable:
        """The error of a call whose server went away or stopped answering, saying why where it is known
        (the embedded server's hooks) and what became of the statement."""
        name = f"the store (pid {self.server.pid})" if self.server is not None else f"FalkorDB at {self.host}:{self.port}"
        stmt = _short(what, 80)
        unknown = "whether it was applied is not known: look before you run it again"
        if self._watch.tripped:
            why = self._watch.tripped
            if self.on_unresponsive is not None:
                why = self.on_unresponsive(why)
            return StoreUnavailable(
                f"{name} stopped answering ({why}); the statement ({stmt}): {unknown if write else 'run it again'}"
            )
        if _not_sent(exc):
            # (not started again here: `pipeline store stop` is not undone by a client still running; the
            # next command starts it, and says why it had ended)
            why = self.on_lost() if self.on_lost is not None else ""
            return StoreUnavailable(f"{name} had ended before this statement was sent ({stmt}){': ' + why if why else ''}; "
                                    "nothing of it was run: run it again (the next command starts the store)")
        why = self.on_lost() if self.on_lost is not None else ""
        if why:
            if "memory cap" in why:
                fate = "the statement needs more memory than the store may take: change it (or raise the cap)"
            elif not write:
                fate = "run it again"
            else:
                fate = "if it was applied before that, the append-only file has it: look before you run it again"
            return StoreUnavailable(f"{name} ended during the statement ({stmt}): {why}; {fate}")
        fate = f"; {unknown}" if write else ""
        return StoreUnavailable(f"lost {name}: {' '.join(str(exc).split())}{fate}")

    def recover(self) -> bool:
        """Start the embedded server again if it had ended, and follow it (see :meth:`Store.recover`)."""
        if self.on_gone is None:
            return False
        try:
            return bool(self.on_gone())
        except PipelineError:
            return False

    def _answers(self, timeout_s: float) -> bool | None:
        """Whether the server answers a PING on a connection of its own (the liveness probe)."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        r = self.__dict__.get("_prober")
        if r is None:
            r = self._prober = redis.Redis(
                host=self.host, port=self.port, username=self._username, password=self._password,
                socket_timeout=timeout_s, socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0),
            )  # fmt: skip
        try:
            r.ping()
            return True
        except (redis.exceptions.ResponseError, redis.exceptions.BusyLoadingError,
                redis.exceptions.AuthenticationError):
            return True  # an answer (loading, refusing writes, ...)
        except redis.exceptions.TimeoutError:
            return False
        except (redis.exceptions.ConnectionError, OSError) as exc:
            return None if "refused" in str(exc).lower() else False

    def _ensure_durable(self, what: str) -> None:
        """After a write: its bytes are in the server's append-only file (INFO persistence: nothing left
        in its buffer, the last write to the file succeeded), else StoreUnavailable, and the embedded
        server is stopped so nothing of the write remains (:func:`pipeline.store.recovery.drop_unsaved`)."""
        if not self.require_durable:
            return
        deadline = time.monotonic() + _DURABLE_WAIT_S
        while True:
            try:
                p = self._call(lambda: self._db.connection.info("persistence"), "INFO persistence")
            except StoreUnavailable as exc:
                raise StoreUnavailable(
                    f"the store was lost right after this write ran ({_short(what, 80)}), before it was known to be "
                    f"saved: whether it was applied is not known, look before you run it again ({exc})"
                ) from None
            if not p.get("aof_enabled"):
                return
            ok = p.get("aof_last_write_status", "ok") == "ok"
            if ok and not p.get("aof_buffer_length"):
                return
            if not ok or time.monotonic() > deadline:
                break
            time.sleep(0.002)  # still in the server's buffer: a background fsync delays the write up to 2 s
        why = self.on_not_durable() if self.on_not_durable is not None else (
            "the server could not write it into its append-only file: it is not durable")
        raise StoreUnavailable(f"the write was not saved: {why} ({_short(what, 80)})")

    @staticmethod
    def _rows(result: Any) -> list[dict[str, Any]]:
        from falkordb.edge import Edge
        from falkordb.node import Node

        keys = [h[1] for h in result.header]

        def conv(v: Any) -> Any:
            if isinstance(v, (Node, Edge)):
                return dict(v.properties)
            if isinstance(v, list):
                return [conv(x) for x in v]
            return plain(v)

        return [dict(zip(keys, (conv(v) for v in row), strict=True)) for row in result.result_set]

    @staticmethod
    def _index_pairs(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(r["label"], p) for r in rows if r["entitytype"] == "NODE" for p in r["properties"]}

    def drop(self) -> None:
        """Delete this whole graph (tests and benchmarks; ingest deletes one data set instead)."""
        self._mark_dirty()
        try:
            self._call(self._graph.delete, "GRAPH.DELETE", write=True)
        except CypherError:
            pass  # no such graph yet

    # ------------------------------------------------------------------------------------------ bulk load
    def create_entities(
        self, dataset: str, eids: np.ndarray, names: Sequence[str], batch_size: int = 10_000
    ) -> None:
        self._node_ids = None  # new entities, whichever path writes them: the cached ids may be stale
        if not self.bulk or any("\0" in n for n in names) or "\0" in dataset:
            return super().create_entities(dataset, eids, names, batch_size)
        if len(eids) == 0:
            return None
        ds = _cstr(dataset)
        body = b"".join(
            ds + struct.pack("<Bq", _BI_LONG, int(e)) + _cstr(str(n))
            for e, n in zip(eids.tolist(), names, strict=True)
        )
        blob = _header("Entity", ("dataset", "eid", "name")) + body
        self._bulk(len(eids), 0, [blob], [])
        self._node_ids = None

    def _write_facts(self, facts: RelationFacts, batch_size: int, progress: Any | None) -> None:
        dataset, heads, tails, confs = facts.dataset, facts.heads, facts.tails, facts.confs
        if not self.bulk or "\0" in dataset:
            return super()._write_facts(facts, batch_size, progress)
        if len(heads) == 0:
            return None
        ids = self._entity_ids(facts.entity_dataset)
        top = max(int(heads.max()), int(tails.max()))
        if (
            min(int(heads.min()), int(tails.min())) < 0
            or top >= len(ids)
            or (ids[heads] < 0).any()
            or (ids[tails] < 0).any()
        ):
            raise PipelineError(f"facts of {dataset} name entities that are not in the store")
        src, dst = ids[heads], ids[tails]
        present = np.stack([~np.isnan(confs[k]) for k in CONF_COLUMNS], axis=1)
        # the module skips null properties anyway; grouping facts by which confidences they have gives
        # fixed-size records that numpy packs without a Python loop
        patterns, group = np.unique(present, axis=0, return_inverse=True)
        group = group.reshape(-1)
        ds = _cstr(dataset)
        for gi, pattern in enumerate(patterns):
            cols = [k for k, p in zip(CONF_COLUMNS, pattern, strict=True) if p]
            sel = np.nonzero(group == gi)[0]
            fields = [("src", "<u8"), ("dst", "<u8"), ("ds", f"S{len(ds)}"), ("tr", "u1"), ("rid", "<i8")]
            fields += [x for k in cols for x in ((f"t_{k}", "u1"), (k, "<f8"))]
            rec = np.zeros(len(sel), dtype=np.dtype(fields, align=False))
            rec["src"], rec["dst"], rec["ds"], rec["tr"], rec["rid"] = (
                src[sel],
                dst[sel],
                ds,
                _BI_LONG,
                facts.rid,
            )
            for k in cols:
                rec[f"t_{k}"], rec[k] = _BI_DOUBLE, confs[k][sel]
            header = _header(facts.rel_type, ("dataset", "rid", *cols))
            for i in range(0, len(rec), _BULK_EDGES):
                part = rec[i : i + _BULK_EDGES]
                self._entity_ids(facts.entity_dataset)  # the ids are still this server life's
                self._bulk(0, len(part), [], [header + part.tobytes()])
                if progress is not None:
                    progress.update(len(part))

    def _entity_ids(self, dataset: str) -> np.ndarray:
        """Internal node id per eid of the data set (-1 where missing): GRAPH.BULK edges name node ids.
        Ids belong to one life of the server: a server that restarted since they were read (the client
        reconnects by itself) may hold other nodes at those ids, so a bulk load is then stopped
        (StoreUnavailable) instead of wiring facts to them."""
        life = self._server_life()
        if self._node_ids is not None and self._node_ids[0] == dataset:
            if self._ids_life is not None and life != self._ids_life:
                raise StoreUnavailable(
                    f"the FalkorDB server at {self.host}:{self.port} restarted during a bulk load of "
                    f"'{dataset}': nothing of it is committed; run it again"
                )
            return self._node_ids[1]
        self._ids_life = life
        rows = self.run(cypher_text("falkordb_entity_ids"), {"dataset": dataset})
        eid = np.fromiter((r["eid"] for r in rows), np.int64, len(rows))
        nid = np.fromiter((r["id"] for r in rows), np.int64, len(rows))
        ids = np.full(int(eid.max()) + 1 if len(eid) else 0, -1, dtype=np.int64)
        ids[eid] = nid
        self._node_ids = (dataset, ids)
        return ids

    def _server_life(self) -> str | None:
        """The server's run_id (a new one at every start), None where INFO does not say."""
        try:
            return str(self._call(lambda: self._db.connection.info("server"), "INFO").get("run_id"))
        except PipelineError:
            return None

    def _bulk(self, n_nodes: int, n_edges: int, node_blobs: list[bytes], edge_blobs: list[bytes]) -> None:
        # GRAPH.BULK appends to an existing graph; BEGIN (only allowed on a missing key) creates it
        conn = self._db.connection
        self._mark_dirty()
        if self.before_write is not None:
            self.before_write(sum(map(len, node_blobs)) + sum(map(len, edge_blobs)))
        begin = [] if self._call(lambda: conn.exists(self.graph), "EXISTS") else ["BEGIN"]
        self._call(
            lambda: conn.execute_command(
                "GRAPH.BULK",
                self.graph,
                *begin,
                n_nodes,
                n_edges,
                len(node_blobs),
                len(edge_blobs),
                *node_blobs,
                *edge_blobs,
            ),
            "GRAPH.BULK",
            write=True,
        )
        self._ensure_durable("GRAPH.BULK")

    def _save(self) -> None:
        """With ``snapshot_on_checkpoint``: a synchronous SAVE, no fork; otherwise the server's own
        persistence applies (the embedded server's append-only file)."""
        if self.snapshot_on_checkpoint:
            self._call(lambda: self._db.connection.save(), "SAVE")
        if self.on_checkpoint is not None:
            self.on_checkpoint()

    def _after_batch(self) -> None:
        # at most every few seconds: the check stats the server's log files
        if self.on_checkpoint is not None and time.monotonic() - getattr(self, "_compacted_at", 0.0) > 5.0:
            self._compacted_at = time.monotonic()
            self.on_checkpoint()

    def _twin(self) -> FalkorDBStore:
        # the client's graph object is not meant to be shared between threads: the renewal gets its own
        return self.fresh(self.graph)

    def _disconnect(self) -> None:
        prober = self.__dict__.pop("_prober", None)
        if prober is not None:
            try:
                prober.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is not an error
                pass
        db = getattr(self, "_db", None)
        if db is not None:
            try:
                db.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is not an error
                pass
            self._db = None


def _preflight(host: str, port: int, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A PING in the Redis protocol before the client is built: a port that takes the connection and
    never answers, or answers in another protocol (HTTP), is one StoreUnavailable line instead of a hang
    or a traceback."""
    import socket

    where = f"{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = s.recv(64)
    except TimeoutError:
        raise StoreUnavailable(
            f"{where} took the connection but did not answer a PING in {timeout_s:g} s: not a FalkorDB server, "
            "or a hung one"
        ) from None
    except OSError as exc:
        raise StoreUnavailable(
            f"cannot reach FalkorDB at {where} ({exc.strerror or exc}); start the embedded server with "
            "`pipeline store start` or pass another --store URI"
        ) from None
    if not reply:
        raise StoreUnavailable(f"{where} closed the connection without an answer: not a FalkorDB server")
    if reply[:1] not in (b"+", b"-"):
        said = reply.split(b"\r\n")[0][:40].decode("ascii", "replace")
        raise StoreUnavailable(f"{where} answers, but not as a FalkorDB (Redis protocol) server: it said {said!r}")


def _not_sent(exc: BaseException) -> bool:
    """Whether a client error came from opening the connection (so the command was never sent)."""
    return "connecting to" in str(exc)


def _cstr(s: str) -> bytes:
    """A GRAPH.BULK string property value: type tag, UTF-8, NUL terminator."""
    return bytes([_BI_STRING]) + s.encode("utf-8") + b"\0"


def _header(name: str, props: Sequence[str]) -> bytes:
    """A GRAPH.BULK blob header: NUL-terminated label/type, uint32 property count, NUL-terminated keys."""
    return (
        name.encode("utf-8")
        + b"\0"
        + struct.pack("<I", len(props))
        + b"".join(p.encode() + b"\0" for p in props)
    )


def _short(text: str, n: int = 200) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[:n] + "..."
