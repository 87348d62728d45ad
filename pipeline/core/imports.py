"""Heavy modules imported whole. A KeyboardInterrupt that lands inside the first ``import torch`` (the
seconds of a notebook's first ``pl.run``, whose first use of ``pl`` imports the API and torch with it)
leaves torch half-initialised in ``sys.modules``: every later import of it fails ("partially initialized
module 'torch' has no attribute 'nn'") or crashes the interpreter until the kernel restarts; numba likewise.
:func:`import_whole` runs such a first import with Ctrl-C held: the interrupt is raised as soon as the
import is complete, so the call still stops where the person asked, and the process stays usable. Used by
``pipeline.__getattr__`` (the API's first import) and by the engine's numba loader.
"""

from __future__ import annotations

import gc
import importlib
import os
import signal
import sys
import threading
from types import ModuleType
from typing import Any


def import_whole(name: str) -> ModuleType:
    """``import name``, never cut short by Ctrl-C (SIGINT) on the main thread: an interrupt that arrives
    meanwhile is raised as KeyboardInterrupt once the module is whole. Elsewhere (another thread, where no
    interrupt lands), a plain import."""
    if name in sys.modules:
        return sys.modules[name]
    if threading.current_thread() is not threading.main_thread():
        return importlib.import_module(name)
    held: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        held.append(signum)

    try:
        previous = signal.signal(signal.SIGINT, hold)
    except (ValueError, OSError):  # not the main interpreter: no handler to set
        return importlib.import_module(name)
    try:
        module = importlib.import_module(name)
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    if held:
        raise KeyboardInterrupt
    return module


_COMMAND_LINE: dict[str, bool] = {}


def command_line() -> None:
    """Mark this process as the command line's (``pipeline.cli.main``): :func:`importing` and
    :func:`imports_settled` act there only."""
    _COMMAND_LINE["on"] = True


def importing() -> None:
    """In the command line's process, at the start of a command that answers queries, before its imports:
    no garbage collection until :func:`imports_settled`, and OpenMP's idle threads set to sleep
    (:func:`waiting_threads_sleep`). Imports make objects that live as long as the process, not garbage,
    and the collector's full passes over them while torch, pandas and pyarrow import took 0.15-0.19 s of a
    command (PPI5k's ``pipeline answer``; the floor ``python -c "import torch, pandas, pyarrow"`` pays
    the same)."""
    waiting_threads_sleep()
    if _COMMAND_LINE.get("on") and gc.isenabled():
        gc.disable()
        _COMMAND_LINE["paused"] = True


def imports_settled() -> None:
    """In the command line's process, once a command has imported what it runs with: every object made so
    far (~10^6, the modules' own) moves to the garbage collector's permanent generation (``gc.freeze``),
    so that later full collections traverse only what the command makes, and collection resumes where
    :func:`importing` paused it. One full collection while ``pipeline answer`` parsed PPI5k's 1,200 test
    queries took 0.10 s traversing the modules. Nothing in a notebook or a test process (a frozen object is
    never collected, and there the process outlives the command)."""
    if _COMMAND_LINE.get("on"):
        gc.freeze()
        if _COMMAND_LINE.pop("paused", False):
            gc.enable()


def waiting_threads_sleep() -> None:
    """In the command line's process of a command that answers queries, before torch is imported: OpenMP's
    threads that wait for work sleep instead of spinning (``OMP_WAIT_POLICY=PASSIVE``, unless the variable
    is set). Between torch's parallel operations a spinning worker held the second of two cores while
    the engine's compiled stream ran there: CN15k's whole test set with torch's two threads answered im at
    195-275 q/s and 2m at 171-229 spinning, 268-346 and 259-285 sleeping (the engine's seconds 1.4-2.0 ->
    1.2-1.4); PPI5k's light types 900-1,500 -> 2,500-4,000 q/s (docs/studies/where-a-fresh-process-spends-its-time.md)."""
    if _COMMAND_LINE.get("on") and "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
