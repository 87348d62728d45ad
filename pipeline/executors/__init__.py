"""Executors of the heavy stages (export, answer): ``local`` (this process), ``processes`` (every core of
this machine) and ``ray``; ``pipeline ls executors``. Export runs on ``local`` by default, answer on
``processes`` (:class:`pipeline.stages.options.AnswerOptions`); the stages open and close them.

The registry holds the classes; :func:`make_executor` builds one from a stage's options. Importing this
package never imports Ray (only building the Ray executor does).
"""

from __future__ import annotations

from pipeline.core.registry import Registry
from pipeline.executors.base import ActorState, Executor, Task, TaskFailed
from pipeline.executors.local import LocalExecutor
from pipeline.executors.processes import ProcessExecutor, cores
from pipeline.executors.ray import RayExecutor

EXECUTORS: Registry[type[Executor]] = Registry("executor", [LocalExecutor, ProcessExecutor, RayExecutor])


def make_executor(name: str = "local", address: str | None = None, workers: int | None = None) -> Executor:
    """The executor named ``name`` (any accepted spelling), configured; close it (or use ``with``) to
    stop a local cluster it started."""
    return EXECUTORS[name](address=address, workers=workers)


def answer_executor(name: str = "processes", address: str | None = None, workers: int | None = None) -> Executor:
    """The executor the answering stage runs on: the named one, where ``processes`` with one worker (one
    core, or ``workers=1``) is this process (:class:`LocalExecutor`: nothing to fork)."""
    if EXECUTORS[name] is ProcessExecutor and not address:
        count = cores() if workers is None else workers  # below 1: refused by the executor's constructor
        return LocalExecutor() if count == 1 else ProcessExecutor(workers=count)
    return make_executor(name, address, workers)


__all__ = ["EXECUTORS", "ActorState", "Executor", "LocalExecutor", "ProcessExecutor", "RayExecutor", "Task", "TaskFailed", "answer_executor", "make_executor"]
