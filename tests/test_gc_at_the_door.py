"""The command line's process collects no garbage while a command imports its modules, and freezes them
once imported (pipeline.core.imports.importing / imports_settled): the full collections over torch's,
pandas' and pyarrow's objects took 0.15-0.19 s of a PPI5k `pipeline answer`, and one more 0.10 s while it
parsed its queries. A notebook or a test process is left as it is."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from pipeline.core import imports


def test_outside_the_command_line_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(imports, "_COMMAND_LINE", {})
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    imports.waiting_threads_sleep()
    assert "OMP_WAIT_POLICY" not in __import__("os").environ
    frozen = gc.get_freeze_count()
    imports.importing()
    assert gc.isenabled()
    imports.imports_settled()
    assert gc.isenabled() and gc.get_freeze_count() == frozen


_COMMAND = """
import gc, sys
from pipeline.core import imports
imports.command_line()
imports.importing()
paused = not gc.isenabled()
import json, decimal  # a command's imports
imports.imports_settled()
print(paused, gc.isenabled(), gc.get_freeze_count() > 0, "decimal" in sys.modules)
gc.disable()  # a process that had collection off keeps it off
imports.importing(); imports.imports_settled()
print(gc.isenabled())
import os
os.environ.pop("OMP_WAIT_POLICY", None)
imports.waiting_threads_sleep()  # before torch: OpenMP's idle threads sleep
print(os.environ.get("OMP_WAIT_POLICY"))
os.environ["OMP_WAIT_POLICY"] = "ACTIVE"
imports.waiting_threads_sleep()  # a value the person set is kept
import torch
os.environ.pop("OMP_WAIT_POLICY")
imports.waiting_threads_sleep()  # torch already imported: too late to matter, nothing set
print(os.environ.get("OMP_WAIT_POLICY"))
"""


def test_the_command_line_pauses_collection_while_importing_and_freezes_what_it_imported() -> None:
    done = subprocess.run([sys.executable, "-c", _COMMAND], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "True", "False", "PASSIVE", "None"]


def test_pipeline_query_ends_with_collection_on(tmp_path) -> None:
    """A real command: `pipeline query` in a fresh process, its garbage collection on again once its modules
    are imported (an exit hook reads it)."""
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('gc', gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr))\n"
        "from pipeline.cli import main\n"
        "sys.argv = ['pipeline', 'query', 'q(x) :- r0(e1, x)', '--dataset', 'nowhere-such']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "gc True True" in done.stderr, done.stderr[-2000:]
