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
comprehension, ``UNWIND`` or a string ``*``/``+`` at the top): browsing statements pay nothing. A trial lasts
:data:`TRIAL_S` at most, or the statement's own time limit if shorter (then the statement goes on to the
store); it costs a server start (0.1 to 0.4 s measured) and the statement's run on an empty graph. Where no trial server can be started (no room for its folder), the
statement goes on untried.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.store.statement import strip_comments

# seconds a trial may run before its server is killed and the statement goes on to the store (a nested
# comprehension of ranges took 5 s to reach a 1 GiB cap here)
TRIAL_S = 10.0
_BUILDS = re.compile(r"\b(?:range|reduce|collect)\s*\(|\bUNWIND\b|\[[^\]|]*\bIN\b[^\]]*\|", re.IGNORECASE)


def worth_trying(statement: str) -> bool:
    """Whether a statement can build a large value (see the module's text)."""
    return bool(_BUILDS.search(strip_comments(statement)))


def trial(statement: str, params: dict[str, Any] | None, timeout_s: float | None = None) -> str | None:
    """Run ``statement`` once on a throw-away server capped like the store's (PIPELINE_STORE_MEMORY), for
    :data:`TRIAL_S` or the statement's own ``timeout_s`` if shorter; returns why it must not run on the
    store (it ended that server at its memory cap), else None."""
    import pipeline.store.embedded as embedded
    from pipeline.store.falkordb_store import FalkorDBStore

    if not worth_trying(statement):
        return None
    folder = Path(tempfile.mkdtemp(prefix="pipeline-trial-"))
    proc = None
    try:
        try:
            info, proc = embedded.launch(folder / "store", persist=False)
        except (PipelineError, OSError):
            return None  # no trial server here: the statement goes on untried
        budget = min(TRIAL_S, timeout_s or TRIAL_S)
        timer = threading.Timer(budget + 2.0, lambda: _kill(proc))  # (its own limit first, then this)
        timer.start()
        try:
            store = FalkorDBStore(info.host, info.port, "trial", **embedded.login(info))
            try:
                store.execute(statement, params, min(budget, store.statement_timeout_s))
            finally:
                store._disconnect()
        except StoreUnavailable:
            pass  # ended: by its memory cap (read below), or by the timer
        except PipelineError:
            return None  # the store will say the same (a syntax error, a time limit, ...)
        finally:
            timer.cancel()
        lines = embedded.server_log(info)
        asked = embedded.health.oom_bytes(lines)
        if asked is None:
            return None
        return (f"in a trial run on an empty server with the store's memory cap of {embedded.memory_cap_text()}, "
                f"this statement ran out of it (the allocation that failed: {asked:,} bytes) and ended that "
                "server: it would end the store's server too; nothing was run on the store. Make it smaller "
                "(or raise the cap)")
    finally:
        if proc is not None:
            _kill(proc)
        shutil.rmtree(folder, ignore_errors=True)


def _kill(proc: Any) -> None:
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
