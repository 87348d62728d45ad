"""A trial run of a statement a person types, on a throw-away FalkorDB server with no data and the store's
own memory limits, before it runs on the store: a statement that ends that server at its memory cap is
refused, so it never ends the store's server.

Why: FalkorDB counts a statement's memory only after each allocation succeeded and stops it only between
records, so a statement that grows memory inside one expression (a string or a list doubled in ``reduce``,
a comprehension of ranges) asks for ever larger blocks until one fails, and Redis then aborts the whole
server (measured: ``reduce(s = 'x', i IN range(1, 40) | s + s)`` under a 1 GiB cap asked for 267,911,169
bytes at once and ended it). A statement's blow-up that does not depend on the data is the same on an
empty graph, so one run there, on a server of its own, finds it; a blow-up that needs the store's data
(``range(1, n.size)`` with a huge stored value) is not found here, and the store's recovery covers it (the
next command starts the server again and says why it ended).

Only statements that can build a large value are tried (they name ``range``, ``reduce``, ``collect``, a list
comprehension, ``UNWIND`` or a string ``*``/``+`` at the top): browsing statements pay nothing. A trial runs
under the statement's own time limit, and its verdict does not depend on which limit a loaded machine
reaches first: a statement reaches the store only when its trial **finished** (with its result, or with an
error of its own that the store would give as well). One that ended the trial server (its memory cap, or
anything else), or did not finish within its time limit (stopped there by FalkorDB, or killed
:data:`KILL_MARGIN_S` after it when the server no longer checks its clock), is refused: on the store, with
its data, it would take at least as long. (A trial once lasted at most 10 s, and one that reached that
limit or its statement's own went on to the store untried: on a busy machine a blow-up that ends a
server in ~5 s could do that, and three of them ended the store's server in one of five runs of the
hostile probe.) A trial costs a server start (0.1 to 0.4 s measured) and the statement's run on an empty
graph, at most its own time limit. Where no trial server can be started (no room for its folder), the
statement goes on untried.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store.base import CypherError
from pipeline.store.statement import strip_comments

# seconds past the statement's own time limit after which the trial server is killed: FalkorDB checks a
# statement's clock between records, not inside one expression that grows
KILL_MARGIN_S = 2.0
_BUILDS = re.compile(r"\b(?:range|reduce|collect)\s*\(|\bUNWIND\b|\[[^\]|]*\bIN\b[^\]]*\|", re.IGNORECASE)


def worth_trying(statement: str) -> bool:
    """Whether a statement can build a large value (see the module's text)."""
    return bool(_BUILDS.search(strip_comments(statement)))


def trial(statement: str, params: dict[str, Any] | None, timeout_s: float | None = None) -> str | None:
    """Run ``statement`` once on a throw-away server capped like the store's (PIPELINE_STORE_MEMORY), under
    its own time limit ``timeout_s`` (default ``USER_TIMEOUT_S``); returns why it must not run on the store
    (it ended that server, or did not finish within its time limit), else None (it finished, or failed with
    an error of its own the store will give too, or no trial server could be started)."""
    import pipeline.store.embedded as embedded
    from pipeline.store.falkordb_store import FalkorDBStore
    from pipeline.store.statement import USER_TIMEOUT_S

    if not worth_trying(statement):
        return None
    limit = USER_TIMEOUT_S if timeout_s is None else float(timeout_s)
    folder = Path(tempfile.mkdtemp(prefix="pipeline-trial-"))
    proc = None
    try:
        try:
            info, proc = embedded.launch(folder / "store", persist=False)
        except (PipelineError, OSError):
            return None  # no trial server here: the statement goes on untried
        killed = threading.Event()

        def stop(p: Any = proc) -> None:
            killed.set()
            _kill(p)

        timer = threading.Timer(limit + KILL_MARGIN_S, stop)  # (its own limit first, then this)
        timer.start()
        try:
            store = FalkorDBStore(info.host, info.port, "trial", **embedded.login(info))
            try:
                store.execute(statement, params, min(limit, store.statement_timeout_s))
            finally:
                store._disconnect()
        except StoreUnavailable:
            pass  # the server ended: by the timer, by its memory cap or otherwise (said below)
        except CypherError as exc:
            if not _stopped_by_clock(exc):
                return None  # an error of its own (syntax, a type, its memory limit): the store says the same
            return _too_long(limit)
        except PipelineError:
            return None
        else:
            return None  # it finished: what it builds fits, whatever the machine's load
        finally:
            timer.cancel()
        if killed.is_set():
            return _too_long(limit)
        _reap_within(proc, 5.0)  # an aborting server writes its report first: read its log once it is gone
        if proc.poll() is None:  # it runs and gave no answer within the limit (the client gave up)
            return _too_long(limit)
        lines = embedded.server_log(info)
        asked = embedded.health.oom_bytes(lines)
        if asked is None:
            return ("in a trial run on an empty server with the store's memory cap of "
                    f"{embedded.memory_cap_text()}, this statement ended that server "
                    f"({embedded.health.ended_because(lines, embedded.memory_cap_text())}): it could end the "
                    "store's server too; nothing was run on the store")
        return (f"in a trial run on an empty server with the store's memory cap of {embedded.memory_cap_text()}, "
                f"this statement ran out of it (the allocation that failed: {asked:,} bytes) and ended that "
                "server: it would end the store's server too; nothing was run on the store. Make it smaller "
                "(or raise the cap)")
    finally:
        if proc is not None:
            _kill(proc)
        shutil.rmtree(folder, ignore_errors=True)


def _stopped_by_clock(exc: CypherError) -> bool:
    """Whether FalkorDB stopped the statement at its time limit (the store's line for it)."""
    return "stopped the statement at its time limit" in str(exc)


def _too_long(limit: float) -> str:
    from pipeline.store.base import Store

    return (f"in a trial run on an empty server, this statement did not finish within its time limit of {limit:g} s; "
            "on the store, with its data, it would take at least as long; nothing was run on the store. Give it "
            f"more time (`pipeline cypher --timeout`, up to {Store.statement_timeout_s:g} s) or make it smaller")


def _reap_within(proc: Any, seconds: float) -> None:
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:  # still writing: its log is read as it is
        pass


def _kill(proc: Any) -> None:
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
