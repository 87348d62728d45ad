"""What an executor is: the seam the two heavy stages (export, answer) run their work through.

A stage cuts its work into :class:`Task` s (pure: arguments in, a small result out) and hands them to an
executor, which runs them somewhere and yields each result as it finishes. ``local`` runs them in this
process (today's behaviour, the default); ``ray`` runs them on a Ray cluster. Either way: one progress bar
over all tasks, and a task's failure surfaces as one :class:`TaskFailed` line naming the task (its shard or
batch), never a remote traceback. The stage, not the executor, decides the order results are merged in, so
both executors write the same files.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pipeline.core.errors import PipelineError


class TaskFailed(PipelineError):
    """A task of an executor raised (after its retries): the message names the task."""


@dataclass(frozen=True)
class Task:
    """One unit of work. label: what a person reads in progress and errors (e.g. "shard rel-0003
    heads 0..1117"); args: the task function's second argument (picklable); weight: its share of the
    progress bar (heads, queries)."""

    label: str
    args: Any
    weight: int = 1


@dataclass(frozen=True)
class ActorState:
    """What every actor of :meth:`Executor.map_on_actors` holds: ``build(*args)`` (picklable, run once
    per actor, e.g. memory-map an export), or ``local``, the already-built object an in-process executor
    uses as is instead of building a second copy."""

    build: Callable[..., Any]
    args: tuple[Any, ...] = ()
    local: Any = None

    def make(self) -> Any:
        return self.local if self.local is not None else self.build(*self.args)


def failure(task: Task, exc: BaseException) -> TaskFailed:
    """The one-line error of a failed task: its label, then the cause (type named unless it is ours)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    cause = text if isinstance(exc, PipelineError) else f"{type(exc).__name__}: {text}".rstrip(": ")
    return TaskFailed(f"{task.label} failed: {cause}")


class Executor(ABC):
    """Runs a stage's tasks. Class attributes: ``name`` (``--executor NAME``, ``pipeline ls executors``),
    ``description``, and ``in_process`` (True when tasks run in this process, so a stage may stream its
    results instead of writing shards), ``shares_memory`` (True when the workers are forked from this
    process, so a stage builds its state, e.g. loads the export, here and once). ``workers``: how many tasks
    run at once (None: the executor's default)."""

    name: ClassVar[str]
    description: ClassVar[str]
    in_process: ClassVar[bool]
    # the workers are forked from this process and share what it built: a stage builds its state here
    shares_memory: ClassVar[bool] = False

    # the workers run on this machine: their count is bounded by its cores (pipeline.core.limits); with an
    # address (a Ray cluster) the executor bounds them by the cluster's CPUs once it has joined it
    bounded_here: ClassVar[bool] = True

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        if workers is not None:
            from pipeline.core import limits

            workers = limits.check_count("workers", workers, "compute" if self.bounded_here and not address else None)
        self.address, self.workers = address, workers

    @abstractmethod
    def map(
        self,
        fn: Callable[[Any, Any], Any],
        tasks: Sequence[Task],
        shared: Any = None,
        *,
        desc: str = "tasks",
        unit: str = "task",
        progress: bool = True,
    ) -> Iterator[tuple[int, Any]]:
        """Run ``fn(shared, task.args)`` for every task; yield ``(task index, result)`` as each finishes
        (any order). ``fn`` must be a module-level function; ``shared`` is sent once, not per task. A task
        that raises stops the map with :class:`TaskFailed`; closing the iterator early cancels the rest."""

    @abstractmethod
    def map_on_actors(
        self,
        fn: Callable[[Any, Any], Any],
        tasks: Sequence[Task],
        state: ActorState,
        *,
        desc: str = "tasks",
        unit: str = "task",
        progress: bool = True,
    ) -> Iterator[tuple[int, Any]]:
        """As :meth:`map`, but ``fn(actor_state, task.args)`` on long-lived workers that each build
        ``state`` once (an answering method over a memory-mapped export) and then take task after task."""

    def close(self) -> None:  # noqa: B027 (an optional hook: the local executor starts nothing)
        """Release what the executor started (a local Ray cluster); a no-op by default."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        """What a manifest or answers file records about where the work ran."""
        return {"executor": self.name, "workers": self.workers, **({"address": self.address} if self.address else {})}
