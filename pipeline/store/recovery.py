"""What a client of the embedded store does when its server misbehaves, given to each FalkorDBStore on
it by :func:`attach` (``open_store("embedded")``):

- a server that stopped answering a call (SIGSTOP, a deadlock: :mod:`pipeline.store.liveness`) is killed
  and started again from its append-only file, and the store follows it (:func:`restart_unresponsive`);
- a lost one says why it ended, from its log (out of its memory cap, killed, ...);
- a write is refused while the disk of its append-only file is full (:func:`check_disk`), and a write the
  server acknowledged but could not append stops the server, so nothing of it remains (:func:`drop_unsaved`);
- after an ingest or write-back lost the store at its commit, ``store.recover()`` starts it again to ask
  whether the commit is in;
- a writer's checkpoint compacts the append-only file (:func:`pipeline.store.embedded.compact`).

The server itself (starting, stopping, its state, its log) is :mod:`pipeline.store.embedded`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pipeline.store.auth as auth
import pipeline.store.health as health
from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store.embedded import (
    ServerInfo,
    _FolderLock,
    _forget,
    _kill,
    _probe,
    _reap,
    _recorded,
    compact,
    describe_unresponsive,
    ensure_running,
    is_our_server,
    why_ended,
)

# A write is refused (nothing written) while the disk of the append-only file has less than this free:
# on a full disk Redis acknowledges a write it could not append, keeps it in memory only and retries, so a
# kill -9 in between loses it (tried: 2,000 acknowledged nodes gone). A write that fills the disk anyway
# (another program took the space meanwhile) is caught after it: see FalkorDBStore's durability check.
MIN_FREE_BYTES = 16 << 20


def unresponsive(info: ServerInfo) -> str:
    """What a server that stopped answering is doing: ``suspended``, ``hung`` or ``busy`` (one look of a
    second at its main thread, :func:`health.sample`)."""
    seen = health.sample(info.pid, 1.0)
    return {"suspended": "suspended", "idle": "hung"}.get(seen, "busy")


def restart_unresponsive(info: ServerInfo, why: str) -> ServerInfo | None:
    """A call found the server of ``info`` not answering (``why``): kill it (SIGKILL, its data is in the
    append-only file) and start it again. Returns the server now running, or None when none could be
    started. Nothing happens to a server that answers again meanwhile (continued after a SIGSTOP), or to
    one that is no longer the recorded one (another command restarted it already)."""
    folder = Path(info.data_dir)
    with _FolderLock(folder):
        recorded = _recorded(folder)
        creds = auth.read(folder)
        if (recorded is not None and recorded.pid == info.pid and is_our_server(info, listening=False)
                and creds is not None and _probe(info.host, info.port, creds, 1.0) != "up"):
            _kill(info)
            _forget(folder, info.pid)
    try:
        return ensure_running(folder.parent)[0]
    except PipelineError:
        return None


def check_disk(info: ServerInfo, need: int = 0) -> None:
    """Refuse a write (StoreUnavailable, nothing written) when the disk that holds the store's append-only
    file has less than :data:`MIN_FREE_BYTES` plus ``need`` bytes free: a write the server could not put
    into its file would be acknowledged and then lost at a kill -9 (Redis answers before it retries)."""
    folder = Path(info.data_dir)
    try:
        st = os.statvfs(folder)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES + need:
        raise StoreUnavailable(
            f"the disk that holds the store ({folder}) is full ({free / (1 << 20):.1f} MiB free, a write needs "
            f"{(MIN_FREE_BYTES + need) / (1 << 20):.0f} MiB): nothing was written; free some space there and "
            "run it again"
        )


def drop_unsaved(info: ServerInfo) -> str:
    """A write the server acknowledged did not reach its append-only file (its disk filled up meanwhile):
    kill the server before anything else can read it, so nothing of that write remains (the next command
    starts it again from its file). Returns the line that says so."""
    _kill(info)
    _forget(Path(info.data_dir), info.pid)
    return ("the store could not write it into its append-only file (its disk "
            f"{Path(info.data_dir)} is full or failing), so the server (pid {info.pid}) was stopped and nothing "
            "of this write was kept; free some space there and run it again (the next command starts the store "
            "again from its file)")


# ------------------------------------------------------------------------------------------ launching
def attach(store, info: ServerInfo) -> None:
    """Give a FalkorDBStore on the embedded server of ``info`` the server's hooks: a server that stopped
    answering is restarted (the store follows it), a lost one says why it ended (its log), a write is
    refused while the disk is full and stops the server when it was acknowledged but not appended, and a
    writer's checkpoint compacts the append-only file."""

    def on_unresponsive(why: str) -> str:
        old = store.server
        kind = unresponsive(old)
        new = restart_unresponsive(old, why)
        if new is None:
            return f"{describe_unresponsive(kind)}, {why}; it could not be started again: run `pipeline store start`"
        follow(store, new)
        return f"{describe_unresponsive(kind)}, {why}; killed it and started it again from its append-only file (pid {new.pid})"

    def on_lost() -> str:
        old = store.server
        deadline = time.monotonic() + 5.0  # a server that aborts writes its bug report first
        while is_our_server(old, listening=False) and time.monotonic() < deadline:
            _reap(old.pid)
            time.sleep(0.05)
        return "" if is_our_server(old, listening=False) else why_ended(old)

    def on_gone() -> bool:
        old = store.server
        creds = auth.read(Path(old.data_dir))
        if is_our_server(old, listening=False) and creds is not None and _probe(old.host, old.port, creds) != "down":
            return False  # it runs: the connection failed for another reason
        follow(store, ensure_running(Path(old.data_dir).parent)[0])
        return True

    store.server = info
    store.on_unresponsive = on_unresponsive
    store.on_gone = on_gone
    store.on_lost = on_lost
    store.before_write = lambda need: check_disk(store.server, need)
    store.on_not_durable = lambda: drop_unsaved(store.server)
    store.require_durable = True
    store.on_checkpoint = lambda: compact(store.server)


def follow(store, info: ServerInfo) -> None:
    """Point a FalkorDBStore at the server of ``info`` (started again, maybe on another port). Every
    connection to the server before it leaves the pool: a disconnected connection object keeps its own
    host and port, and one handed to the next statement reconnected to the old port ("Connection
    refused": the statement failed as "had ended before this statement was sent", in about half the runs
    of the stopped-server test). A connection still in use when it comes back is not taken back."""
    store.server = info
    if (store.host, store.port) != (info.host, info.port):
        store.host, store.port = info.host, info.port
        store.uri = f"falkordb://{info.host}:{info.port}/{store.graph}"
        store._pool.connection_kwargs.update(host=info.host, port=info.port)
    store._pool.disconnect(inuse_connections=True)
    store._pool.reset()  # (redis-py: a connection released after this is dropped, not pooled)
    prober = store.__dict__.pop("_prober", None)
    if prober is not None:
        prober.close()


