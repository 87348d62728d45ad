"""The paper protocol reads the truth in the query file's own order: the list the SQUK generator writes
(answers_paper) travels from the query set through the answers file (paper_rank) to the evaluation, and the
metrics equal the authors' per-query code run on a file holding that list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.formats.answers import PAPER_RANK, read_answers, write_answers
from pipeline.formats.answers import rows_from_utilities as answer_rows
from pipeline.squk.generator_order import generator_answers
from pipeline.stages.evaluate import evaluate_file, query_metrics
from tests.metrics.test_metrics import _authors_evaluation

META = {"dataset": "toy", "method": "SRC", "query_set": "toy.parquet"}


def _write(tmp_path: Path, util: torch.Tensor, truth: list[tuple]) -> Path:
    frame = answer_rows([f"q{i}" for i in range(len(truth))], ["1p"] * len(truth), util, truth, k=2)
    return write_answers(frame, tmp_path / "a.parquet", META)


def test_the_generator_order_is_read_once_as_the_authors_code_reads_the_file(tmp_path: Path) -> None:
    # truth: entities 0..3 tied at 1.0, entity 4 at 2.0; the generator writes the tie in its own order
    true_u = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 0.0])
    paper = generator_answers(true_u)
    assert paper.tolist() == [4, 3, 2, 1, 0]  # by hand: networks reverse a tie that meets a smaller value
    ours = np.array([4, 0, 1, 2, 3])  # our stored order: ties by id
    pred = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.9, 0.0]])  # ranks the tie as the generator wrote it
    path = _write(tmp_path, pred, [(ours, true_u[ours], paper)])
    frame = read_answers(path).frame
    assert frame.loc[frame[PAPER_RANK] > 0].sort_values(PAPER_RANK)["entity"].tolist() == paper.tolist()
    got = query_metrics(frame, paper=True).iloc[0]
    want = _authors_evaluation(pred[0].numpy(), paper[::-1].tolist())  # the file lists it worst first
    for name in ("tau", "rho", "map", "ndcg"):
        assert got[f"paper_{name}"] == pytest.approx(want[name], abs=1e-12), name
    assert got["paper_tau"] == pytest.approx(1.0)  # the prediction follows the generator's order exactly
    report = evaluate_file(path)
    assert report["paper_truth"].startswith("the query file's own order")


def test_a_published_answer_outside_our_truth_still_has_its_row(tmp_path: Path) -> None:
    # an imported query: the file's list holds entity 5, which our engine does not count as an answer
    pred = torch.tensor([[0.0, 0.2, 0.9, 0.0, 0.0, 0.7, 0.1]])
    truth = (np.array([2, 1]), np.array([0.8, 0.3]), np.array([2, 5, 1]))
    frame = read_answers(_write(tmp_path, pred, [truth])).frame
    assert set(frame["entity"]) >= {1, 2, 5}
    assert frame.set_index("entity").loc[5, "truth_rank"] == 0
    got = query_metrics(frame, paper=True).iloc[0]
    want = _authors_evaluation(pred[0].numpy(), [1, 5, 2])
    assert got["paper_map"] == pytest.approx(want["map"]) and got["paper_tau"] == pytest.approx(want["tau"])


def test_without_the_list_the_estimate_stays_and_says_so(tmp_path: Path) -> None:
    path = _write(tmp_path, torch.tensor([[0.1, 0.5, 0.0]]), [(np.array([1, 0]), np.array([1.0, 1.0]))])
    assert PAPER_RANK not in read_answers(path).frame.columns
    assert "an estimate" in evaluate_file(path)["paper_truth"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=6, max_size=40), st.integers(0, 2**31))
def test_any_truth_and_prediction_agree_with_the_authors_code(levels: list[int], seed: int) -> None:
    true_u = np.array(levels, dtype=np.float64) / 2
    if not (true_u > 0).any():
        return
    paper = generator_answers(true_u, k=10)
    ours = np.argsort(-true_u, kind="stable")[: int((true_u > 0).sum())]
    pred = torch.as_tensor(np.random.default_rng(seed).integers(0, 4, len(true_u)) / 3.0).float()[None]
    frame = answer_rows(["q"], ["1p"], pred, [(ours, true_u[ours], paper)], k=3)
    got = query_metrics(frame, paper=True).iloc[0]
    want = _authors_evaluation(pred[0].numpy(), paper[::-1].tolist())
    for name in ("tau", "rho", "map", "ndcg"):
        assert got[f"paper_{name}"] == pytest.approx(want[name], abs=1e-9, nan_ok=True), name


def test_single_answer_queries_both_readings(tmp_path: Path) -> None:
    """The authors' solver leaves a single-answer query out of tau and rho; their fine-tuning code counts it
    as 0: the report holds both (q1: two answers predicted in order, tau 1; q2: one answer)."""
    util = torch.tensor([[0.9, 0.5, 0.0], [0.1, 0.0, 0.7]])
    truth = [(np.array([0, 1]), np.array([1.0, 0.5]), np.array([0, 1])), (np.array([2]), np.array([0.4]), np.array([2]))]
    frame = answer_rows(["q1", "q2"], ["1p", "1p"], util, truth, k=2)
    report = evaluate_file(write_answers(frame, tmp_path / "a.parquet", META))
    assert report["paper_protocol"]["tau"]["1p"] == pytest.approx(100.0)
    assert report["paper_single_as_zero"]["tau"]["1p"] == pytest.approx(50.0)
    assert report["paper_single_as_zero"]["rho"]["1p"] == pytest.approx(50.0)
    assert set(report["paper_single_as_zero"]) == {"tau", "rho"}


def test_the_other_orders_stay_as_labelled_extras(tmp_path: Path) -> None:
    """With the generator's list the report also holds the two earlier readings of the same answers: ties
    in random orders (averaged) and our id order reversed, each as the protocol computes it without the list."""
    true_u = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 0.0])
    paper, ours = generator_answers(true_u), np.array([4, 0, 1, 2, 3])
    pred = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.9, 0.0]])
    report = evaluate_file(_write(tmp_path, pred, [(ours, true_u[ours], paper)]))
    other = report["paper_protocol_other_orders"]
    assert set(other) == {"random ties (32 orders, averaged)", "our id order reversed"}
    # read by ids reversed, the tie (3, 2, 1, 0) is exactly the generator's order here: the same tau
    assert other["our id order reversed"]["tau"]["1p"] == pytest.approx(report["paper_protocol"]["tau"]["1p"])
    assert other["random ties (32 orders, averaged)"]["tau"]["1p"] < report["paper_protocol"]["tau"]["1p"]
