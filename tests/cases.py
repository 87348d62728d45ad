"""Base classes of the per-component test cases (as PyKEEN's ``tests/cases.py``).

Every registered component (a data set, model, method, calibration, query type, metric, alpha or beta mode)
has a test class deriving from one of these, naming the component in ``name``; the class inherits the
checks every component of its kind must pass and adds its own. ``tests/test_meta.py`` compares the set of
these classes with the registries, so a component registered without a test class fails the suite.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ComponentCase:
    """kind: a key of ``pipeline.core.registry.REGISTRIES`` (``pipeline ls KIND``); name: the component's name."""

    kind: ClassVar[str]
    name: ClassVar[str]

    @classmethod
    def component(cls) -> Any:
        from pipeline.core.registry import registry as _registry

        return _registry(cls.kind)[cls.name]

    def test_listed_by_name(self) -> None:
        """`pipeline ls KIND` shows the component, and its name looks it up (any case)."""
        from pipeline.core.registry import registry as _registry
        from pipeline.core.registry import registry_rows

        assert self.name in [r["name"] for r in registry_rows(self.kind)]
        assert _registry(self.kind).get(self.name.upper()) is self.component()


class MethodCase(ComponentCase):
    """What every answering method satisfies: one finite-or--inf utility per entity and query, a table label,
    and an answers file that evaluates. Each subclass provides the fixture ``built`` = (a built method,
    the path of a query set of its data set)."""

    kind = "methods"

    def test_utilities_shape_label_and_answers(self, built: tuple[Any, Any], tmp_path: Any) -> None:
        from pipeline.formats.queryset import read_query_set
        from pipeline.stages.answer import run_answer
        from pipeline.stages.evaluate import evaluate_file

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



