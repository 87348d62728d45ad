"""Calibration L's settings: declared once (LOptions) and offered by `pipeline answer`, `pipeline
reproduce` and pl.answer; resolved per variant (recipe.l_config); what each changes, checked by hand
(the authors' schedule and weighting, the pull to the identity, the score form at the identity) and
recorded in the saved calibration (its key and L.json) on the toy pipeline."""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.errors import PipelineError
from pipeline.methods.options import LOptions, MethodOptions
from pipeline.methods.src.recipe import VARIANTS, LConfig, authors_drops, l_config
from tests.answer.src_entry import answer_src


def l_fields() -> list[str]:
    from dataclasses import fields

    return [f.name for f in fields(LOptions)]


# ------------------------------------------------------------------------------------------ one declaration


def test_every_l_setting_is_an_option_of_answer_reproduce_and_the_api() -> None:
    import pipeline as pl

    names = l_fields()
    assert {"l_lr", "l_steps", "l_batch", "l_weights", "l_train", "l_variant"} <= set(names)
    params = inspect.signature(pl.answer).parameters
    for cmd in ("answer", "reproduce"):
        text = CliRunner().invoke(cli, [cmd, "--help"], terminal_width=200).output
        for n in names:
            assert "--" + n.replace("_", "-") in text, (cmd, n)
    for n in names:
        assert n in params and params[n].kind is inspect.Parameter.KEYWORD_ONLY
    # the method's own options come first in the signature, L's after them
    order = list(params)
    assert order.index("calibration") < order.index("l_variant")


def test_a_bad_l_value_is_one_line_at_either_door(toy_pipeline: dict) -> None:
    with pytest.raises(PipelineError, match="l_lr=-1.0: must be greater than 0"):
        MethodOptions(l_lr=-1.0)
    with pytest.raises(PipelineError, match="l_variant='paper': expected one of default, authors, heldout"):
        MethodOptions(l_variant="paper")
    res = CliRunner().invoke(cli, ["answer", str(toy_pipeline["test"]), "--adjacency", str(toy_pipeline["export"]),
                                   "--l-weights", "sqrt"])
    assert res.exit_code == 2 and "--l-weights" in res.output
    # an L setting without calibration L is refused (it would be ignored)
    res = CliRunner().invoke(cli, ["answer", str(toy_pipeline["test"]), "--adjacency", str(toy_pipeline["export"]),
                                   "--calibration", "D", "--valid-queries", str(toy_pipeline["valid"]), "--l-lr", "0.01"])
    assert res.exit_code == 2 and res.output == "error: --l-lr 0.01: does nothing without --calibration L or D+L\n"
    with pytest.raises(PipelineError, match=r"l_shapes=\('1p', '3p'\): unknown query type '3p'"):
        LOptions(l_shapes=("1p", "3p"))
    assert LOptions(l_shapes=("1P", "2I", "1p")).l_shapes == ("1p", "2i")  # canonical, once
    with pytest.raises(PipelineError, match="l_shapes='1p,2u': 2u not a train query type"):
        l_config(LOptions(l_shapes=("1p", "2U")), 0)
    with pytest.raises(PipelineError, match="l_epochs=0: calibration L would train no step"):
        MethodOptions(calibration="l", l_epochs=0)
    assert l_config(MethodOptions(calibration="D+L", l_epochs=0, l_steps=5), 0).steps == 5


def test_reproduce_records_the_l_settings_in_its_config_and_keys(tmp_path: Path) -> None:
    from dataclasses import asdict

    from pipeline.stages.reproduce import ReproduceConfig

    cfg = ReproduceConfig(dataset="toy", l_settings={"l_lr": 5e-5, "l_shapes": ["1p", "2i"], "l_variant": "default"})
    assert cfg.l_settings == {"l_lr": 5e-5, "l_shapes": ("1p", "2i")}  # defaults dropped, names canonical
    (tmp_path / "reproduce.json").write_text(json.dumps({"config": asdict(cfg)}))
    assert ReproduceConfig.from_file(tmp_path / "reproduce.json", "toy") == cfg  # as --config replays it
    with pytest.raises(PipelineError, match="l_batch=0"):
        ReproduceConfig(dataset="toy", l_settings={"l_batch": 0})


# ------------------------------------------------------------------------------------------------ recipes


