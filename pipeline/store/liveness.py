"""No wait on a store without a bound: while a call to a server is in flight for more than
:data:`PROBE_AFTER_S`, one thread of the process asks that server, on a connection of its own, whether it
still answers (a PING, a Bolt handshake); once it has answered nothing for :data:`HUNG_AFTER_S`, or the
call passed its own deadline, the call's connection is broken and the call ends with the reason
(:attr:`Watch.tripped`) instead of waiting on its socket.

A long statement is not cut by this: FalkorDB and Neo4j run a statement on worker threads and keep
answering PINGs meanwhile (its own time limit ends it). What is cut is a server that took the connection
and stopped answering everything: stopped by a signal (SIGSTOP), deadlocked (a FalkorDB 4.16 server was
seen with every thread waiting on a lock), or out of reach.

One daemon thread serves every :class:`Watch` of the process; it runs only while a call is in flight, and
a call costs its caller a lock and a dict entry, no thread.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# a server that answered no probe for this long while a call waited on it has stopped answering
HUNG_AFTER_S = 15.0
# a call in flight this long gets its server probed, then every PROBE_EVERY_S
PROBE_AFTER_S = 2.0
PROBE_EVERY_S = 2.0
# how long one probe waits for its answer
PROBE_TIMEOUT_S = 2.0

# probe(timeout_s) -> True: it answered (any reply, an error included); False: no answer in time;
# None: nothing listens any more (refused): the call ends by itself, nothing to cut
Probe = Callable[[float], "bool | None"]


class Watch:
    """The calls of one connection (one Store). ``probe`` asks the server whether it answers (on a
    connection of its own); ``abort`` breaks the connection the call waits on (from another thread), so
    the call raises at once. After a call raised, :attr:`tripped` says why it was cut (None: it was not)."""

    def __init__(self, probe: Probe, abort: Callable[[], None]) -> None:
        self.probe, self.abort = probe, abort
        self.tripped: str | None = None

    @contextmanager
    def call(self, deadline_s: float | None = None) -> Iterator[None]:
        """Mark a call in flight (not re-entrant per thread: a nested call is watched as its outer one).
        ``deadline_s``: cut it after that long even while the server answers probes (None: no such cut)."""
        if getattr(_local, "depth", 0):
            _local.depth += 1
            try:
                yield
            finally:
                _local.depth -= 1
            return
        self.tripped = None
        key = _register(_Call(self, time.monotonic(), deadline_s))
        _local.depth = 1
        try:
            yield
        finally:
            _local.depth = 0
            _unregister(key)


@dataclass
class _Call:
    watch: Watch
    started: float
    deadline_s: float | None
    last_answer: float = 0.0
    last_probe: float = 0.0
    cut_at: float | None = None
    done: bool = field(default=False)

    def __post_init__(self) -> None:
        self.last_answer = self.started


_local = threading.local()
_cond = threading.Condition()
_calls: dict[int, _Call] = {}
_keys = itertools.count()
_thread: threading.Thread | None = None


def _register(call: _Call) -> int:
    global _thread
    key = next(_keys)
    with _cond:
        _calls[key] = call
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_watch_loop, name="store liveness", daemon=True)
            _thread.start()
        _cond.notify()
    return key


def _unregister(key: int) -> None:
    with _cond:
        call = _calls.pop(key, None)
        if call is not None:
            call.done = True


def _watch_loop() -> None:
    while True:
        with _cond:
            while not _calls:
                _cond.wait()
            pending = list(_calls.values())
        for call in pending:
            _check(call)
        with _cond:
            _cond.wait(0.25)


def _check(call: _Call) -> None:
    now = time.monotonic()
    if call.done:
        return
    if call.cut_at is not None:
        if now - call.cut_at >= PROBE_EVERY_S:  # still waiting: break it again (a reconnect in between)
            call.cut_at = now
            _abort(call)
        return
    if call.deadline_s is not None and now - call.started > call.deadline_s:
        _cut(call, f"no reply within {call.deadline_s:g} s")
        return
    if now - call.started < PROBE_AFTER_S or now - call.last_probe < PROBE_EVERY_S:
        return
    call.last_probe = now
    try:
        answered = call.watch.probe(PROBE_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - a probe that fails in an unforeseen way is no answer
        answered = False
    now = time.monotonic()
    if answered is not False:
        call.last_answer = now
    elif now - call.last_answer >= HUNG_AFTER_S and not call.done:
        _cut(call, f"no answer to a PING for {now - call.last_answer:.0f} s")


def _cut(call: _Call, why: str) -> None:
    call.watch.tripped = why
    call.cut_at = time.monotonic()
    _abort(call)


def _abort(call: _Call) -> None:
    try:
        call.watch.abort()
    except Exception:  # noqa: BLE001 - breaking a connection that is gone already is not an error
        pass
