"""Calibration D and L on a real (tiny) pipeline: a trained UKGE, its export, engine-computed truths."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.engine import Adjacency, search_batch
from pipeline.engine.adjacency import fact_relations
from pipeline.formats.adjacency import load_adjacency
from pipeline.formats.answers import read_answers
from pipeline.methods.src.affine import (
    AffineCalibration,
    calibrated_adjacency,
    calibrated_graph,
    feature_tables,
    query_relations,
)
from pipeline.models import load_run
from pipeline.softquery.parser import parse
from tests.answer.src_entry import answer_src as run_answer
from tests.cases import CalibrationCase, MethodCase


def test_affine_formula_by_hand() -> None:
    calib = AffineCalibration(1, 1)
    with torch.no_grad():
        calib.w_head.copy_(torch.tensor([[0.5, 0.0]]))  # rho gets 0.5 * e_h
        calib.w_tail.copy_(torch.tensor([[0.0, 0.1]]))  # lambda gets 0.1 * e_t
        calib.bias.copy_(torch.tensor([0.0, -0.2]))
    tables = (torch.tensor([[1.0], [2.0]]), torch.tensor([[0.0]]), torch.tensor([[1.0], [-1.0]]))
    h, r, t = torch.tensor([0, 1, 1]), torch.tensor([0, 0, 0]), torch.tensor([0, 1, 0])
    got = calib.calibrate(torch.tensor([0.4, 0.3, 0.9]), h, r, t, calib.projections(tables))
    # 0.4 * 1.5 + (0.1 - 0.2) = 0.5 · 0.3 * 2 + (-0.1 - 0.2) = 0.3 · 0.9 * 2 + (0.1 - 0.2) = 1.7 -> capped at 1
    assert got.tolist() == pytest.approx([0.5, 0.3, 1.0])
    got = calib.calibrate(
        torch.tensor([0.1]),
        torch.tensor([0]),
        torch.tensor([0]),
        torch.tensor([1]),
        calib.projections(tables),
    )
    assert got.tolist() == [0.0]  # 0.1 * 1.5 - 0.3 < 0: relu


def test_untrained_l_is_the_identity() -> None:
    calib = AffineCalibration(3, 2)
    tables = (torch.randn(5, 3), torch.randn(2, 2), torch.randn(5, 3))
    conf = torch.rand(4)
    idx = torch.tensor([0, 1, 2, 4])
    assert torch.equal(
        calib.calibrate(conf, idx, torch.tensor([0, 1, 1, 0]), idx, calib.projections(tables)), conf
    )


def test_calibrated_index_equals_reindexed_calibrated_graph(toy_pipeline: dict) -> None:
    """Two implementations: calibrating the engine's index in place vs calibrating the facts and indexing again."""
    graph, _ = load_adjacency(toy_pipeline["export"])
    model = load_run(toy_pipeline["run"])
    tables = feature_tables(model)
    calib = AffineCalibration(tables[0].shape[1], tables[1].shape[1])
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in calib.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        fast = calibrated_adjacency(Adjacency.from_graph(graph), calib, tables)
        slow = Adjacency.from_graph(calibrated_graph(graph, calib, tables))
    queries = [
        parse(t)
        for t in (
            "#0(#3, ?y)",
            "#1(#5, ?x, 0.2) & #2(?x, ?y)",
            "!#0(#1, ?y) & #2(?y, ?y)",
            "#0(#2, ?y, 0.5) | #1(?y, #7)",
        )
    ]
    assert torch.equal(search_batch(queries, fast), search_batch(queries, slow))


