"""A named lock held by the store itself, so writers serialise wherever they run (two shells, two machines
against one server): ``with store.lock("dataset:ppi5k", purpose="ingest"): ...``.

The lock is a ``(:Lock {name, owner, host, pid, purpose, since, expires})`` node (times in ms since the
epoch; no owner = free; the node stays after release), taken by ONE compare-and-set query in the Cypher
subset of Neo4j 5 and FalkorDB (cypher/lock_acquire.cypher). That query first writes the node, which
takes the write lock (FalkorDB: its graph's, at a query's first write, held to the query's end; Neo4j: the
node's), and only then reads the owner, so two clients can never both see it free. Creating the node is
a separate MERGE (cypher/lock_ensure.cypher) because a MERGE's match runs before any lock: two first-time
MERGEs can create two nodes (seen on FalkorDB), which is harmless since the lock is taken only when every
node of the name is free, and then on all of them.

While held, a daemon thread renews the lease every third of it on a connection of its own; a holder that
dies stops renewing, and its lock is taken over once the lease has passed, or at once by a client on the
same host that sees the holder's pid is gone (a kill -9). A waiter polls with backoff up to its timeout,
then fails with one line naming the holder. Re-entering a lock on the same Store does not wait (so
threads that must exclude each other each use a Store of their own, as processes do). Leaving
the outermost scope checkpoints the store (see Store.checkpoint) before releasing, so whatever was written
under the lock is durable once the next writer can get it; on the embedded server every acknowledged
write, the release included, is in its append-only file already, so a release survives a kill -9 too.

Clocks: leases compare the waiter's clock with the holder's; hosts sharing one server should keep their
clocks within a fraction of the lease (NTP does).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pipeline.core.config import env_number
from pipeline.core.errors import PipelineError
from pipeline.store.cypher import cypher_text

TIMEOUT_ENV = "PIPELINE_LOCK_TIMEOUT"  # seconds a waiter waits by default
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_LEASE_S = 120.0  # long next to a renewal period (lease / 3) plus one slow write in the queue
MAX_POLL_S = 1.0


class StoreLocked(PipelineError):
    """Another client held the lock for longer than this one would wait; names the holder."""


class StoreLockLost(PipelineError):
    """The lock was taken from its holder while it worked (its lease ran out, or someone removed it)."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as its node says."""

    name: str
    owner: str
    host: str | None
    pid: int | None
    purpose: str | None
    since_ms: int | None
    expires_ms: int | None

    def describe(self) -> str:
        who = f"{self.purpose or 'a writer'} (pid {self.pid} on host {self.host}, owner {self.owner[:8]}"
        if self.since_ms is not None:
            who += f", since {_clock(self.since_ms)}"
        if self.expires_ms is not None:
            who += f", lease until {_clock(self.expires_ms)}"
        return who + ")"

    def dead_here(self) -> bool:
        """True when the holder ran on this host and its process is gone (killed before releasing)."""
        from pipeline.store.embedded import pid_alive

        return self.host == socket.gethostname() and self.pid is not None and not pid_alive(int(self.pid))


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def now_ms() -> int:
    return int(time.time() * 1000)


def default_timeout_s() -> float:
    """PIPELINE_LOCK_TIMEOUT when set (seconds, >= 0), else DEFAULT_TIMEOUT_S."""
    # `not v >= 0` also rejects NaN
    return env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, float, lambda v: v >= 0, "a number of seconds >= 0")


