"""The Ray executor: tasks as Ray tasks, stateful work on Ray actors, on an existing cluster (``--address``)
or on a local one started here (``ray.init(num_cpus=workers)``), so it is tested on one machine.

Ray is an optional dependency (``pip install 'soft-queries[ray]'``): it is imported only when this
executor is built, and its absence is one clear error. Retries: a task whose worker dies (killed, out of
memory) is re-run up to ``max_retries`` times by Ray itself; OSError (a flaky object store or S3 write) is
retried too; any other exception is deterministic and fails at once with the task's label.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from pipeline.core.errors import PipelineError, option
from pipeline.core.progress import output
from pipeline.executors.base import ActorState, Executor, Task, failure

# the object store of a cluster we start: small, the tasks exchange file names and counts, not arrays
LOCAL_OBJECT_STORE_BYTES = 256 << 20


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PipelineError("--executor ray needs Ray: pip install 'soft-queries[ray]'") from None
    return ray


class _Host:
    """An actor's body: builds its state once, then runs task after task on it."""

    def __init__(self, build: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.state = build(*args)

    def run(self, fn: Callable[[Any, Any], Any], args: Any) -> Any:
        return fn(self.state, args)


def _call(fn: Callable[[Any, Any], Any], shared: Any, args: Any) -> Any:
    return fn(shared, args)


class RayExecutor(Executor):
    name: ClassVar[str] = "ray"
    description: ClassVar[str] = (
        "Ray tasks and actors on a cluster (--address) or a local one of --workers CPUs; pip install 'soft-queries[ray]'"
    )
    in_process: ClassVar[bool] = False

    def __init__(self, address: str | None = None, workers: int | None = None, max_retries: int = 3) -> None:
        super().__init__(address, workers)
        self.max_retries = max_retries
        self._ray = _import_ray()
        self._started = False

    # ------------------------------------------------------------------------------------------ cluster
    def _cluster(self) -> Any:
        ray = self._ray
        if not ray.is_initialized():
            if self.address:
                try:
                    ray.init(address=self.address, log_to_driver=False)
                except (ConnectionError, RuntimeError, ValueError) as exc:
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise PipelineError(f"{option('address', self.address)}: no Ray cluster to join ({first})") from None
                self._check_workers_fit(ray)
            else:
                # address="local": always a new cluster of our own, never one a stale
                # /tmp/ray/ray_current_cluster (a `ray start` killed without `ray stop`) points at
                ray.init(
                    address="local",
                    num_cpus=self.workers or os.cpu_count() or 1,
                    include_dashboard=False,
                    log_to_driver=False,
                    object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                    configure_logging=False,
                )
                self._started = True
        return ray

    def _check_workers_fit(self, ray: Any) -> None:
        """--workers on a cluster joined at an address: at most CPU_FACTOR tasks per CPU (or GPU) of the
        cluster (pipeline.core.limits), checked once it is joined and before any task is sent."""
        from pipeline.core import limits

        if not self.workers:
            return
        res = ray.cluster_resources()
        units = max(int(res.get("CPU", 0)), int(res.get("GPU", 0)), 1)
        if self.workers > limits.CPU_FACTOR * units:
            ray.shutdown()
            raise PipelineError(f"{option('workers', self.workers)}: at most {limits.CPU_FACTOR * units} on the Ray cluster at "
                                f"{self.address} ({limits.CPU_FACTOR} per CPU x its {units} CPUs)")

    def _gpus_per_worker(self) -> float:
        """1 GPU per task/actor when the cluster has GPUs (the work is one matmul or engine batch each)."""
        return 1.0 if self._ray.cluster_resources().get("GPU", 0) >= 1 else 0.0

    def _slots(self) -> int:
        """How many tasks or actors run at once: --workers, else the cluster's CPUs (GPUs when it has them)."""
        if self.workers:
            return self.workers
        res = self._ray.cluster_resources()
        return max(1, int(res.get("GPU", 0) or res.get("CPU", 1)))

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "workers": self.workers or (self._slots() if self._ray.is_initialized() else None)}

    # ------------------------------------------------------------------------------------------ work
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
        ray = self._cluster()
        remote = ray.remote(_call).options(
            num_cpus=1, num_gpus=self._gpus_per_worker(), max_retries=self.max_retries, retry_exceptions=[OSError]
        )
        shared_ref = ray.put(shared)
        fn_ref = ray.put(fn)
        window = 2 * self._slots()  # a bounded queue: a huge task list does not flood the scheduler

        def submit(i: int) -> Any:
            return remote.remote(fn_ref, shared_ref, tasks[i].args)

        return self._drive(tasks, submit, window, desc, unit, progress)

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
        ray = self._cluster()
        gpus = self._gpus_per_worker()
        n_actors = max(1, min(self._slots(), len(tasks)))
        if gpus:  # one GPU each: more actors than GPUs would wait forever for theirs while holding tasks
            n_actors = min(n_actors, int(ray.cluster_resources()["GPU"]))
        host = ray.remote(_Host).options(
            num_cpus=1, num_gpus=gpus, max_restarts=self.max_retries, max_task_retries=self.max_retries
        )
        actors = [host.remote(state.build, state.args) for _ in range(n_actors)]
        fn_ref = ray.put(fn)
        free = list(range(n_actors))
        busy: dict[int, int] = {}  # task index -> actor index

        def submit(i: int) -> Any:
            a = free.pop() if free else i % n_actors
            busy[i] = a
            return actors[a].run.remote(fn_ref, tasks[i].args)

        def done(i: int) -> None:
            free.append(busy.pop(i))

        try:
            yield from self._drive(tasks, submit, n_actors, desc, unit, progress, done)
        finally:
            for a in actors:
                ray.kill(a)

    def _drive(
        self,
        tasks: Sequence[Task],
        submit: Callable[[int], Any],
        window: int,
        desc: str,
        unit: str,
        progress: bool,
        done: Callable[[int], None] | None = None,
    ) -> Iterator[tuple[int, Any]]:
        """Keep ``window`` tasks in flight, yield results as they come, one bar; on error or an early
        close cancel what is still running."""
        ray = self._ray
        pending: dict[Any, int] = {}
        nxt = 0
        bar = output(progress).bar(total=sum(t.weight for t in tasks), desc=desc, unit=unit)
        try:
            while nxt < len(tasks) or pending:
                while nxt < len(tasks) and len(pending) < window:
                    pending[submit(nxt)] = nxt
                    nxt += 1
                ready, _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(ready[0])
                try:
                    result = ray.get(ready[0])
                except Exception as exc:  # RayTaskError, a dead actor, a lost object: the task's own failure
                    raise failure(tasks[i], _cause(exc)) from None
                if done is not None:
                    done(i)
                bar.update(tasks[i].weight)
                yield i, result
        finally:
            bar.close()
            for ref in pending:
                ray.cancel(ref, force=False)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _cause(exc: BaseException) -> BaseException:
    """The task's own exception inside Ray's wrapper (RayTaskError.cause); for an actor whose state could not
    be built (ActorDiedError keeps only text), the last line of that text, which names the original error;
    else the wrapper itself, whose first line says what happened (a worker that died past its retries)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return cause
    lines = [ln.strip() for ln in _ANSI.sub("", str(exc)).splitlines() if ln.strip()]
    if lines and "creation task" in lines[0]:
        return PipelineError(f"its actor could not be built: {lines[-1]}")
    return exc