def test_calibrating_only_the_queried_relations_gives_the_same_answers_and_gradients(
    toy_pipeline: dict,
) -> None:
    graph, _ = load_adjacency(toy_pipeline["export"])
    adj = Adjacency.from_graph(graph)
    tables = feature_tables(load_run(toy_pipeline["run"]))
    calib = AffineCalibration(tables[0].shape[1], tables[1].shape[1])
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in calib.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    queries = [parse("#1(#5, ?x) & #2(?x, ?y)"), parse("!#1(#1, ?y) & #2(?y, ?y)"), parse("#2(#4, ?y)")]
    assert query_relations(queries) == {1, 2}
    grads, utilities = [], []
    for relations in (None, query_relations(queries)):
        calib.zero_grad()
        u = search_batch(queries, calibrated_adjacency(adj, calib, tables, relations))
        u[torch.isfinite(u)].sum().backward()
        utilities.append(u.detach())
        grads.append([p.grad.clone() for p in calib.parameters()])
    assert torch.equal(utilities[0], utilities[1])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads[0], grads[1], strict=True))
    assert any(g.abs().sum() > 0 for g in grads[0])  # the comparison is not between two zero gradients
    # facts of the other relations keep their predicted confidence
    with torch.no_grad():
        part = calibrated_adjacency(adj, calib, tables, [1])
    rel = fact_relations(adj.fwd.ptr, adj.n_entities)
    assert torch.equal(part.fwd.conf[rel != 1], adj.fwd.conf[rel != 1])
    assert not torch.equal(part.fwd.conf[rel == 1], adj.fwd.conf[rel == 1])
    # a batch whose relations have no exported facts still trains (zero gradients), as with the full path
    none = calibrated_adjacency(adj, calib, tables, [])
    assert none.fwd.conf.requires_grad and torch.equal(none.fwd.conf.detach(), adj.fwd.conf)


@pytest.mark.slow
def test_l_and_d_fit_select_cache_and_repeat(toy_pipeline: dict, tmp_path: Path) -> None:
    p = toy_pipeline
    kw = dict(
        valid_queries=p["valid"], train_queries=p["train"], seed=0, l_epochs=6, progress=False, kg=p["kg"]
    )
    rep = run_answer(p["test"], p["export"], "D+L", tmp_path / "a", **kw)
    info = json.loads((Path(rep["l_dir"]) / "L.json").read_text())
    hist = info["history"]
    losses = [e["loss"] for k, e in hist["epochs"].items() if k != "0"]
    assert losses[-1] < losses[0]  # training lowers the squared utility error
    # Shapes the engine cannot differentiate through are named, never silently dropped.
    assert "1p" in hist["shapes_used"]
    assert sorted(hist["shapes_used"] + hist["shapes_skipped"]) == ["1p", "2i", "2in", "2p"]
    assert hist["shapes_skipped"] == []  # the engine is differentiable through every step (2p included)
    assert hist["best_valid"] >= hist["epochs"]["0"]["valid"]  # selection never does worse than no L on valid
    assert rep["delta"] in (0.0, 0.05, 0.1, 0.15, 0.2)
    d_files = list((p["run"] / "calibration").glob("D-*.json"))
    scores = json.loads(d_files[0].read_text())["scores"]
    assert scores[str(rep["delta"])] == max(scores.values())
    # Same inputs and seed: the saved L and delta are reused and the answers are identical.
    mtime = (Path(rep["l_dir"]) / "L.pt").stat().st_mtime_ns
    again = run_answer(p["test"], p["export"], "D+L", tmp_path / "b", **kw)
    assert (Path(rep["l_dir"]) / "L.pt").stat().st_mtime_ns == mtime and again["l_key"] == rep["l_key"]
    a, b = read_answers(rep["path"]).frame, read_answers(again["path"]).frame
    assert a.equals(b)
    # A calibrated answer set differs from the uncalibrated one only through the confidences and alphas.
    plain = read_answers(run_answer(p["test"], p["export"], "none", tmp_path / "c", progress=False)["path"])
    assert plain.label == "ukge_logi SRC" and read_answers(rep["path"]).label == "ukge_logi SRC(D+L)"
    assert set(plain.frame["query_id"]) == set(a["query_id"])


