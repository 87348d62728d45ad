"""Base classes of the per-component test cases (as PyKEEN's ``tests/cases.py``).

Every registered component (a data set, model, method, calibration, query type, metric, alpha or beta mode)
has a test class deriving from one of these, naming the component in ``name``; the class inherits the
checks every component of its kind must pass and adds its own. ``tests/test_meta.py`` compares the set of
these classes with the registries, so a component registered without a test class fails the suite.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ComponentCase:
    """kind: a key of ``pipeline.cli.REGISTRIES`` (``pipeline ls KIND``); name: the component's name."""

    kind: ClassVar[str]
    name: ClassVar[str]

    @classmethod
    def component(cls) -> Any:
        from pipeline.cli import _registry

        return _registry(cls.kind)[cls.name]

    def test_listed_by_name(self) -> None:
        """`pipeline ls KIND` shows the component, and its name looks it up (any case)."""
        from pipeline.cli import _registry, registry_rows

        assert self.name in [r["name"] for r in registry_rows(self.kind)]
        assert _registry(self.kind).get(self.name.upper()) is self.component()


class MethodCase(ComponentCase):
    """What every answering method satisfies: one finite-or--inf utility per entity and query, a table label,
    and an answers file that evaluates. Each subclass provides the fixture ``built`` = (a built method,
    the path of a query set of its data set)."""

    kind = "methods"

    def test_utilities_shape_label_and_answers(self, built: tuple[Any, Any], tmp_path: Any) -> None:
        from pipeline.answer import run_answer
        from pipeline.evaluate import evaluate_file
        from pipeline.formats.queryset import read_query_set

        method, path = built
        qs = read_query_set(path)
        queries = qs.queries()[:3]
        u = method.utilities(queries)
        assert u.shape == (len(queries), method.n_entities) and not u.isnan().any()
        assert method.label and method.dataset == qs.meta["dataset"]
        report = evaluate_file(run_answer(qs, method, tmp_path, progress=False)["path"])
        assert report["method"] == method.label and set(report["summary"]) == {"tau", "rho", "map", "ndcg"}


class ExecutorCase(ComponentCase):
    """What every executor satisfies: each task's result exactly once (plain tasks and tasks on actors
    that build their state once), and a failing task stops the map with one TaskFailed line naming it.
    Each subclass provides the fixture ``executor`` (a built executor)."""

    kind = "executors"

    def test_map_returns_every_result_once(self, executor: Any) -> None:
        from pipeline.executors import ActorState, Task

        divisors = [1, 2, 3, 5, 7, 4]
        tasks = [Task(f"task {i}", d) for i, d in enumerate(divisors)]
        # divmod(17, d): a pure builtin, so any worker can run it
        got = dict(executor.map(divmod, tasks, 17, progress=False))
        assert got == {i: divmod(17, d) for i, d in enumerate(divisors)}
        on_actors = dict(executor.map_on_actors(divmod, tasks, ActorState(int, ("17",)), progress=False))
        assert on_actors == got

    def test_a_failing_task_is_one_error_naming_it(self, executor: Any) -> None:
        import pytest

        from pipeline.executors import ActorState, Task, TaskFailed

        tasks = [Task("batch a", 1), Task("shard rel-0002 (heads 0..9)", 0), Task("batch c", 3)]
        with pytest.raises(TaskFailed, match=r"^shard rel-0002 \(heads 0\.\.9\) failed: ZeroDivisionError") as err:
            list(executor.map(divmod, tasks, 17, progress=False))
        assert "\n" not in str(err.value)
        with pytest.raises(TaskFailed, match=r"^shard rel-0002 \(heads 0\.\.9\) failed: ZeroDivisionError"):
            list(executor.map_on_actors(divmod, tasks, ActorState(int, ("17",)), progress=False))

    def test_an_actor_that_cannot_be_built_is_one_error(self, executor: Any) -> None:
        import pytest

        from pipeline.executors import ActorState, Task, TaskFailed

        tasks = [Task("batch 0 (1p)", 1)]
        with pytest.raises(TaskFailed, match=r"^batch 0 \(1p\) failed: its actor could not be built: ValueError: invalid literal"):
            list(executor.map_on_actors(divmod, tasks, ActorState(int, ("x",)), progress=False))

