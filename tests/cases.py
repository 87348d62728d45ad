"""Base classes of the per-component test cases (as PyKEEN's ``tests/cases.py``): every case base lives here.

Every registered component (a data set, backbone, answering method, query-embedding baseline, calibration,
query type, metric, alpha or beta mode, executor, store: the kinds of ``pipeline.core.registry.REGISTRIES``)
has a test class deriving from the base of its kind, named ``Test*`` and naming the component in ``name``;
the class inherits the checks every component of its kind must pass and adds its own. The concrete classes
live in the test modules of their area; docs/architecture.md's "How to add a component" table says which.
``tests/test_meta.py`` compares the set of these classes with the registries, so a component registered
without a test class fails the suite, naming the base and the table row.

Imports go inside the checks: importing this module (every test module does) loads no stage.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest


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


# ------------------------------------------------------------------------------------------ data sets


class DatasetCase(ComponentCase):
    """One shared case: the data set loaded from the mirror has exactly the statistics its spec declares."""

    kind = "datasets"

    def test_matches_its_spec(self) -> None:
        import pytest

        from loaders import load
        from tests.conftest import SHARED_DATA

        spec = self.component()
        if not (SHARED_DATA / self.name).is_dir():
            pytest.skip(f"{self.name} is not mirrored in {SHARED_DATA} (see its README)")
        kg = load(self.name)  # verifies every md5
        assert kg.n_entities == spec.n_entities
        assert kg.n_relations == spec.n_relations
        per_split = kg.rows.groupby("split", observed=True).size().to_dict()
        assert per_split == spec.facts
        for f in spec.files:
            if f.lines is not None and f.filename in kg.checksums:
                text = (SHARED_DATA / self.name / f.filename).read_bytes()
                assert text.count(b"\n") == f.lines, f.filename
                assert kg.checksums[f.filename] == f.md5


# ------------------------------------------------------------------------------------------ backbones


class ModelCase(ComponentCase):
    """What every backbone satisfies: block scoring equals triple scoring, confidences in [0, 1], a content
    hash that a seed reproduces and any parameter change alters, and a config that rebuilds it."""

    kind = "models"

    def make(self, seed: int = 3) -> Any:
        import torch

        m = self.component()(7, 3, dim=5, seed=seed).eval()
        with torch.no_grad():  # move parameters off their init so confidences vary
            for p in m.parameters():
                p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)))
        return m

    def test_block_scores_equal_triple_scores_in_unit_interval(self) -> None:
        import torch

        m = self.make()
        heads, tails = torch.tensor([0, 4, 6]), torch.arange(7)
        for r in range(3):
            with torch.no_grad():
                block = m.score_block(heads, r, tails)
                hh, tt = torch.meshgrid(heads, tails, indexing="ij")
                ref = m.score(hh.reshape(-1), torch.full((21,), r), tt.reshape(-1)).reshape(3, 7)
            torch.testing.assert_close(block, ref, atol=1e-6, rtol=1e-5)
            assert ((block >= 0) & (block <= 1)).all()

    def test_content_hash_and_config_round_trip(self) -> None:
        import torch

        a, b = self.make(seed=3), self.make(seed=3)
        assert a.content_hash() == b.content_hash() != self.make(seed=4).content_hash()
        with torch.no_grad():
            next(iter(b.parameters())).add_(1e-3)
        assert a.content_hash() != b.content_hash()
        rebuilt = type(a).from_config(a.config())
        rebuilt.load_state_dict(a.state_dict())
        assert rebuilt.content_hash() == a.content_hash()


# ------------------------------------------------------------------------------------------ methods


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


class BaselineMethodCase(MethodCase):
    """MethodCase for a query-embedding baseline's answering method: ``built`` trains a 2-epoch run of the
    model of the same name on the toy query sets of ``tests/baselines/toy.py`` (fixture ``toy``, in
    ``tests/baselines/conftest.py``) and answers its valid set."""

    @pytest.fixture()
    def built(self, toy: tuple[Any, Any], tmp_path: Any) -> tuple[Any, Any]:
        from pipeline.methods import METHODS
        from pipeline.stages.train_qe import train_qe
        from tests.baselines.toy import toy_config

        train_qe(toy_config(toy, self.name, 2), tmp_path / "run", device="cpu", progress=False)
        return METHODS[self.name].build(tmp_path / "run", "cpu"), toy[1]


# ------------------------------------------------------------------------------------------ baselines


class BaselineCase(ComponentCase):
    """What every query-embedding baseline satisfies: two independent scoring paths (all entities in chunks,
    gathered candidates) agree on every plan, and its answering method is registered under the same name."""

    kind = "baselines"

    def test_scoring_paths_agree(self) -> None:
        import torch

        from pipeline.baselines.plan import group_by_plan
        from pipeline.softquery.model import Atom, Const, Query, Var

        X, Y = Var("x"), Var("y")
        torch.manual_seed(0)
        model = self.component()(n_entities=23, n_relations=3, dim=6, hidden=8)
        qs = [
            Query.of([Atom(Const(1), 0, Y, 0.3, 0.7, negated=True), Atom(Const(5), 2, Y)]),
            Query.of([Atom(Const(2), 1, Y)], [Atom(Const(4), 0, X), Atom(X, 1, Y)]),
            Query.of([Atom(Const(3), 0, X), Atom(X, 1, Y), Atom(X, 2, Y)]),
        ]
        for plan, (_, params) in group_by_plan(qs).items():
            full = model.logits(plan, params)
            cand = torch.arange(23).expand(params.batch_size, 23)
            assert full.shape == (params.batch_size, 23) and torch.isfinite(full).all()
            assert torch.allclose(full, model.logits(plan, params, cand), atol=1e-5)

    def test_is_an_answering_method(self) -> None:
        from pipeline.methods import METHODS

        assert METHODS[self.name].name == self.name


# ------------------------------------------------------------------------------------------ calibrations


class CalibrationCase(ComponentCase):
    """What every calibration does on the toy pipeline: its label names the answers, it records delta
    exactly when it chooses one and an L fit exactly when it fits one, and the answers equal the engine's
    on the export with what it recorded applied. Needs the fixture ``toy_pipeline``
    (``tests/calibration/conftest.py``)."""

    kind = "calibrations"

    def test_answers_record_what_was_applied(self, toy_pipeline: dict, tmp_path: Any) -> None:
        from pathlib import Path

        import torch

        from pipeline.engine import Adjacency
        from pipeline.formats.adjacency import load_adjacency
        from pipeline.formats.answers import read_answers
        from pipeline.formats.queryset import read_query_set
        from pipeline.methods import SRC
        from pipeline.methods.src.affine import calibrated_adjacency, feature_tables, load_affine
        from pipeline.models import load_run
        from pipeline.stages.answer import answer_query_set
        from tests.answer.src_entry import answer_src as run_answer

        p, calib = toy_pipeline, self.component()
        rep = run_answer(
            p["test"], p["export"], self.name, tmp_path, p["valid"], p["train"], seed=0, l_epochs=1,
            progress=False, kg=p["kg"],
        )
        ans = read_answers(rep["path"])
        assert ans.label == f"ukge_logi {calib.label}" and ans.meta["calibration"] == self.name
        assert ("delta" in ans.meta) == calib.uses_delta and ("l_dir" in ans.meta) == calib.uses_l
        graph, _ = load_adjacency(p["export"])
        adj = Adjacency.from_graph(graph)
        if calib.uses_l:
            model = load_run(p["run"])
            tables = feature_tables(model, "cpu")
            fitted = load_affine(Path(ans.meta["l_dir"]), tables[0].shape[1], tables[1].shape[1])
            with torch.no_grad():
                adj = calibrated_adjacency(adj, fitted, tables)
        test = read_query_set(p["test"])
        frame, _ = answer_query_set(test, SRC.over(adj, "toy", ans.meta.get("delta", 0.0)), progress=False)
        assert frame.equals(ans.frame)


# ------------------------------------------------------------------------------------------ query types

# The hand-written structure of each query type's template: name -> (atoms, anchors, conjunctions, negated
# atoms), in the paper's column order (tests/softquery/test_types_graph.py checks QUERY_TYPES against it too).
QUERY_TYPE_STRUCTURE: dict[str, tuple[int, int, int, int]] = {
    "1p": (1, 1, 1, 0),
    "2p": (2, 1, 1, 0),
    "2i": (2, 2, 1, 0),
    "2in": (2, 2, 1, 1),
    "2il": (2, 1, 1, 0),
    "2m": (3, 1, 1, 0),
    "2u": (2, 2, 2, 0),
    "3in": (3, 3, 1, 1),
    "ip": (3, 2, 1, 0),
    "im": (4, 2, 1, 0),
    "inp": (3, 2, 1, 1),
    "up": (3, 2, 2, 0),
}


class QueryTypeCase(ComponentCase):
    """What every query type satisfies: its template's structure (QUERY_TYPE_STRUCTURE), recognition of its
    instances after a text round trip, and SRC equal to the brute-force oracle on random instances over
    random KGs."""

    kind = "query-types"

    def test_structure_and_recognition(self) -> None:
        from pipeline.softquery import parse, to_text, type_of

        qt = self.component()
        atoms, anchors, conjs, negs = QUERY_TYPE_STRUCTURE[self.name]
        assert (qt.n_atoms, qt.n_anchors, len(qt.template.conjunctions), sum(qt.negated)) == (atoms, anchors, conjs, negs)
        q = qt.build(list(range(qt.n_atoms)), list(range(10, 10 + qt.n_anchors)))
        assert type_of(q) == self.name and type_of(parse(to_text(q))) == self.name

    def test_engine_equals_oracle(self) -> None:
        """25 seeded random instances over random tiny KGs (alphas that fail some atoms, betas != 1)."""
        import numpy as np

        from pipeline.engine import search_query
        from tests.engine.oracle import dense_conf, oracle
        from tests.engine.test_oracle import assert_same, graph_of

        qt = self.component()
        rng = np.random.default_rng(sum(map(ord, self.name)))
        for _ in range(25):
            n, r = int(rng.integers(2, 6)), int(rng.integers(1, 4))
            cells = [(h, rr, t) for h in range(n) for rr in range(r) for t in range(n)]
            picked = rng.choice(len(cells), size=int(rng.integers(0, len(cells) + 1)), replace=False)
            facts = [(*cells[i], float(rng.choice([0.25, 0.5, 0.75, 1.0]))) for i in picked]
            q = qt.build(
                rng.integers(0, r, qt.n_atoms).tolist(),
                rng.integers(0, n, qt.n_anchors).tolist(),
                rng.choice([0.0, 0.3, 0.6], qt.n_atoms).tolist(),
                rng.choice([0.2, 1.0, 2.5], qt.n_atoms).tolist(),
            )
            assert_same(search_query(q, graph_of(n, r, facts)), oracle(q, dense_conf(n, r, facts)))


# ------------------------------------------------------------------------------------------ metrics


class MetricCase(ComponentCase):
    """What every metric satisfies: over every placement of distinct predictions, the true order gives
    the upper bound and the maximum, and every value lies in [lower, upper]."""

    kind = "metrics"

    @pytest.mark.parametrize(("n_entities", "n_answers"), [(5, 2), (5, 3), (6, 3)])
    def test_extremes_over_all_rankings(self, n_entities: int, n_answers: int) -> None:
        import itertools

        import numpy as np

        from pipeline.core.metrics import Ranked

        m = self.component()
        t = np.r_[np.arange(n_answers, 0, -1), np.zeros(n_entities - n_answers)].astype(np.float64)
        answers = np.arange(n_answers)
        vals = []
        for perm in itertools.permutations(range(n_entities)):
            p = -np.asarray(perm, dtype=np.float64)  # entity e predicted at rank perm[e] + 1
            vals.append(m(Ranked.from_utilities(t, p, answers)))
        vals = np.array(vals)
        perfect = m(Ranked.from_utilities(t, t, answers))
        assert perfect == pytest.approx(m.upper)
        assert vals.max() == pytest.approx(perfect)
        assert m.lower - 1e-12 <= vals.min() and vals.max() <= m.upper + 1e-12


# ------------------------------------------------------------------------------------------ alpha / beta modes


class AlphaModeCase(ComponentCase):
    """Every alpha mode draws levels whose alphas come from the relation's row of the level table.
    A subclass names the ``levels`` its mode draws."""

    kind = "alpha-modes"
    levels: ClassVar[frozenset[str]]

    @staticmethod
    def table() -> Any:
        """The level table the checks read: two relations whose percentiles all differ."""
        from pipeline.sampling.requirements import alpha_table

        return alpha_table({0: (0.2, 0.4, 0.8), 1: (0.1, 0.5, 0.9)}, 2)

    def test_draws_its_levels(self) -> None:
        import numpy as np

        from pipeline.sampling.requirements import ALPHA_LEVELS, alpha_for, draw_level

        table = self.table()
        rng = np.random.default_rng(3)
        drawn = {draw_level(rng, self.name) for _ in range(200)}
        assert drawn == self.levels
        for level in drawn:
            col = ALPHA_LEVELS.index(level)
            assert alpha_for(table, [1, 0], level) == [table[1, col], table[0, col]]


class BetaModeCase(ComponentCase):
    """A beta mode (its checks are its own: each draws differently)."""

    kind = "beta-modes"


# ------------------------------------------------------------------------------------------ executors


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
