"""FalkorDB through its native client (exact commands, real error messages): the embedded default and
CI backend. Bulk loads use the server's GRAPH.BULK binary endpoint, ~10x faster than UNWIND batches."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store.base import CONF_COLUMNS, CypherError, RelationFacts, Store, plain
from pipeline.store.cypher import cypher_text

DEFAULT_GRAPH = "pipeline"
# GRAPH.BULK property type tags (FalkorDB src/bulk_insert/bulk_insert.c)
_BI_STRING, _BI_LONG, _BI_DOUBLE = 3, 4, 2
# edges per GRAPH.BULK command: bounds the request size (~60 B/edge) and keeps the progress bar moving
_BULK_EDGES = 50_000


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
        timeout_s: float = 600.0,
        username: str | None = None,
    ) -> None:
        import redis
        from falkordb import FalkorDB
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        if not graph:
            raise PipelineError("empty FalkorDB graph name")
        self.host, self.port, self.graph, self.bulk = host, int(port), graph, bulk
        self.uri = f"falkordb://{host}:{port}/{graph}"
        self._password, self._username = password, username
        try:
            self._db = FalkorDB(
                host=host,
                port=int(port),
                username=username,
                password=password,
                socket_connect_timeout=5,
                socket_timeout=timeout_s,
                # one quick reconnect (an idle connection the server dropped), not redis-py's default
                # backoff of seconds before a dead server is reported
                retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1),
            )
            self._db.connection.ping()
        except (redis.exceptions.AuthenticationError, redis.exceptions.AuthenticationWrongNumberOfArgsError) as exc:
            raise StoreUnavailable(f"FalkorDB at {host}:{port} refused the credentials: {exc}") from None
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
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
        self._graph = self._db.select_graph(graph)
        # (dataset, node id per eid) for GRAPH.BULK
        self._node_ids: tuple[str, np.ndarray] | None = None
        # a synchronous SAVE at each checkpoint, for a server that persists nothing by itself (the
        # embedded one has its append-only file instead: nothing to do there)
        self.snapshot_on_checkpoint = False

    def fresh(self, graph: str | None = None) -> FalkorDBStore:
        """A new connection to the same server on another graph (default: a unique new name)."""
        import uuid

        return FalkorDBStore(
            self.host, self.port, graph or f"g_{uuid.uuid4().hex[:12]}", self._password, self.bulk,
            username=self._username,
        )

    # ------------------------------------------------------------------------------------------ queries
    def _execute(self, cypher: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
        return self._call(lambda: self._rows(self._graph.query(cypher, params)), cypher)

    def _call(self, fn: Any, what: str) -> Any:
        import redis

        try:
            return fn()
        except redis.exceptions.ResponseError as exc:
            raise CypherError(f"FalkorDB rejected the query: {exc}\n  query: {_short(what)}") from None
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            raise StoreUnavailable(f"lost FalkorDB at {self.host}:{self.port}: {exc}") from None

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
        import redis

        self._mark_dirty()
        try:
            self._graph.delete()
        except redis.exceptions.ResponseError:
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
                self._bulk(0, len(part), [], [header + part.tobytes()])
                if progress is not None:
                    progress.update(len(part))

    def _entity_ids(self, dataset: str) -> np.ndarray:
        """Internal node id per eid of the data set (-1 where missing): GRAPH.BULK edges name node ids."""
        if self._node_ids is not None and self._node_ids[0] == dataset:
            return self._node_ids[1]
        rows = self.run(cypher_text("falkordb_entity_ids"), {"dataset": dataset})
        eid = np.fromiter((r["eid"] for r in rows), np.int64, len(rows))
        nid = np.fromiter((r["id"] for r in rows), np.int64, len(rows))
        ids = np.full(int(eid.max()) + 1 if len(eid) else 0, -1, dtype=np.int64)
        ids[eid] = nid
        self._node_ids = (dataset, ids)
        return ids

    def _bulk(self, n_nodes: int, n_edges: int, node_blobs: list[bytes], edge_blobs: list[bytes]) -> None:
        # GRAPH.BULK appends to an existing graph; BEGIN (only allowed on a missing key) creates it
        conn = self._db.connection
        self._mark_dirty()
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
        )

    def _save(self) -> None:
        """With ``snapshot_on_checkpoint``: a synchronous SAVE, no fork; otherwise the server's own
        persistence applies (the embedded server's append-only file)."""
        if self.snapshot_on_checkpoint:
            self._call(lambda: self._db.connection.save(), "SAVE")

    def _twin(self) -> FalkorDBStore:
        # the client's graph object is not meant to be shared between threads: the renewal gets its own
        return self.fresh(self.graph)

    def _disconnect(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            try:
                db.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is not an error
                pass
            self._db = None


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
