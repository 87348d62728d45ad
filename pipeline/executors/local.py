"""The local executor: every task in this process, in order (export's default; answer with ``workers=1``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from pipeline.core.errors import PipelineError, option
from pipeline.core.progress import output
from pipeline.executors.base import ActorState, Executor, Task, TaskFailed, failure


class LocalExecutor(Executor):
    name: ClassVar[str] = "local"
    description: ClassVar[str] = "every task in this process, one after another (export's default)"
    in_process: ClassVar[bool] = True

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        if address:
            raise PipelineError(f"{option('address')} names a Ray cluster; it needs {option('executor', 'ray')}")
        if workers is not None:
            from pipeline.core import limits

            limits.check_count("workers", workers)  # a count at all, and within this machine's bound
        if workers not in (None, 1):
            raise PipelineError(f"{option('workers', workers)} needs {option('executor', 'ray')} or processes (the local executor runs one task at a time)")
        super().__init__(None, 1)

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
        return _run(lambda args: fn(shared, args), tasks, desc, unit, progress)

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
        try:
            obj = state.make()  # built once, like one actor
        except Exception as exc:
            label = tasks[0].label if tasks else "the actor"
            raise TaskFailed(f"{label} failed: its actor could not be built: {type(exc).__name__}: {exc}") from exc
        return _run(lambda args: fn(obj, args), tasks, desc, unit, progress)


def _run(call: Callable[[Any], Any], tasks: Sequence[Task], desc: str, unit: str, progress: bool) -> Iterator[tuple[int, Any]]:
    with output(progress).bar(total=sum(t.weight for t in tasks), desc=desc, unit=unit) as bar:
        for i, task in enumerate(tasks):
            try:
                result = call(task.args)
            except Exception as exc:  # as on a remote worker: one line naming the task (the cause chained)
                raise failure(task, exc) from exc
            bar.update(task.weight)
            yield i, result
