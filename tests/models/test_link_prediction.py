"""Link prediction as the unKR benchmark computes it (pipeline.models.link_prediction): ranks by hand on a
tiny KG with fixed scores, unKR's own rank formula (a double argsort) and a plain loop over triples against
the batched code on random cases, ties, both directions, the batch size, out-of-memory, NaN, and the
figures a trained run and docs/results.json's backbones carry."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn

from loaders.base import KGData
from pipeline.core.errors import PipelineError
from pipeline.models import default_config, load_run, read_run, train
from pipeline.models.base import ConfidenceModel
from pipeline.models.evaluation import backbone_summary
from pipeline.models.link_prediction import (
    KnownAnswers,
    RankCounts,
    link_prediction,
    query_ranks,
    rank_counts,
    rank_metrics,
    scorer,
)
from tests.models.toy import toy_kg


class FixedScores(ConfidenceModel):
    """A model whose confidence of (h, r, t) is table[r, h, t]."""

    name = "fixed"

    def __init__(self, table: Tensor) -> None:
        super().__init__(table.shape[1], table.shape[0], 1)
        self.table = nn.Parameter(table.float(), requires_grad=False)

    def forward(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        return self.table[r, h, t]

    def score_block(self, heads: Tensor, r: int, tails: Tensor) -> Tensor:
        return self.table[r][heads][:, tails]


def make_kg(rows: list[tuple[int, int, int, float, str]], n_entities: int, n_relations: int,
            negatives: list[tuple[int, int, int]] = ()) -> KGData:
    frame = pd.DataFrame(rows, columns=["h", "r", "t", "conf", "split"])
    frame["split"] = pd.Categorical(frame["split"], categories=["train", "val", "test"])
    frame["line"] = np.arange(1, len(frame) + 1)
    return KGData(
        name="hand",
        entities=pd.DataFrame({"eid": np.arange(n_entities), "name": [f"e{i}" for i in range(n_entities)]}),
        relations=pd.DataFrame({"rid": np.arange(n_relations), "name": [f"r{i}" for i in range(n_relations)]}),
        rows=frame[["h", "r", "t", "conf", "split", "line"]],
        test_negatives=pd.DataFrame(list(negatives), columns=["h", "r", "t"], dtype="int64"),
        softlogic=None,
        checksums={"hand": "1"},
    )


def hand_example() -> tuple[FixedScores, KGData]:
    """5 entities, 2 relations. r0: row h=0 scores the tails 0.6 0.9 0.6 0.3 0.8, column t=2 scores the
    heads 0.6 0.1 0.7 0.6 0.2; r1: row h=3 ties every tail at 0.5 (a clamped model), column t=0 scores the
    heads 0.3 0.9 0.1 0.5 0.5. The test file ranks (0, r0, 2) twice (a duplicate row) and (3, r1, 0); its
    sampled negative (0, r0, 3) is no fact: neither ranked nor filtered."""
    table = torch.full((2, 5, 5), 0.05)
    table[0, 0] = torch.tensor([0.6, 0.9, 0.6, 0.3, 0.8])
    table[0, :, 2] = torch.tensor([0.6, 0.1, 0.7, 0.6, 0.2])
    table[1, 3] = 0.5
    table[1, :, 0] = torch.tensor([0.3, 0.9, 0.1, 0.5, 0.5])
    rows = [
        (0, 0, 1, 0.8, "train"), (2, 0, 2, 0.5, "train"),
        (0, 0, 4, 0.5, "val"),
        (0, 0, 2, 0.9, "test"), (0, 0, 2, 0.7, "test"), (3, 1, 0, 0.4, "test"),
    ]
    return FixedScores(table), make_kg(rows, 5, 2, negatives=[(0, 0, 3)])


def test_ranks_by_hand() -> None:
    model, kg = hand_example()
    got = link_prediction(model, kg, "test")
    assert got["rows"] == 3
    # tails. (0, r0, 2), score 0.6: raw, 0.9 (t1) and 0.8 (t4) above, t0 tied with a smaller id -> rank 4;
    # filtered, t1 (train) and t4 (valid) removed, t0 still tied before it -> rank 2 (t3, a negative, stays).
    # (3, r1, 0): every tail tied at 0.5, the target has the smallest id -> rank 1 raw and filtered.
    tail = got["tail"]["filtered"]
    assert tail["mrr"] == pytest.approx((1 / 2 + 1 / 2 + 1) / 3)
    assert tail["mr"] == pytest.approx(5 / 3)
    assert (tail["hits@1"], tail["hits@3"], tail["hits@10"]) == pytest.approx((1 / 3, 1, 1))
    assert tail["tied"] == 1.0
    # over random orders of the ties: positions {1, 2} for the first two rows, {1..5} for the last
    assert tail["mrr_expected"] == pytest.approx((0.75 + 0.75 + (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 5) / 3)
    assert tail["mr_expected"] == pytest.approx((1.5 + 1.5 + 3) / 3)
    assert tail["hits@1_expected"] == pytest.approx((0.5 + 0.5 + 0.2) / 3)
    assert tail["wmrr"] == pytest.approx((0.9 / 2 + 0.7 / 2 + 0.4) / 2.0)
    assert tail["wmr"] == pytest.approx((0.9 * 2 + 0.7 * 2 + 0.4 * 1) / 2.0)
    assert got["tail"]["raw"]["mrr"] == pytest.approx((1 / 4 + 1 / 4 + 1) / 3)
    # heads. (?, r0, 2), score 0.6: raw, 0.7 (h2) above, h3 tied with a larger id -> rank 2; filtered, h2
    # (train fact (2, r0, 2)) removed -> rank 1. (?, r1, 0), score 0.5: 0.9 (h1) above, h4 tied after -> 2.
    assert got["head"]["filtered"]["mrr"] == pytest.approx((1 + 1 + 1 / 2) / 3)
    assert got["head"]["raw"]["mrr"] == pytest.approx(1 / 2)
    # both directions together, as unKR's prediction="all": ranks 2 2 1 | 1 1 2
    assert got["both"]["filtered"]["mrr"] == pytest.approx(4.5 / 6)
    assert got["both"]["filtered"]["mr"] == pytest.approx(9 / 6)
    # unKR's high-confidence rows (>= 0.7): the two rows of (0, r0, 2)
    high = got["high_confidence"]
    assert high["rows"] == 2 and high["tail"]["filtered"]["mrr"] == pytest.approx(0.5)
    # MSE/MAE over the ranked rows, duplicates included: predictions 0.6, 0.6, 0.5 against 0.9, 0.7, 0.4
    assert got["errors"]["mse"] == pytest.approx((0.09 + 0.01 + 0.01) / 3)
    assert got["errors"]["mae"] == pytest.approx(0.5 / 3)
    # other rows to rank (another copy of the test file): the test rows plus a train fact (0, r0, 1), whose
    # tail scores 0.9, the best -> rank 1; the filter is still the test graph
    test_rows = kg.rows[kg.rows["split"] == "test"]
    same = link_prediction(model, kg, rows=test_rows)
    assert {k: v for k, v in same.items() if k != "seconds"} == {k: v for k, v in got.items() if k != "seconds"}
    more = pd.concat([test_rows, kg.rows[(kg.rows["split"] == "train") & (kg.rows["t"] == 1)]])
    assert link_prediction(model, kg, rows=more)["tail"]["filtered"]["mrr"] == pytest.approx((1 / 2 + 1 / 2 + 1 + 1) / 4)
    # valid: (0, r0, 4), score 0.8: raw, t1 above -> 2; filtered, t1 and t2 (test) removed -> 1
    valid = link_prediction(model, kg, "val")
    assert valid["tail"]["filtered"]["mrr"] == 1.0 and valid["tail"]["raw"]["mrr"] == 0.5


def unkr_rank(scores: Tensor, target: int, filtered: set[int]) -> int:
    """unKR's calc_ranks for one query (src/unKR/eval_task/link_prediction.py), written as it is there:
    filtered candidates scored -1e7, the target's score put back, 1 + argsort(argsort(descending)) at the
    target; with the stable sort a GPU uses for rows of more than 4,096 entries."""
    s = scores.clone()
    keep = s[target].clone()
    for e in filtered:
        s[e] = -1e7
    s[target] = keep
    order = torch.argsort(s, descending=True, stable=True)
    return int(1 + torch.argsort(order, stable=True)[target])


def loop_counts(table: np.ndarray, facts: list[tuple[int, int, int]], known: set[tuple[int, int, int]],
                direction: str, filtered: bool) -> RankCounts:
    """The counts by a plain loop over triples and candidates."""
    above, tied, before = [], [], []
    n = table.shape[1]
    for h, r, t in facts:
        target, s = (t, table[r, h, t]) if direction == "tail" else (h, table[r, h, t])
        a = c = b = 0
        for e in range(n):
            if e == target:
                continue
            triple = (h, r, e) if direction == "tail" else (e, r, t)
            if filtered and triple in known:
                continue
            v = table[r, h, e] if direction == "tail" else table[r, e, t]
            a += v > s
            c += v == s
            b += v == s and e < target
        above.append(a), tied.append(c), before.append(b)
    return RankCounts(np.array(above), np.array(tied), np.array(before))


@st.composite
def random_case(draw: st.DrawFn) -> tuple[np.ndarray, list[tuple[int, int, int, float, str]]]:
    n = draw(st.integers(2, 7))
    n_rel = draw(st.integers(1, 3))
    # few distinct values: ties are common
    levels = draw(st.sampled_from([2, 3, 10]))
    table = np.array(draw(st.lists(st.integers(0, levels - 1), min_size=n_rel * n * n, max_size=n_rel * n * n)),
                     dtype=np.float32).reshape(n_rel, n, n) / levels
    triple = st.tuples(st.integers(0, n - 1), st.integers(0, n_rel - 1), st.integers(0, n - 1),
                       st.sampled_from([0.2, 0.7, 1.0]), st.sampled_from(["train", "val", "test"]))
    rows = draw(st.lists(triple, min_size=1, max_size=25))
    return table, rows


@settings(max_examples=60, deadline=None)
@given(case=random_case(), batch_size=st.integers(1, 6))
def test_batched_ranks_equal_a_loop_and_unkrs_argsort(case, batch_size: int) -> None:
    table, rows = case
    n_rel, n = table.shape[0], table.shape[1]
    kg = make_kg(rows, n, n_rel)
    test = [(h, r, t) for h, r, t, _, s in rows if s == "test"]
    known = {(h, r, t) for h, r, t, _, _ in rows}
    model = FixedScores(torch.from_numpy(table))
    for direction in ("tail", "head"):
        anchor, answer = (0, 2) if direction == "tail" else (2, 0)
        queries = np.array([(x[anchor], x[1], x[answer]) for x in test], dtype=np.int64).reshape(-1, 3)
        g = pd.DataFrame(sorted(known), columns=["h", "r", "t"])
        idx = KnownAnswers.of(g["h" if direction == "tail" else "t"].to_numpy(), g["r"].to_numpy(),
                         g["t" if direction == "tail" else "h"].to_numpy(), n)
        filtered, raw = query_ranks(scorer(model, direction), queries, idx, batch_size=batch_size)
        for got, want_filtered in ((filtered, True), (raw, False)):
            want = loop_counts(table, test, known, direction, want_filtered)
            assert np.array_equal(got.above, want.above) and np.array_equal(got.tied, want.tied)
            assert np.array_equal(got.tied_before, want.tied_before)
            # unKR's double argsort gives the same ranks (stable sort: ties to the smaller id)
            for i, (h, r, t) in enumerate(test):
                scores = torch.from_numpy(table[r, h] if direction == "tail" else table[r, :, t])
                target = t if direction == "tail" else h
                other = {e for e in range(n) if ((h, r, e) if direction == "tail" else (e, r, t)) in known}
                assert got.ranks[i] == unkr_rank(scores, target, other if want_filtered else set())
    # the whole function: its figures are rank_metrics of the loop's counts, both directions together
    got = link_prediction(model, kg, "test", batch_size=batch_size)
    conf = np.array([c for *_, c, s in rows if s == "test"])
    counts = [loop_counts(table, test, known, d, True) for d in ("tail", "head")]
    want = rank_metrics(RankCounts.concat(counts), np.concatenate([conf, conf]))
    assert got["both"]["filtered"] == pytest.approx(want, nan_ok=True)
    assert got["rows"] == len(test)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6)), min_size=1, max_size=20))
def test_expected_figures_average_every_order_of_the_ties(pairs: list[tuple[int, int]]) -> None:
    """*_expected: the target's position uniform over above+1 .. above+tied+1, by enumeration."""
    above = np.array([a for a, _ in pairs])
    tied = np.array([c for _, c in pairs])
    got = rank_metrics(RankCounts(above, tied, np.zeros_like(tied)))
    positions = [[a + 1 + k for k in range(c + 1)] for a, c in pairs]
    assert got["mrr_expected"] == pytest.approx(np.mean([np.mean([1 / p for p in ps]) for ps in positions]))
    assert got["mr_expected"] == pytest.approx(np.mean([np.mean(ps) for ps in positions]))
    for k in (1, 3, 10):
        assert got[f"hits@{k}_expected"] == pytest.approx(np.mean([np.mean([p <= k for p in ps]) for ps in positions]))
    # without ties, the expected figures are the tie-broken ones
    plain = rank_metrics(RankCounts(above, np.zeros_like(above), np.zeros_like(above)))
    assert plain["mrr_expected"] == pytest.approx(plain["mrr"]) and plain["tied"] == 0.0