def test_variants_resolve_to_their_recipe_and_options_override_them() -> None:
    assert l_config(None, 3) == LConfig(seed=3)
    authors = l_config(LOptions(l_variant="authors"), 0)
    assert (authors.lr, authors.steps, authors.batch_size, authors.negatives, authors.check_every) == (5e-6, 5000, 64, 128, 500)
    assert (authors.weights, authors.train, authors.form, authors.schedule) == ("authors", "affine+relations", "score", "authors")
    assert authors.shapes == ("1p", "2i")
    mixed = l_config(LOptions(l_variant="authors", l_lr=1e-4, l_steps=0, l_epochs=3), 0)
    assert (mixed.lr, mixed.steps, mixed.epochs, mixed.negatives) == (1e-4, 0, 3, 128)
    assert l_config(LOptions(l_variant="heldout"), 0) == VARIANTS["heldout"]
    held = VARIANTS["heldout"]
    assert (held.targets, held.terms, held.lr) == ("valid", "relation", 1e-4) and held.identity > 0


def test_the_authors_schedule_by_hand() -> None:
    """Their loop: lr /= 5 (Adam restarted) when step >= 2500, then the next drop at 1.5x: 3750, 5625."""
    assert [authors_drops(s) for s in (1, 2499, 2500, 3749, 3750, 5000, 5624, 5625)] == [0, 0, 1, 1, 2, 2, 2, 3]
    cfg = LConfig(lr=5e-6, schedule="authors")
    assert cfg.lr_at(1) == 5e-6 and cfg.lr_at(2500) == pytest.approx(1e-6) and cfg.lr_at(5000) == pytest.approx(2e-7)
    assert LConfig(lr=0.01).lr_at(4000) == 0.01


# ------------------------------------------------------------------------------------------------- losses


def test_the_authors_weighting_by_hand() -> None:
    """Query A: 1 answer (true 0.9), every prediction 0.5; query B: 5 answers (true 0.7), every prediction 0.3.
    Whatever answer and negatives are drawn: e_pos = 0.16 and 0.16, e_neg = 0.25 and 0.09 (target 0, answers
    drawn among the negatives included), weights 1/sqrt(1 + 4) and 1/sqrt(5 + 4)."""
    from pipeline.methods.src.loss import authors_loss

    true_u = torch.zeros(2, 8)
    true_u[0, 3] = 0.9
    true_u[1, :5] = 0.7
    pred = torch.tensor([[0.5] * 8, [0.3] * 8])
    wa, wb = 1 / math.sqrt(5), 1 / math.sqrt(9)
    want = (wa * 0.16 + wb * 0.16) / (wa + wb) + (wa * 0.25 + wb * 0.09) / (wa + wb)
    for seed in range(3):
        got = authors_loss(pred, true_u, 128, torch.Generator().manual_seed(seed))
        assert got.item() == pytest.approx(want, rel=1e-6)


def test_the_authors_loss_draws_one_answer_and_reaches_it() -> None:
    """One answer per query is drawn (uniformly among its answers): its gradient is at that entity only,
    and over many draws each answer is drawn about equally."""
    from pipeline.methods.src.loss import authors_loss

    true_u = torch.tensor([[0.0, 0.6, 0.0, 0.6, 0.6, 0.0]])
    hits = np.zeros(6)
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        pred = torch.full((1, 6), 0.2, requires_grad=True)
        authors_loss(pred, true_u, 0, gen).backward()
        hits += (pred.grad[0] != 0).numpy()
    assert hits[[0, 2, 5]].sum() == 0 and hits.sum() == 300 and hits[[1, 3, 4]].min() > 70


def test_the_pull_to_the_identity_by_hand(toy_pipeline: dict) -> None:
    """0 at the identity; with lambda = +0.05 everywhere (bias), each stored confidence c moves to
    min(1, c + 0.05): the mean squared change of the sampled facts."""
    from pipeline.engine import Adjacency
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.methods.src.affine import AffineCalibration, feature_tables
    from pipeline.methods.src.loss import IDENTITY_SAMPLE, identity_pull
    from pipeline.models import load_run

    graph, _ = load_adjacency(toy_pipeline["export"])
    adj = Adjacency.from_graph(graph)
    tables = feature_tables(load_run(toy_pipeline["run"]))
    calib = AffineCalibration(tables[0].shape[1], tables[1].shape[1])
    assert identity_pull(calib, adj, tables, torch.Generator().manual_seed(0)).item() == 0.0
    with torch.no_grad():
        calib.bias.copy_(torch.tensor([0.0, 0.05]))
    gen = torch.Generator().manual_seed(4)
    got = identity_pull(calib, adj, tables, gen).item()
    pos = torch.randint(0, adj.fwd.conf.numel(), (IDENTITY_SAMPLE,), generator=torch.Generator().manual_seed(4))
    c = adj.fwd.conf[pos].double()
    assert got == pytest.approx(float(((c + 0.05).clamp(max=1.0) - c).pow(2).mean()), rel=1e-5)


# ---------------------------------------------------------------------------------------------- score form


