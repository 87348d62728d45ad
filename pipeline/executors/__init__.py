"""Executors of the heavy stages (export, answer): ``local`` (default), ``processes`` (every core of this machine) and ``ray``; ``pipeline ls executors``.

The registry holds the classes; :func:`make_executor` builds one from the CLI's options. Importing this
package never imports Ray (only building the Ray executor does).
"""

from __future__ import annotations

from pipeline.executors.base import ActorState, Executor, Task, TaskFailed
from pipeline.executors.local import LocalExecutor
from pipeline.executors.processes import ProcessExecutor, answer_executor
from pipeline.executors.ray import RayExecutor
from pipeline.registry import Registry

EXECUTORS: Registry[type[Executor]] = Registry("executor", [LocalExecutor, ProcessExecutor, RayExecutor])


def make_executor(name: str = "local", address: str | None = None, workers: int | None = None) -> Executor:
    """The executor named ``name`` (any accepted spelling), configured; close it (or use ``with``) to
    stop a local cluster it started."""
    return EXECUTORS[name](address=address, workers=workers)


__all__ = ["EXECUTORS", "ActorState", "Executor", "LocalExecutor", "ProcessExecutor", "RayExecutor", "Task", "TaskFailed", "answer_executor", "make_executor"]