@settings(max_examples=30, deadline=None)
@given(case=random_case(), seed=st.integers(0, 2**16))
def test_relabelling_entities_keeps_the_expected_figures(case, seed: int) -> None:
    """The figures over random tie orders read no entity id (design section 1); the tie-broken ones may."""
    table, rows = case
    n_rel, n = table.shape[0], table.shape[1]
    perm = np.random.default_rng(seed).permutation(n)
    moved = np.empty_like(table)
    moved[:, perm[:, None], perm[None, :]] = table
    relabelled = [(int(perm[h]), r, int(perm[t]), c, s) for h, r, t, c, s in rows]
    a = link_prediction(FixedScores(torch.from_numpy(table)), make_kg(rows, n, n_rel), "test")
    b = link_prediction(FixedScores(torch.from_numpy(moved)), make_kg(relabelled, n, n_rel), "test")
    for direction in ("tail", "head", "both"):
        for setting in ("filtered", "raw"):
            x, y = a[direction][setting], b[direction][setting]
            for key in ("mrr_expected", "mr_expected", "hits@1_expected", "hits@3_expected", "tied"):
                assert x[key] == pytest.approx(y[key], nan_ok=True)


def test_rank_counts_by_hand() -> None:
    scores = torch.tensor([[0.5, 0.9, 0.5, 0.1, 0.5], [0.2, 0.2, 0.2, 0.2, 0.2]])
    targets = torch.tensor([2, 0])
    above, tied, before = rank_counts(scores, targets)
    assert above.tolist() == [1, 0] and tied.tolist() == [2, 4] and before.tolist() == [1, 0]
    # filtering the 0.9 and the first 0.5 of row 0, and row 1's own target (ignored)
    exclude = (torch.tensor([0, 0, 1]), torch.tensor([1, 0, 0]))
    above, tied, before = rank_counts(scores, targets, exclude)
    assert above.tolist() == [0, 0] and tied.tolist() == [1, 4] and before.tolist() == [0, 0]