def test_the_score_form_at_the_identity_is_the_exported_confidence(toy_pipeline: dict) -> None:
    """At 0 the score form recomputes each stored fact's confidence from the backbone (sigmoid(w<h,r,t> + b)):
    the export's values to float summation order; a lambda that lowers the score drops facts under the
    threshold (0), the others keep the mapping of the shifted score."""
    from pipeline.engine import Adjacency
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.methods.src.affine import calibrated_adjacency, feature_tables, make_calibration
    from pipeline.models import load_run

    graph, manifest = load_adjacency(toy_pipeline["export"])
    adj = Adjacency.from_graph(graph)
    model = load_run(toy_pipeline["run"])
    tables = feature_tables(model)
    calib = make_calibration(LConfig(form="score", train="affine+relations"), model, tables, manifest["threshold"])
    assert calib.rel_shift is not None and calib.rel_shift.shape == model.rel.shape
    with torch.no_grad():
        same = calibrated_adjacency(adj, calib, tables)
    assert torch.allclose(same.fwd.conf, adj.fwd.conf, atol=1e-6) and torch.allclose(same.bwd.conf, adj.bwd.conf, atol=1e-6)
    w = float(model.w.detach())
    with torch.no_grad():
        calib.bias.copy_(torch.tensor([0.0, -0.5 / w]))  # the raw score lowered by 0.5 / w: the logit by 0.5
        low = calibrated_adjacency(adj, calib, tables).fwd.conf
    x = torch.logit(adj.fwd.conf.double())  # w<h,r,t> + b of each stored fact
    want = torch.sigmoid(x - 0.5)
    want = torch.where(want >= manifest["threshold"], want, torch.zeros_like(want))
    assert torch.allclose(low.double(), want, atol=1e-4)
    assert (low == 0).any() and (low > 0).any()


def test_the_score_form_needs_a_ukge_backbone() -> None:
    from pipeline.methods.src.score_form import ScoreCalibration

    class Box:
        name = "beurre"

    with pytest.raises(PipelineError, match="needs a UKGE backbone"):
        ScoreCalibration(Box(), 2, 2, 0.1, False)
    from pipeline.methods.src.affine import make_calibration

    with pytest.raises(PipelineError, match="use l_form=score"):
        make_calibration(LConfig(train="affine+relations"), None, (torch.zeros(1, 2), torch.zeros(1, 2)), 0.1)


# ------------------------------------------------------------------------------- recorded in the saved fit


@pytest.mark.slow
def test_settings_change_the_fit_and_are_recorded_in_its_key_and_l_json(toy_pipeline: dict, tmp_path: Path) -> None:
    p = toy_pipeline
    common = dict(valid_queries=p["valid"], train_queries=p["train"], progress=False, kg=p["kg"], seed=0)
    base = answer_src(p["test"], p["export"], "L", tmp_path / "a", l_epochs=1, **common)
    rep = answer_src(p["test"], p["export"], "L", tmp_path / "b", l_epochs=1, l_lr=0.02, l_batch=5, l_negatives=3,
                     l_steps=7, l_check_every=3, l_shapes=("1p", "2i"), l_identity=0.5, **common)
    assert rep["l_key"] != base["l_key"]
    doc = json.loads((Path(rep["l_dir"]) / "L.json").read_text())
    rec = doc["history"]["config"]
    assert doc["inputs"]["l_config"] == rec
    assert (rec["lr"], rec["batch_size"], rec["negatives"], rec["steps"], rec["check_every"], rec["identity"]) == (
        0.02, 5, 3, 7, 3, 0.5)
    assert rec["shapes"] == ["1p", "2i"] and rec["variant"] == "default"
    hist = doc["history"]
    assert [e["step"] for e in hist["epochs"].values()] == [0, 3, 6, 7]  # checks every 3 steps, and the last
    assert hist["shapes_used"] == ["1p", "2i"] and sorted(hist["shapes_left_out"]) == ["2in", "2p"]
    assert hist["best_valid"] == max(e["valid"] for e in hist["epochs"].values())


@pytest.mark.slow
def test_the_authors_variant_fits_saves_and_applies_its_relations(toy_pipeline: dict, tmp_path: Path) -> None:
    """l_variant=authors on the toy pipeline (a few steps at a large rate, no valid set: the last check is
    kept): the saved L holds trained relation offsets, L.json its recipe, and the answers are the engine's
    over the export recalibrated from the saved L (the one place a saved L is applied)."""
    from pipeline.engine import Adjacency
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.formats.answers import read_answers
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods import SRC
    from pipeline.methods.src.affine import calibrated_adjacency, feature_tables, load_calibration
    from pipeline.models import load_run
    from pipeline.stages.answer import answer_query_set

    p = toy_pipeline
    rep = answer_src(p["test"], p["export"], "L", tmp_path, None, p["train"], progress=False, kg=p["kg"], seed=0,
                     l_variant="authors", l_steps=6, l_check_every=3, l_lr=0.05)
    folder = Path(rep["l_dir"])
    rec = json.loads((folder / "L.json").read_text())["history"]["config"]
    assert (rec["form"], rec["train"], rec["weights"], rec["schedule"]) == ("score", "affine+relations", "authors", "authors")
    state = torch.load(folder / "L.pt")
    assert "rel_shift" in state and state["rel_shift"].abs().sum() > 0
    graph, manifest = load_adjacency(p["export"])
    model = load_run(p["run"])
    tables = feature_tables(model)
    calib = load_calibration(folder, model, tables, "cpu", manifest["threshold"])
    with torch.no_grad():
        adj = calibrated_adjacency(Adjacency.from_graph(graph), calib, tables)
    frame, _ = answer_query_set(read_query_set(p["test"]), SRC.over(adj, "toy"), progress=False)
    assert frame.equals(read_answers(rep["path"]).frame)