def test_d_plus_l_selects_l_over_the_delta_grid(toy_pipeline: dict, tmp_path: Path) -> None:
    """L alone is selected at delta 0; under D+L, on the best valid score over the delta grid, so the two are
    different saved calibrations, and D+L's identity epoch scores exactly what D alone chose."""
    p = toy_pipeline
    kw = dict(
        valid_queries=p["valid"], train_queries=p["train"], seed=1, l_epochs=2, progress=False, kg=p["kg"]
    )
    l_only = run_answer(p["test"], p["export"], "L", tmp_path / "l", **kw)
    both = run_answer(p["test"], p["export"], "D+L", tmp_path / "dl", **kw)
    d_only = run_answer(p["test"], p["export"], "D", tmp_path / "d", valid_queries=p["valid"], progress=False)
    assert l_only["l_key"] != both["l_key"]
    hist_l = json.loads((Path(l_only["l_dir"]) / "L.json").read_text())["history"]
    hist_dl = json.loads((Path(both["l_dir"]) / "L.json").read_text())["history"]
    d_file = next(
        f
        for f in (p["run"] / "calibration").glob("D-*.json")
        if "train" not in json.loads(f.read_text())["inputs"]
    )
    d_scores = json.loads(d_file.read_text())["scores"]
    assert d_scores[str(d_only["delta"])] == max(d_scores.values())
    assert hist_dl["epochs"]["0"]["valid"] == pytest.approx(max(d_scores.values()))
    assert hist_l["epochs"]["0"]["valid"] == pytest.approx(d_scores["0.0"])


@pytest.mark.slow
def test_refit_from_scratch_is_deterministic(toy_pipeline: dict, tmp_path: Path) -> None:
    import shutil

    p = toy_pipeline
    run_copy = tmp_path / "run"
    shutil.copytree(p["run"], run_copy, ignore=shutil.ignore_patterns("calibration"))
    outs = []
    for i in range(2):
        shutil.rmtree(run_copy / "calibration", ignore_errors=True)
        rep = run_answer(
            p["test"],
            p["export"],
            "L",
            tmp_path / f"o{i}",
            None,
            p["train"],
            run_copy,
            seed=5,
            l_epochs=2,
            progress=False,
            kg=p["kg"],
        )
        outs.append(torch.load(Path(rep["l_dir"]) / "L.pt"))
    assert outs[0].pop("sha256") == outs[1].pop("sha256")  # L.pt's checksum of its content
    for k in outs[0]:
        assert torch.equal(outs[0][k], outs[1][k])
    assert any(v.abs().sum() > 0 for v in outs[0].values())  # it did learn something


