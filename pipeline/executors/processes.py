"""The processes executor: tasks on worker processes of this machine, every core, one copy of the state.

The workers are forked from the process that built the state (an answering method over a loaded export):
they share its pages copy-on-write, and nothing writes into an index once built, so the export is in
memory once whatever the worker count; each worker adds only its working set (its batch's state vectors,
its memo). Relation-pair arrays built by one worker reach the others through the export's pair cache
(:mod:`pipeline.formats.pair_cache`, memory-mapped: shared page cache too). Where ``fork`` is missing (macOS,
Windows) each worker builds the state from its portable recipe instead (the memory of Ray actors).

A method on a GPU is answered in this process (CUDA does not survive a fork). A forked worker runs ONE
torch thread: OpenMP's thread pool does not survive a fork either, and a forked child that enters a
parallel region after its parent has used the pool hangs for ever (seen on a 16-core machine, where two
workers got 8 threads each; `tests/executors/test_processes.py` reproduces it on 2 cores). Parallelism
comes from the workers (default: one per core). A spawned worker (no ``fork``) runs ``cores // workers``
threads, so the workers never oversubscribe the machine. Results are yielded as they finish; the stage merges them in task order, so the files written are
those of the local executor, byte for byte.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from pipeline.core.errors import PipelineError, option
from pipeline.core.heap import keep_freed_heap, release_heap
from pipeline.core.progress import output
from pipeline.executors.base import ActorState, Executor, Task, TaskFailed, failure
from pipeline.executors.local import LocalExecutor

_STATE: Any = None  # what the task functions receive: set before forking (inherited) or built per worker


def cores() -> int:
    """The cores this process may run on (:func:`pipeline.core.limits.cores`)."""
    from pipeline.core import limits

    return limits.cores()


def _same(x: Any) -> Any:
    return x


def _on_accelerator(obj: Any) -> bool:
    """Whether a built state (an answering method) computes on a GPU: then its tasks run in this process."""
    import torch

    dev = getattr(obj, "device", None)
    return isinstance(dev, torch.device) and dev.type != "cpu"


def _init(threads: int, state: ActorState | None) -> None:
    import torch

    torch.set_num_threads(threads)
    keep_freed_heap()
    global _STATE
    if state is not None:  # spawned, not forked: build the state here, once
        _STATE = state.build(*state.args)


def _work(item: tuple[int, Callable[[Any, Any], Any], Any, str]) -> tuple[int, bool, Any]:
    i, fn, args, label = item
    try:
        return i, True, fn(_STATE, args)
    except Exception as exc:  # one line naming the task, as the other executors give it
        return i, False, str(failure(Task(label, None), exc))
    finally:
        release_heap()  # the task's temporaries are gone: what the heap kept for them goes back


class ProcessExecutor(Executor):
    name: ClassVar[str] = "processes"
    description: ClassVar[str] = (
        "worker processes on this machine (--workers, default: every core) sharing one copy of the export (answer's default)"
    )
    in_process: ClassVar[bool] = False
    shares_memory: ClassVar[bool] = "fork" in mp.get_all_start_methods()

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        if address:
            raise PipelineError(f"{option('address')} names a Ray cluster; it needs {option('executor', 'ray')}")
        super().__init__(None, cores() if workers is None else workers)

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
        return self._run(fn, tasks, ActorState(_same, (shared,), local=shared), desc, unit, progress)

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
        return self._run(fn, tasks, state, desc, unit, progress)

    def _run(
        self,
        fn: Callable[[Any, Any], Any],
        tasks: Sequence[Task],
        state: ActorState,
        desc: str,
        unit: str,
        progress: bool,
    ) -> Iterator[tuple[int, Any]]:
        global _STATE
        workers = max(1, min(self.workers or 1, len(tasks)))
        forking = "fork" in mp.get_all_start_methods()
        # forked: one thread each (OpenMP's pool does not survive a fork: more would hang); spawned: a share
        threads = 1 if forking else max(1, cores() // workers)
        if forking:
            try:
                _STATE = state.make()  # built (or taken) here, before the fork: the workers share its pages
            except Exception as exc:
                label = tasks[0].label if tasks else "the actor"
                raise TaskFailed(
                    f"{label} failed: its actor could not be built: {type(exc).__name__}: {exc}"
                ) from exc
            if _on_accelerator(_STATE):  # CUDA does not survive a fork, and one GPU serves one process best
                obj, _STATE = _STATE, None
                local = ActorState(_same, (obj,), local=obj)
                yield from LocalExecutor().map_on_actors(
                    fn, tasks, local, desc=desc, unit=unit, progress=progress
                )
                return
        ctx = mp.get_context("fork" if forking else "spawn")
        items = [(i, fn, t.args, t.label) for i, t in enumerate(tasks)]
        pool = ctx.Pool(workers, initializer=_init, initargs=(threads, None if forking else state))
        bar = output(progress).bar(total=sum(t.weight for t in tasks), desc=desc, unit=unit)
        try:
            for i, ok, result in pool.imap_unordered(_work, items, chunksize=1):
                if not ok:
                    raise TaskFailed(result)
                bar.update(tasks[i].weight)
                yield i, result
            pool.close()
            pool.join()
        finally:
            bar.close()
            pool.terminate()
            if forking:
                _STATE = None

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": self.workers}