# ------------------------------------------------------------------------------------ what the tables say


def test_the_log_line_says_when_l_keeps_the_identity_and_what_each_check_lost() -> None:
    from pipeline.stages.reproduce import l_checks, l_verdict
    from tests.results_pages import tables

    hist = {"epochs": {"0": {"loss": None, "valid": 70.74, "step": 0}, "1": {"loss": 0.5, "valid": 70.21, "step": 16},
                       "2": {"loss": 0.4, "valid": 70.74, "step": 32}}, "best": 0, "config": {"steps": 0}}
    assert l_verdict(hist) == ("L kept the identity (valid score 70.74): every one of its 2 epochs scored lower "
                               "or the same (1: -0.53, 2: +0.00)")
    hist["epochs"]["2"]["valid"] = 71.0
    hist["best"] = 2
    assert l_verdict(hist) == ("L kept epoch 2 of 2 (valid score 71.00, +0.26 over the identity's 70.74; "
                               "by epoch: 1: -0.53, 2: +0.26)")
    steps = {"epochs": {"0": {"loss": None, "valid": 50.0, "step": 0},
                        "1": {"loss": 0.1, "valid": 49.5, "step": 500, "deltas": {"0": 49.5, "0.05": 49.0}}},
             "best": 0, "config": {"steps": 5000}}
    assert l_verdict(steps).endswith("every one of its 1 steps scored lower or the same (500: -0.50)")
    # what the reproduction records of each L, and the table the Calibration L page renders from it
    assert l_checks(steps) == {"kept": 0, "checks": [{"valid": 50.0, "loss": None},
                                                     {"valid": 49.5, "loss": 0.1, "step": 500, "delta": 0.0}]}
    table = tables().l_table({"ukge_logi D+L": l_checks(steps), "ukge_logi L": l_checks(hist)})
    assert table[0] == "| check | ukge_logi L: valid | ukge_logi L: loss | ukge_logi D+L: valid | ukge_logi D+L: loss |"
    assert table[2] == "| identity | 70.74 |  | **50.00** |  |"
    assert table[3] == "| 1 (step 500) | 70.21 | 0.5000 | 49.50 (delta 0) | 0.1000 |"
    assert table[4] == "| 2 | **71.00** | 0.4000 |  |  |"


@pytest.mark.slow
def test_relation_terms_reorder_no_fact_within_its_relation(toy_pipeline: dict, tmp_path: Path) -> None:
    """l_terms=relation: the head and tail weights stay 0 while the relation's move; the calibrated
    confidences keep each relation's order of its facts (ties aside: relu and the cap at 1 may merge)."""
    from pipeline.engine import Adjacency
    from pipeline.engine.adjacency import fact_relations
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.methods.src.affine import calibrated_adjacency, feature_tables, load_calibration
    from pipeline.models import load_run

    p = toy_pipeline
    rep = answer_src(p["test"], p["export"], "L", tmp_path, None, p["train"], progress=False, kg=p["kg"], seed=0,
                     l_terms="relation", l_steps=5, l_lr=0.05)
    state = torch.load(Path(rep["l_dir"]) / "L.pt")
    assert not state["w_head"].any() and not state["w_tail"].any() and state["w_rel"].abs().sum() > 0
    graph, manifest = load_adjacency(p["export"])
    adj = Adjacency.from_graph(graph)
    model = load_run(p["run"])
    tables = feature_tables(model)
    calib = load_calibration(Path(rep["l_dir"]), model, tables, "cpu", manifest["threshold"])
    with torch.no_grad():
        new = calibrated_adjacency(adj, calib, tables).fwd.conf
    rel = fact_relations(adj.fwd.ptr, adj.n_entities)
    for r in rel.unique().tolist():
        old_r, new_r = adj.fwd.conf[rel == r], new[rel == r]
        order = torch.argsort(old_r)
        assert bool((new_r[order].diff() >= 0).all())  # monotone in the exported confidence
        assert not torch.equal(old_r, new_r)
