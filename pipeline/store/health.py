"""What the embedded server is doing when it does not answer, and why a server ended: read from the
operating system (its main thread's state and CPU time, Linux /proc) and from its own log, never from the
server itself (a silent server answers nothing).

A server that took a connection and answers nothing is one of:

- ``loading``: its main thread runs (state R, or D on its disk) and its log has no "Ready to accept
  connections" yet: it replays one long statement of its append-only file (waited for);
- ``busy``: its main thread runs after it was ready (a long command on the main thread; waited for);
- ``suspended``: the process is stopped by a signal (SIGSTOP, a debugger): it answers again once continued;
- ``hung``: its main thread has not run for a while, waiting (state S) on something that never comes: a
  deadlock (FalkorDB 4.16.3 was seen with every thread in a futex wait, the main thread taking the write
  lock of the module's graph list in Globals_AddGraph).

The log tells why a server process ended: out of its memory cap (Redis: "Out Of Memory allocating N
bytes"), a crash (a bug report), its disk (an append-only file it could not write), a shutdown, or nothing
(kill -9, or the system's out-of-memory killer).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import pipeline.store.liveness as liveness

READY = "Ready to accept connections"
_OOM = re.compile(r"Out Of Memory allocating (\d+) bytes")


@dataclass(frozen=True)
class Activity:
    """The main thread of a process: its state letter (R running, S waiting, D on its disk, T/t stopped,
    Z/X gone; "" unknown) and the CPU time it has used, in nanoseconds (-1 unknown)."""

    state: str
    run_ns: int


def main_thread(pid: int) -> Activity:
    """The state and CPU time of ``pid``'s main thread (Linux /proc; ``Activity("", -1)`` elsewhere)."""
    task = Path(f"/proc/{pid}/task/{pid}")
    try:
        state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return Activity("", -1)
    try:
        run_ns = int((task / "schedstat").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        try:  # utime + stime in clock ticks, when the kernel keeps no schedstat
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            run_ns = (int(fields[11]) + int(fields[12])) * 10_000_000
        except (OSError, IndexError, ValueError):
            run_ns = -1
    return Activity(state, run_ns)


class Silence:
    """Watches a server that does not answer, one :meth:`update` per look, and says what it is doing
    (see the module's list). ``ready``: its log says it finished loading."""

    def __init__(self, pid: int, hung_after_s: float | None = None) -> None:
        # (the same bound as a call's: liveness.HUNG_AFTER_S)
        self.pid = pid
        self.hung_after_s = liveness.HUNG_AFTER_S if hung_after_s is None else hung_after_s
        self.since = time.monotonic()
        self.last_run_ns = -1
        self.idle_since = self.since
        self.stopped_since: float | None = None
        self.state = ""  # the main thread's state at the last look

    def update(self, ready: bool) -> str:
        """``loading``, ``busy``, ``suspended``, ``hung`` (each only once its condition held for the
        hung time, when it is ``suspended`` or ``hung``), or ``waiting`` (not decided yet)."""
        now = time.monotonic()
        act = main_thread(self.pid)
        self.state = act.state
        if act.state in ("T", "t"):
            self.stopped_since = self.stopped_since if self.stopped_since is not None else now
            return "suspended" if now - self.stopped_since >= self.hung_after_s else "waiting"
        self.stopped_since = None
        if act.state == "":  # no /proc here: nothing tells a hung server from a loading one
            return "busy" if ready else "loading"
        ran = act.state in ("R", "D") or (self.last_run_ns >= 0 and act.run_ns > self.last_run_ns)
        self.last_run_ns = act.run_ns
        if ran:
            self.idle_since = now
            return "busy" if ready else "loading"
        return "hung" if now - self.idle_since >= self.hung_after_s else "waiting"


def sample(pid: int, seconds: float = 1.0) -> str:
    """One look at a silent server over ``seconds`` (``pipeline store status``): ``suspended`` (stopped by
    a signal), ``running`` (its main thread ran meanwhile), ``idle`` (it did not run at all: a hung server
    does not, a healthy idle one wakes ten times a second), or ``unknown`` (no /proc)."""
    first = main_thread(pid)
    if first.state in ("T", "t"):
        return "suspended"
    time.sleep(seconds)
    second = main_thread(pid)
    if second.state in ("T", "t"):
        return "suspended"
    if first.run_ns < 0 or second.run_ns < 0:
        return "unknown"
    if second.state in ("R", "D") or second.run_ns != first.run_ns:
        return "running"
    return "idle"


def log_lines(text: str, pid: int) -> list[str]:
    """The lines of the server log ``text`` written by process ``pid`` (Redis prefixes them "PID:role")."""
    prefix = f"{pid}:"
    return [line for line in text.splitlines() if line.startswith(prefix)]


def is_ready(lines: list[str]) -> bool:
    """Whether a server's own log lines say it finished loading and takes commands."""
    return any(READY in line for line in lines)


def oom_bytes(lines: list[str]) -> int | None:
    """The size of the allocation that made the server end at its memory cap, when its log says so."""
    for line in reversed(lines):
        m = _OOM.search(line)
        if m:
            return int(m.group(1))
    return None


def ended_because(lines: list[str], memory_cap: str) -> str:
    """Why a server process ended, from its own log lines: one phrase for a message. ``memory_cap`` names
    the cap (e.g. "1.0 GiB (PIPELINE_STORE_MEMORY)")."""
    asked = oom_bytes(lines)
    if asked is not None:
        return (f"it ran out of its memory cap of {memory_cap} (the allocation that failed: {asked:,} bytes) "
                "and ended; nothing of the statement that did it was kept")
    text = "\n".join(lines[-400:])
    if "AOF write error" in text or "Short write while writing to the AOF" in text or "No space left" in text:
        return "it could not write its append-only file (its disk is full or failing)"
    if "REDIS BUG REPORT" in text or "crashed by signal" in text:
        return "it crashed (a bug report is in its log)"
    if "ready to exit, bye bye" in text:
        return "it was shut down"
    return "it was killed without a word in its log (kill -9, or the system's out-of-memory killer)"