def test_cli_answer_and_evaluate(toy_pipeline: dict, tmp_path: Path) -> None:
    p = toy_pipeline
    res = CliRunner().invoke(
        cli,
        [
            "answer",
            str(p["test"]),
            "--adjacency",
            str(p["export"]),
            "--calibration",
            "D",
            "--valid-queries",
            str(p["valid"]),
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["method"] == "ukge_logi SRC(D)" and set(doc["throughput"]) == {"1p", "2i", "2in", "2p"}
    res = CliRunner().invoke(cli, ["evaluate", doc["path"], "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)[0]["summary"]
    assert set(summary) == {"tau", "rho", "map", "ndcg"}
    assert all(-100 <= v <= 100 for by in summary.values() for v in by.values() if not math.isnan(v))


def test_cli_answer_errors_are_one_line(toy_pipeline: dict, tmp_path: Path) -> None:
    p = toy_pipeline
    res = CliRunner().invoke(
        cli, ["answer", str(p["test"]), "--adjacency", str(p["export"]), "--calibration", "D"]
    )
    assert res.exit_code == 2 and "--valid-queries" in res.output and res.output.count("\n") == 1
    res = CliRunner().invoke(cli, ["answer", str(p["test"]), "--adjacency", str(tmp_path)])
    assert res.exit_code == 2 and "not a neural adjacency export" in res.output
    res = CliRunner().invoke(
        cli, ["answer", str(p["test"]), "--adjacency", str(p["export"]), "--calibration", "L"]
    )
    assert res.exit_code == 2 and "--train-queries" in res.output


def test_cli_answer_write_back(toy_pipeline: dict, fresh_store, tmp_path: Path) -> None:
    import numpy as np

    p = toy_pipeline
    fresh_store.ensure_index("Entity", "eid")
    n = p["kg"].n_entities
    fresh_store.create_entities("toy", np.arange(n), [f"e{i}" for i in range(n)])
    uri = f"falkordb://{fresh_store.host}:{fresh_store.port}/{fresh_store.graph}"
    args = [
        "answer",
        str(p["test"]),
        "--adjacency",
        str(p["export"]),
        "--out",
        str(tmp_path),
        "--write-back",
        "--store",
        uri,
        "--json",
    ]
    for _ in range(2):  # the second run replaces the first
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    frame = read_answers(doc["path"]).frame
    expected = int(((frame["rank"] <= 10) & np.isfinite(frame["utility"])).sum())
    assert doc["written_back"] == {"answers": expected, "witnesses": 0, "atoms": 0}
    rows = fresh_store.run("MATCH (:Query)-[a:ANSWER]->(:Entity) RETURN a.method AS m, count(a) AS n")
    assert rows == [{"m": "ukge_logi SRC", "n": expected}]


def test_batch_loss_mixes_shapes_and_reaches_existential_facts() -> None:
    """One batch of a 1p and a 2p query (two shapes in one engine call): the loss with non-answers weighted
    0 is the mean squared error over the true answers, and its gradient reaches the facts that the 2p
    query's existential step chose (r0(0, 1): the best x for every y)."""
    import numpy as np

    from pipeline.core.kg import GraphTensors
    from pipeline.methods.src.loss import batch_loss
    from pipeline.softquery.model import FREE, Atom, Conjunction, Const, Query, Var

    x = Var("x")
    one = Query((Conjunction((Atom(Const(0), 0, FREE),)),))
    two = Query((Conjunction((Atom(Const(0), 0, x), Atom(x, 1, FREE))),))
    h, r, t = np.array([0, 0, 1, 2]), np.array([0, 0, 1, 1]), np.array([1, 2, 3, 3])
    pred = GraphTensors.from_arrays(h, r, t, np.array([0.9, 0.5, 0.7, 0.8], np.float32), 4, 2)
    true = GraphTensors.from_arrays(h, r, t, np.array([1.0, 0.5, 0.5, 0.8], np.float32), 4, 2)
    true_u = search_batch([one, two], true)
    conf = pred.conf.clone().requires_grad_(True)
    from dataclasses import replace

    loss = batch_loss(
        search_batch,
        [one, two],
        Adjacency.from_graph(replace(pred, conf=conf)),
        true_u,
        8,
        torch.Generator().manual_seed(0),
        negative_weight=0.0,
    )
    # answers: 1p y=1 (0.9 vs 1.0), y=2 (0.5 vs 0.5); 2p y=0,1,2 via x=1 (0.9 vs 1.0), y=3 (1.6 vs 1.5)
    errs = [0.1**2, 0.0, 0.1**2, 0.1**2, 0.1**2, 0.1**2]
    assert loss.item() == pytest.approx(sum(errs) / len(errs), rel=1e-4)
    loss.backward()
    g = dict(
        zip(
            zip(pred.head.tolist(), pred.rel.tolist(), pred.tail.tolist(), strict=True),
            conf.grad.tolist(),
            strict=True,
        )
    )
    # d/dc(0,0,1): 1p y=1 (2 * -0.1) + 2p y=0..3 (3 * 2 * -0.1 + 2 * 0.1), over 6 errors
    assert g[(0, 0, 1)] == pytest.approx((-0.2 - 0.6 + 0.2) / 6, abs=1e-5)
    assert g[(1, 1, 3)] == pytest.approx(0.2 / 6, abs=1e-5) and g[(2, 1, 3)] == 0.0


def test_leakage_a_test_set_as_valid_or_train_is_refused(toy_pipeline: dict, tmp_path: Path) -> None:
    """The test set passed as --valid-queries (or --train-queries) used to be accepted with the output saying
    "chosen on the valid queries"; the query set knows its split, so the role is checked (unless forced, and
    then recorded)."""
    p = toy_pipeline
    args = ["answer", str(p["test"]), "--adjacency", str(p["export"]), "--out", str(tmp_path)]
    res = CliRunner().invoke(cli, [*args, "--calibration", "D", "--valid-queries", str(p["test"])])
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "a query set of the test split, not valid" in res.output
    res = CliRunner().invoke(cli, [*args, "--calibration", "L", "--train-queries", str(p["valid"])])
    assert res.exit_code == 2 and "a query set of the valid split, not train" in res.output
    res = CliRunner().invoke(
        cli, [*args, "--calibration", "D", "--valid-queries", str(p["test"]), "--allow-split-mismatch", "--json"]
    )
    assert res.exit_code == 0, res.output
    used = read_answers(json.loads(res.stdout)["path"]).meta["used"]
    assert used["valid"]["split"] == "test" and used["valid"]["path"] == str(p["test"])


def test_out_naming_an_existing_file_is_one_line(toy_pipeline: dict, tmp_path: Path) -> None:
    p = toy_pipeline
    taken = tmp_path / "taken"
    taken.write_text("x")
    for args in (
        ["answer", str(p["test"]), "--adjacency", str(p["export"]), "--out", str(taken)],
        ["sample", "toy", "--out", str(taken)],
        ["train", "ppi5k", "--model", "ukge_logi", "--out", str(taken)],
    ):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and res.output == f"error: --out {taken}: an existing file, not a folder\n", args
    assert taken.read_text() == "x"  # untouched


class TestNoCalibration(CalibrationCase):
    name = "none"


class TestCalibrationD(CalibrationCase):
    name = "D"


class TestCalibrationL(CalibrationCase):
    name = "L"


class TestCalibrationDL(CalibrationCase):
    name = "D+L"


class TestSRC(MethodCase):
    name = "src"

    @pytest.fixture()
    def built(self, toy_pipeline: dict) -> tuple[Any, Path]:
        from pipeline.methods import SRC

        return SRC.load(toy_pipeline["export"], "toy", kg=toy_pipeline["kg"]), toy_pipeline["test"]

    def test_utilities_are_the_engines(self, built: tuple[Any, Path], toy_pipeline: dict) -> None:
        from pipeline.engine import search_batch
        from pipeline.formats.queryset import read_query_set

        queries = [q for q in read_query_set(toy_pipeline["test"]).queries() if len(q.atoms) == 1][:4]
        graph, _ = load_adjacency(toy_pipeline["export"])
        assert torch.equal(built[0].utilities(queries), search_batch(queries, Adjacency.from_graph(graph)))


def test_answer_refuses_an_export_of_other_sizes(toy_pipeline: dict, tmp_path: Path) -> None:
    """`query` refused an export whose entity count differs from the data set's while `answer` accepted it;
    both now check it where the export is read."""
    import dataclasses

    from pipeline.core.errors import ArtifactError

    p = toy_pipeline
    smaller = dataclasses.replace(p["kg"], entities=p["kg"].entities.iloc[:-1])
    with pytest.raises(ArtifactError, match=f"an export of {p['kg'].n_entities} entities, but toy has {p['kg'].n_entities - 1}"):
        run_answer(p["test"], p["export"], "none", tmp_path, progress=False, kg=smaller)