def test_answers_index_lists_each_querys_answers() -> None:
    idx = KnownAnswers.of(np.array([0, 0, 1, 0]), np.array([0, 0, 0, 1]), np.array([3, 1, 2, 4]), 5)
    rows, cols = idx.pairs(np.array([0 * 5 + 0, 1 * 5 + 0, 0 * 5 + 2, 0 * 5 + 1]))
    got = sorted(zip(rows.tolist(), cols.tolist(), strict=True))
    assert got == [(0, 1), (0, 3), (1, 4), (3, 2)]  # query 2 (anchor 2, r0) has none
    empty = KnownAnswers.of(np.zeros(0), np.zeros(0), np.zeros(0), 5)
    assert [len(x) for x in empty.pairs(np.array([3]))] == [0, 0]


def test_out_of_memory_halves_the_batch_and_nan_is_refused() -> None:
    model, kg = hand_example()
    q = np.array([[0, 0, 2], [0, 0, 2], [0, 0, 4]])
    idx = KnownAnswers.of(np.array([0]), np.array([0]), np.array([1]), 5)
    want = query_ranks(scorer(model, "tail"), q, idx, batch_size=1)
    seen = []

    def small(anchors: Tensor, r: int) -> Tensor:
        seen.append(len(anchors))
        if len(anchors) > 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return scorer(model, "tail")(anchors, r)

    got = query_ranks(small, np.array([[0, 0, 2], [0, 0, 2], [1, 0, 4]]), idx, batch_size=8)
    assert max(seen) == 2 and seen[-1] == 1  # halved until it fits
    assert np.array_equal(got[0].above[:2], want[0].above[:2])
    def broken(anchors: Tensor, r: int) -> Tensor:
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape"):  # any other error is not swallowed
        query_ranks(broken, q, idx)
    with pytest.raises(PipelineError, match="NaN"):
        query_ranks(lambda a, r: torch.full((len(a), 5), float("nan")), q, idx)


