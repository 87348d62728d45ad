"""Heavy modules imported whole. A KeyboardInterrupt that lands inside the first ``import torch`` (the
seconds of a notebook's first ``pl.run``, whose first use of ``pl`` imports the API and torch with it)
leaves torch half-initialised in ``sys.modules``: every later import of it fails ("partially initialized
module 'torch' has no attribute 'nn'") or crashes the interpreter until the kernel restarts; numba likewise.
:func:`import_whole` runs such a first import with Ctrl-C held: the interrupt is raised as soon as the
import is complete, so the call still stops where the person asked, and the process stays usable. Used by
``pipeline.__getattr__`` (the API's first import) and by the engine's numba loader.
"""

from __future__ import annotations

import importlib
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
