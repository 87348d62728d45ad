"""The valid selection in one pass (pipeline.stages.selection.ValidScorer) against the score of the answers
file each variant would write (selection_score of answer_query_set, the per-query path): equal for one
method, for every delta of D answered together, and for a calibrated index; SRC's deltas answered in one
engine pass equal one pass per delta, bit for bit."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.formats.queryset import read_query_set
from pipeline.methods import SRC
from pipeline.methods.src.calibrations import DELTA_GRID
from pipeline.stages.answer import answer_query_set, selection_score, valid_score
from pipeline.stages.selection import ValidScorer
from tests.calibration.conftest import write_set


def file_score(valid, method) -> float:  # noqa: ANN001
    return selection_score(answer_query_set(valid, method, progress=False)[0])


def test_one_pass_scores_equal_the_answers_files_scores(toy_pipeline: dict, tmp_path: Path) -> None:
    p = toy_pipeline
    # alpha 0.7 over an export at threshold 0.3: each delta lets other facts through
    valid = read_query_set(write_set(p["kg"], "valid", tmp_path / "valid.parquet", 8, 0.7, 1))
    src = SRC.load(p["export"], "toy", kg=p["kg"])
    scorer = valid_score(valid)
    assert isinstance(scorer, ValidScorer)
    variants = [src.with_delta(d) for d in DELTA_GRID]
    want = [file_score(valid, v) for v in variants]
    assert len(set(want)) > 1  # the deltas differ on this set: the comparison is not of one number
    assert scorer.many(variants) == want
    assert [scorer(v) for v in variants] == want


def test_a_calibrated_index_scores_as_its_answers_file(toy_pipeline: dict) -> None:
    from pipeline.methods.src.affine import AffineCalibration, calibrated_adjacency, feature_tables
    from pipeline.models import load_run

    p = toy_pipeline
    valid = read_query_set(p["valid"])
    src = SRC.load(p["export"], "toy", kg=p["kg"])
    tables = feature_tables(load_run(p["run"]))
    calib = AffineCalibration(tables[0].shape[1], tables[1].shape[1])
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for q in calib.parameters():
            q.copy_(0.2 * torch.randn(q.shape, generator=gen))
        cal = src.with_adjacency(calibrated_adjacency(src.adjacency, calib, tables))
    assert ValidScorer(valid)(cal) == file_score(valid, cal) != file_score(valid, src)


def test_srcs_deltas_in_one_engine_pass_equal_one_pass_each(toy_pipeline: dict, tmp_path: Path) -> None:
    p = toy_pipeline
    queries = read_query_set(write_set(p["kg"], "valid", tmp_path / "valid.parquet", 8, 0.7, 1)).queries()
    src = SRC.load(p["export"], "toy", kg=p["kg"])
    variants = [src.with_delta(d) for d in DELTA_GRID]
    together = src.utilities_of(variants, queries)
    for v, u in zip(variants, together, strict=True):
        assert torch.equal(u, v.utilities(queries))
    assert not torch.equal(together[0], together[-1])


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_answer_tie_groups_equal_the_per_row_ranking(data: st.DataObject) -> None:
    """Each answer's tie group (first rank, size) from the rows' integer keys equals metrics.tie_groups of
    its row (NaN as -inf; -0.0 and 0.0 one value); the utility is the row's, NaN kept."""
    import numpy as np

    from pipeline.core.metrics import tie_groups
    from pipeline.stages.selection import _answer_groups, _Chunk

    b, n = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 30))
    levels = [-math.inf, math.inf, math.nan, -0.0, 0.0, 0.25, -1.5, 3.0]
    u = torch.tensor([[data.draw(st.sampled_from(levels)) for _ in range(n)] for _ in range(b)], dtype=torch.float32)
    width = data.draw(st.integers(1, n))
    ents = torch.tensor([[data.draw(st.integers(0, n - 1)) for _ in range(width)] for _ in range(b)])
    valid = torch.tensor([[data.draw(st.booleans()) for _ in range(width)] for _ in range(b)])
    pred, first, ties = _answer_groups(u, _Chunk([], ents, valid, np.zeros(0, np.int64)))
    f, t = tie_groups(u)
    np.testing.assert_array_equal(first, f.gather(1, ents)[valid].numpy())
    np.testing.assert_array_equal(ties, t.gather(1, ents)[valid].numpy())
    np.testing.assert_array_equal(pred, u.gather(1, ents)[valid].double().numpy())


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_the_summary_without_a_frame_equals_evaluates(data: st.DataObject) -> None:
    import numpy as np
    import pandas as pd

    from pipeline.stages.evaluate import summarise
    from pipeline.stages.selection import summary_arrays

    q = data.draw(st.integers(1, 40))
    types = np.array([data.draw(st.sampled_from(["1p", "2i", "up", "2in"])) for _ in range(q)], dtype=object)
    vals = st.one_of(st.just(math.nan), st.floats(-1, 1, allow_nan=False))
    cols = {m: np.array([data.draw(vals) for _ in range(q)]) for m in ("tau", "rho", "map", "ndcg")}
    frame = pd.DataFrame({"query_id": [f"q{i:03d}" for i in range(q)], "type": types, **cols})
    got, want = summary_arrays(types, cols), summarise(frame)
    # the same values bit for bit (NaN where no value is defined)
    assert {m: {t: v for t, v in d.items() if not math.isnan(v)} for m, d in got.items()} == {
        m: {t: v for t, v in d.items() if not math.isnan(v)} for m, d in want.items()}
    assert {m: math.isnan(d["avg"]) for m, d in got.items()} == {m: math.isnan(d["avg"]) for m, d in want.items()}