def test_a_trained_run_carries_its_link_prediction(tmp_path: Path) -> None:
    kg = toy_kg(negatives=True, softlogic=False)
    cfg = default_config("toy", "ukge_logi", epochs=2, dim=8, batch_size=32, lr=0.01, seed=3)
    res = train(kg, cfg, tmp_path / "run", progress=False)
    lp = res["link_prediction"]
    assert set(lp) == {"valid", "test"} and lp["test"]["rows"] == len(kg.rows[kg.rows["split"] == "test"])
    again = link_prediction(load_run(tmp_path / "run"), kg, "test")
    assert {k: v for k, v in again.items() if k != "seconds"} == {k: v for k, v in lp["test"].items() if k != "seconds"}
    frame = read_run(tmp_path / "run").link_prediction
    assert frame.loc[("test", "tail", "filtered"), "MRR"] == pytest.approx(lp["test"]["tail"]["filtered"]["mrr"])
    assert len(frame) == 2 * 3 * 2  # valid and test, three directions, filtered and raw
    summary = backbone_summary(tmp_path / "run", kg)
    assert summary["test_mrr"] == pytest.approx(lp["test"]["tail"]["filtered"]["mrr"], abs=1e-6)
    assert summary["test_hits@10_both"] == pytest.approx(lp["test"]["both"]["filtered"]["hits@10"], abs=1e-6)
    # a run without them (trained with link_prediction=False, or before they existed): the summary
    # computes them from the model, the same numbers
    res2 = train(kg, cfg, tmp_path / "bare", progress=False, link_prediction=False)
    assert "link_prediction" not in res2 and read_run(tmp_path / "bare").link_prediction.empty
    bare = backbone_summary(tmp_path / "bare", kg)
    assert {k: v for k, v in bare.items() if k.startswith("test_")} == {
        k: v for k, v in summary.items() if k.startswith("test_")}


