"""Fresh processes as a user starts them, and the peak memory of a process tree (a helper, no benchmark)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `pipeline ...` run from a given checkout (this one, or the code before a change unpacked beside it)
CLI = "import sys; from pipeline.cli import main; sys.argv[0] = 'pipeline'; main()"


def pipeline_argv(*args: str) -> list[str]:
    """The argv of ``pipeline ARGS`` in a new interpreter."""
    return [sys.executable, "-c", CLI, *args]


def env(root: Path = ROOT, **extra: str) -> dict[str, str]:
    """This environment with ``root`` first on PYTHONPATH (its ``pipeline`` is imported) and ``extra`` set."""
    path = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, **extra}


def error_line(stderr: str, rc: int) -> str:
    """A failed command's ``error: ...`` line (bars share its stderr), else its last line, else its status."""
    lines = [x for x in stderr.replace("\r", "\n").splitlines() if x.strip()]
    errors = [x[x.index("error:") :] for x in lines if "error:" in x]
    return errors[-1] if errors else lines[-1] if lines else f"exit status {rc}"


def _children(pid: int) -> list[int]:
    """pid and its descendants, from /proc/PID/task/TID/children (Linux; no scan of /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return out


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakMemory:
    """The peak of the summed proportional set size of a process tree, sampled every ``every`` seconds in
    a thread (pages the workers share counted once); Linux only (``stop`` returns None elsewhere)."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every, self.peak = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.supported = os.path.exists("/proc/self/smaps_rollup")
        if self.supported:
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(_pss(p) for p in _children(self.pid)))
            self._stop.wait(self.every)

    def stop(self) -> int | None:
        self._stop.set()
        if self.supported:
            self._thread.join()
        return self.peak if self.supported else None