class StoreCase(ComponentCase):
    """What every store backend satisfies, run against a real server of that backend (``pipeline ls stores``):
    statements with parameters as data, the project's errors, an idempotent ingest read back by stats,
    sampling and grounding through the shared Cypher, a write-back read back, and the capabilities the
    backend declares (``cannot``, ``bulk_load``, batch sizes, index listing) holding.

    Each subclass provides the fixture ``store``: an open Store of its backend, opened by URI, on a graph
    the test may fill (emptied afterwards); and ``unreachable_uri`` (a URI of its scheme where nothing
    listens), or None with ``unreachable_reason`` where the backend cannot be unreachable; and may narrow
    ``text_parameter`` where the server under test cannot take any string (saying why)."""

    kind = "stores"
    unreachable_uri: ClassVar[str | None] = None
    unreachable_reason: ClassVar[str] = ""
    # a string parameter that is Cypher text itself: it must come back as data, never run
    text_parameter: ClassVar[str] = "x\"'`}) DETACH DELETE n //"

    def test_opened_by_uri_and_found_by_each_scheme(self, store: Any) -> None:
        from pipeline.store.backends import backend_for

        backend = self.component()
        assert type(store) is backend.cls() and store.backend == backend.cls().backend
        for scheme in backend.schemes:
            uri = "embedded" if scheme == "embedded" else f"{scheme}://127.0.0.1:1"
            assert backend_for(uri) is backend

    def test_runs_a_statement_with_parameters_as_data(self, store: Any) -> None:
        nasty = self.text_parameter
        store.run("CREATE (:T {k: 1, s: $s, c: 0.25}), (:T {k: 2, s: 'b', c: 0.5})", {"s": nasty})
        rows = store.run("MATCH (n:T) RETURN n.k AS key, n.s AS text, n.c AS c, n ORDER BY key")
        assert [r["key"] for r in rows] == [1, 2] and rows[0]["text"] == nasty
        assert rows[1]["n"] == {"k": 2, "s": "b", "c": 0.5}  # nodes come back as their property maps
        assert store.run_batches("UNWIND $rows AS row CREATE (:B {i: row.i, tag: $tag})",
                                 [{"i": i} for i in range(7)], 3, {"tag": "x"}) == 7
        assert store.run("MATCH (b:B {tag: 'x'}) RETURN count(b) AS n") == [{"n": 7}]

    def test_a_rejected_statement_is_one_line_of_the_projects_errors(self, store: Any) -> None:
        import pytest

        from pipeline.core.errors import PipelineError
        from pipeline.store import CypherError
        from pipeline.store.statement import run_statement

        with pytest.raises(CypherError, match="rejected the query"):
            store.run("MATCH (n RETURN n")
        with pytest.raises(PipelineError, match="rejected the query") as err:
            run_statement(store, "MATCH (n RETURN n")
        assert "\n" not in str(err.value)
        assert store.run("RETURN 1 AS one") == [{"one": 1}]  # the connection survives a rejected statement

    def test_unreachable_is_store_unavailable(self) -> None:
        import pytest

        from pipeline.core.errors import StoreUnavailable
        from pipeline.store import open_store

        if self.unreachable_uri is None:
            pytest.skip(self.unreachable_reason)
        with pytest.raises(StoreUnavailable) as err:
            open_store(self.unreachable_uri)
        assert "\n" not in str(err.value)

    def test_ingest_is_idempotent_and_stats_read_it_back(self, store: Any) -> None:
        from pipeline.store.ingest import ingest, schema_indexes
        from pipeline.store.stats import dataset_stats
        from tests.store.kgs import expected_facts, make_kg, snapshot

        kg = make_kg("contract_tiny")
        report = ingest(kg, store, batch_size=store.write_batch, progress=False)
        path = "bulk" if store.bulk_load and store.bulk else "cypher"
        assert (report.facts, report.skipped, report.method) == (6, False, f"{store.backend}-{path}")
        facts = snapshot(store, "contract_tiny")["facts"]
        assert [{k: f[k] for k in ("h", "r", "t", "type", *CONF)} for f in facts] == expected_facts(kg)
        assert ingest(kg, store, batch_size=store.write_batch, progress=False).skipped
        assert snapshot(store, "contract_tiny")["facts"] == facts
        st = dataset_stats(store, "contract_tiny")
        assert (st.entities, st.relations, st.facts) == (5, 2, {"train": 3, "valid": 4, "test": 6})
        # rel0's rows 0.75, 0.25, 0.5, 0.875, 1.0: percentiles 25/50/75 = 0.5, 0.75, 0.875
        assert (st.per_relation[0].p25, st.per_relation[0].p50, st.per_relation[0].p75) == (0.5, 0.75, 0.875)
        assert set(schema_indexes()) <= store.indexes()

    def test_samples_and_grounds_through_the_shared_cypher(self, store: Any) -> None:
        import pytest

        from pipeline.formats.queryset import records_to_query
        from pipeline.sampling.levels import kg_alpha_table, store_relation_types
        from pipeline.sampling.sampler import sample_queries
        from pipeline.store.ingest import ingest
        from tests.sampling.cypher_answers import cypher_answers
        from tests.store.kgs import TINY_FACTS, make_kg

        kg = make_kg("contract_walks", TINY_FACTS, 6)
        ingest(kg, store, batch_size=store.write_batch, progress=False)
        table = kg_alpha_table(kg)
        rows, _ = sample_queries(kg, store, split="test", types=["1p", "2p", "2u"], per_type=2, alpha_mode="low", beta_mode="random", seed=5, alpha_table=table, progress=False)
        assert len(rows) == 6 and {r["type"] for r in rows} == {"1p", "2p", "2u"}
        types = store_relation_types(store, "contract_walks")
        for r in rows:  # the Cypher grounding agrees with the engine's exact truth
            got = cypher_answers(store, "contract_walks", records_to_query(r["atoms"]), r["type"], types, "test")
            assert [e for e, _ in got] == r["answers_hard"]
            assert [u for _, u in got] == pytest.approx(r["utilities_hard"], abs=1e-6)

    def test_writes_back_answers_and_reads_them(self, store: Any, tmp_path: Any) -> None:
        import pytest

        from pipeline.formats.answers import read_answers, write_answers
        from pipeline.formats.queryset import read_query_set
        from pipeline.methods import SRC
        from pipeline.stages.answer import answer_query_set
        from pipeline.stages.writeback import read_back, set_id, write_back
        from pipeline.store.ingest import ingest
        from tests.answer.toy import N_ENTITIES, PREDICTED, write_toy_query_set
        from tests.store.kgs import TINY_FACTS, make_kg

        ingest(make_kg("toy", TINY_FACTS, N_ENTITIES), store, batch_size=store.write_batch, progress=False)
        qs = read_query_set(write_toy_query_set(tmp_path / "toy_test.parquet"))
        frame, _ = answer_query_set(qs, SRC.over(PREDICTED, "toy"), progress=False)
        meta = {"dataset": "toy", "method": "SRC", "backbone": "ukge_logi", "query_set": str(qs.path)}
        answers = read_answers(write_answers(frame, tmp_path / "SRC.parquet", meta))
        assert write_back(store, answers, qs) == 14
        assert write_back(store, answers, qs) == 14  # replaced, never doubled
        count = "MATCH (:Query {dataset: 'toy'})-[a:ANSWER]->(:Entity) RETURN count(a) AS n"
        assert store.run(count) == [{"n": 14}]
        got = read_back(store, "toy", set_id(qs), "q1", "ukge_logi SRC")
        assert [r["eid"] for r in got] == [2, 1, 3, 0, 4, 5] and [r["rank"] for r in got] == [1, 2, 3, 4, 5, 6]
        assert [r["utility"] for r in got] == pytest.approx([0.8, 0.5, 0.45, 0.0, 0.0, 0.0])

    def test_declared_capabilities_hold(self, store: Any) -> None:
        import pytest

        from pipeline.core.errors import PipelineError
        from pipeline.store import cypher_text

        assert store.write_batch >= 1 and store.witness_batch >= 1
        assert cypher_text(store.index_listing)  # a cypher/ file
        assert store.ensure_index("Cap", "p") is True and ("Cap", "p") in store.indexes()
        assert store.ensure_index("Cap", "p") is False
        assert store.bulk_load == hasattr(store, "bulk")  # a backend with a bulk path has the switch
        store.run("CREATE (:Cap {p: 1})")
        if "drop graph" in store.cannot:
            with pytest.raises(PipelineError, match="cannot drop a graph"):
                store.drop()
        else:
            store.drop()
            assert store.run("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]


CONF = ("conf_train", "conf_valid", "conf_test")