def test_the_train_report_shows_the_figures(tmp_path: Path) -> None:
    from pipeline.stages.train import Trained
    from tools.tables_results import link_prediction as render

    kg = toy_kg(negatives=False, softlogic=False)
    cfg = default_config("toy", "ukge_rect", epochs=1, dim=8, batch_size=32, lr=0.01)
    res = train(kg, cfg, tmp_path / "run", progress=False)
    done = Trained(read_run(tmp_path / "run"), cfg, len(kg.graph("train")), res)
    rows = done.link_prediction_rows()
    assert [(r["split"], r["ranked"].split()[0]) for r in rows] == [
        ("valid", "tail"), ("valid", "both"), ("test", "tail"), ("test", "both")]
    assert rows[2]["MRR"] == f"{res['link_prediction']['test']['tail']['filtered']['mrr']:.4f}"
    assert done.link_prediction_line().startswith("link prediction (unKR's protocol")
    figures = done.link_prediction_figures()
    assert figures["test_mrr"] == round(res["link_prediction"]["test"]["tail"]["filtered"]["mrr"], 6)
    # the results pages: the main table's backbone and a recorded training, each a row beside the published ones
    docs = tmp_path / "docs"
    docs.mkdir()
    summary = backbone_summary(tmp_path / "run", kg)
    (docs / "results.json").write_text(json.dumps({"backbones": {"toy": summary}}))
    (docs / "results_backbones.json").write_text(json.dumps({
        "runs": [done.docs_row("pipeline train toy")],
        "published_link_prediction": {"source": "a table", "rows": [
            {"dataset": "toy", "model": "Published", "mse": 0.5, "filtered": {"mrr": 0.25, "hits@1": 0.125}}]}}))
    table = render(docs).splitlines()
    published = next(line for line in table if "| unKR |" in line)
    assert "| Published | 0.250 | 0.125 | - | - | - | 0.5000 |" in published
    main = next(line for line in table if "ours: main table" in line)
    assert f"| {summary['test_mrr']:.3f} | {summary['test_hits@1']:.3f} |" in main
    run = next(line for line in table if "ours: training 1" in line)
    assert f"| {figures['test_mrr']:.3f} | {figures['test_hits@1']:.3f} |" in run
    assert table.index(published) < table.index(main) < table.index(run)
    json.dumps(res)  # the results document stays JSON