class StoreLock:
    """One scope of a named lock on one Store; made by :meth:`Store.lock`, used as a context manager."""

    def __init__(
        self,
        store: Any,
        name: str,
        purpose: str,
        timeout_s: float | None = None,
        lease_s: float | None = None,
        progress: bool | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise PipelineError("a store lock needs a non-empty name")
        timeout_s = default_timeout_s() if timeout_s is None else float(timeout_s)
        lease_s = DEFAULT_LEASE_S if lease_s is None else float(lease_s)
        if not timeout_s >= 0:
            raise PipelineError(f"lock timeout must be a number of seconds >= 0, got {timeout_s}")
        if not lease_s > 0:
            raise PipelineError(f"lock lease must be a number of seconds > 0, got {lease_s}")
        self.store, self.name, self.purpose = store, name, purpose
        self.timeout_s, self.lease_s = timeout_s, lease_s
        self.progress = progress  # None: a waiting bar only on a terminal (tqdm's rule)
        self.owner = store.lock_owner
        self.lost: Holder | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._outer: StoreLock | None = None  # the scope that really holds it, when this one re-enters

    # ------------------------------------------------------------------------------------------ scope
    def __enter__(self) -> StoreLock:
        held = self.store._held_locks
        if self.name in held:
            self._outer = held[self.name]
            self._outer._depth += 1
            return self._outer
        self._acquire()
        self._depth = 1
        held[self.name] = self
        self._beat = threading.Thread(target=self._renew_loop, name=f"lock {self.name}", daemon=True)
        self._beat.start()
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        holder = self._outer or self
        holder._depth -= 1
        if holder._depth > 0:
            return
        del self.store._held_locks[holder.name]
        holder._stop.set()
        if holder._beat is not None:
            holder._beat.join()
        try:
            if self.store.dirty:
                self.store.checkpoint()  # durable before the next writer can come in
        finally:
            try:
                released = _count(self.store._run_untracked(cypher_text("lock_release"), holder._params()))
            except PipelineError:
                if exc_type is None:
                    raise
                released = 1  # the error already on its way out says more; the lease frees the lock
            if not released and holder.lost is None:
                holder.lost = self.holder() or Holder(holder.name, "(nobody)", None, None, None, None, None)
        if holder.lost is not None and exc_type is None:
            raise StoreLockLost(
                f"lost the store lock '{holder.name}' during {holder.purpose}: it is now held by "
                f"{holder.lost.describe()}; another writer may have changed the same data, run it again"
            )

    # ------------------------------------------------------------------------------------------ steps
    def _params(self, **extra: Any) -> dict[str, Any]:
        return {"name": self.name, "owner": self.owner, **extra}

    def _try(self, stale: str | None) -> bool:
        return 0 < _count(
            self.store._run_untracked(
                cypher_text("lock_acquire"),
                self._params(
                    stale=stale,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    purpose=self.purpose,
                    now=now_ms(),
                    lease=int(self.lease_s * 1000),
                ),
            )
        )

    def holder(self, via: Any = None) -> Holder | None:
        """The current holder of this lock's name, or None when it is free (read through ``via``, by
        default this lock's store)."""
        rows = (via or self.store)._run_untracked(cypher_text("lock_holder"), {"name": self.name})
        if not rows:
            return None
        r = rows[0]
        return Holder(self.name, r["owner"], r["host"], r["pid"], r["purpose"], r["since"], r["expires"])

    def _acquire(self) -> None:
        self.store._run_untracked(cypher_text("lock_ensure"), {"name": self.name})
        start = time.monotonic()
        stale: str | None = None
        delay = 0.05
        bar: Any | None = None
        try:
            while True:
                if self._try(stale):
                    return
                holder = self.holder()
                if holder is None:
                    continue  # released between the two queries: try again at once
                if holder.owner != stale and holder.dead_here():
                    stale = holder.owner  # the next try may take it over (only from that owner)
                    continue
                waited = time.monotonic() - start
                if waited >= self.timeout_s:
                    raise StoreLocked(
                        f"the store {self.store.uri} is locked: '{self.name}' is held by {holder.describe()}; "
                        f"waited {self.timeout_s:g} s for {self.purpose}. Retry when it is done, or raise "
                        f"{TIMEOUT_ENV}"
                    )
                if bar is None:
                    from pipeline.core.progress import output

                    bar = output(self.progress is not False).bar(
                        total=round(self.timeout_s, 1),
                        unit="s",
                        desc=f"waiting for lock '{self.name}' held by {holder.purpose}",
                        disable=None if self.progress is None else False,  # None: on a terminal only
                        leave=False,
                    )
                time.sleep(min(delay, max(0.0, self.timeout_s - waited)))
                delay = min(delay * 2, MAX_POLL_S)
                bar.update(round(time.monotonic() - start, 1) - bar.n)
        finally:
            if bar is not None:
                bar.close()

    def _renew_loop(self) -> None:
        period = self.lease_s / 3
        try:
            twin = self.store._twin()
        except PipelineError:
            return  # the server is gone: the holder's own next query says so; the lease frees the lock
        try:
            while not self._stop.wait(period):
                try:
                    renewed = _count(
                        twin._run_untracked(
                            cypher_text("lock_renew"),
                            self._params(now=now_ms(), lease=int(self.lease_s * 1000)),
                        )
                    )
                except PipelineError:
                    continue  # the server may come back before the lease runs out; try next period
                if not renewed:
                    self.lost = self.holder(twin) or Holder(
                        self.name, "(nobody)", None, None, None, None, None
                    )
                    return
        finally:
            if twin is not self.store:
                twin.close()


def dataset_lock(dataset: str) -> str:
    """The lock name every writer of a data set's part of the graph takes (ingest; write-back and the
    sampling stage's (:Query) nodes should too): ``with store.lock(dataset_lock("ppi5k"), purpose=...)``."""
    return f"dataset:{dataset}"


def _count(rows: list[dict[str, Any]]) -> int:
    """The ``n`` of a lock query's one aggregate row (0 when it matched nothing)."""
    return int(rows[0]["n"]) if rows else 0


def new_owner() -> str:
    """A fresh owner token: one per Store, so two stores of one process exclude each other too."""
    return uuid.uuid4().hex