def test_a_long_forecast_skips_the_ranks_and_says_how_to_get_them(tmp_path: Path, monkeypatch, capsys) -> None:
    """Training's default ranks when the forecast is short and, past AUTO_SECONDS (BEUrRE on a CPU: hours),
    records and prints why it did not; --link-prediction (True) ranks whatever the forecast; the summary of
    the results pages then leaves the figures out rather than spending the hours."""
    import pipeline.models.link_prediction as lp_mod
    import pipeline.models.training as training_mod
    from pipeline.models.link_prediction import estimated_seconds

    kg = toy_kg(negatives=False, softlogic=False)
    cfg = default_config("toy", "ukge_rect", epochs=1, dim=8, batch_size=32, lr=0.01)
    res = train(kg, cfg, tmp_path / "short", progress=False)
    assert "link_prediction" in res and "link_prediction_skipped" not in res
    model = load_run(tmp_path / "short")
    forecast = estimated_seconds(model, kg)
    assert 0 < forecast < lp_mod.AUTO_SECONDS
    assert estimated_seconds(model, kg, ("test",)) < forecast  # fewer rows, fewer anchors
    monkeypatch.setattr(training_mod, "AUTO_SECONDS", 0.0)
    res = train(kg, cfg, tmp_path / "long", progress=True)
    assert "link_prediction" not in res
    assert res["link_prediction_skipped"].startswith("link prediction skipped: it would take about ")
    assert "--link-prediction" in res["link_prediction_skipped"]
    assert "link prediction skipped" in capsys.readouterr().err
    assert "link_prediction" in train(kg, cfg, tmp_path / "asked", progress=False, link_prediction=True)
    monkeypatch.setattr(lp_mod, "AUTO_SECONDS", 0.0)
    summary = backbone_summary(tmp_path / "long", kg)
    assert "test_mrr" not in summary and summary["test_mse"] == pytest.approx(res["test"]["mse"], abs=1e-6)


def test_a_split_without_rows_is_not_ranked(tmp_path: Path) -> None:
    """A graph whose test split is empty (a user's KG): training ranks valid only, no NaN figures."""
    import dataclasses

    kg = toy_kg(negatives=False, softlogic=False)
    rows = kg.rows.copy()
    rows.loc[rows["split"] == "test", "split"] = "train"
    bare = dataclasses.replace(kg, rows=rows)
    assert not (bare.rows["split"] == "test").any()
    cfg = default_config("toy", "ukge_rect", epochs=1, dim=8, batch_size=32, lr=0.01)
    res = train(bare, cfg, tmp_path / "run", progress=False, link_prediction=True)
    assert set(res["link_prediction"]) == {"valid"}
    assert res["link_prediction"]["valid"]["rows"] == int((kg.rows["split"] == "val").sum()) > 0


def test_the_train_flag_has_three_states() -> None:
    """--link-prediction / --no-link-prediction / neither (None: the forecast decides)."""
    from click.testing import CliRunner

    import pipeline.stages.train as train_stage
    from pipeline.cli import cli

    seen = {}

    def fake(dataset, o):
        seen[dataset] = o.link_prediction
        raise SystemExit(0)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_stage, "train_dataset", fake)
        for args, want in (([], None), (["--link-prediction"], True), (["--no-link-prediction"], False)):
            CliRunner().invoke(cli, ["train", "ppi5k", *args])
            assert seen.pop("ppi5k") is want


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_ranks_equal_cpu_ranks() -> None:
    """The same scores give the same ranks on either device (a fixed table: no rounding differs)."""
    kg = toy_kg(n_entities=300, n_facts=3000, negatives=False, softlogic=False)
    table = torch.randint(0, 4, (kg.n_relations, 300, 300), generator=torch.Generator().manual_seed(0)) / 4
    cpu = link_prediction(FixedScores(table), kg, "test", batch_size=7)
    gpu = link_prediction(FixedScores(table).to("cuda"), kg, "test", batch_size=64)
    assert cpu["tail"]["filtered"]["tied"] > 0.5  # ties everywhere
    for d, s in itertools.product(("tail", "head", "both"), ("filtered", "raw")):
        assert gpu[d][s] == cpu[d][s]
