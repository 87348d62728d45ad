"""Accuracy tables: the Wilson interval by hand, per-type counting, unclear replies counted wrong."""

from __future__ import annotations

import pytest

from pipeline.llm.eval import accuracy_table, markdown, model_picks, wilson


def test_wilson_by_hand():
    # 5/10, z = 1.96: centre 0.5, half-width 1.96 * sqrt(0.025 + 0.0096) / 1.384 = 0.2634
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 0) == (0.0, 0.0)
    lo, hi = wilson(10, 10)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(0.7225, abs=1e-4)


def test_accuracy_table_and_markdown():
    its = [{"id": f"q{i}", "type": t, "correct": "B"} for i, t in enumerate(["1p", "1p", "2p", "2i"])]
    picks = model_picks(
        [
            {"id": "q0", "status": "ok", "letter": "B"},
            {"id": "q1", "status": "ok", "letter": None},
            {"id": "q2", "status": "error", "letter": None},
        ]
    )  # q3 never answered
    t = accuracy_table(its, picks)
    assert list(t) == ["1p", "2p", "2i", "all"]  # the literature's type order
    assert (t["1p"]["correct"], t["1p"]["n"], t["1p"]["accuracy"]) == (1, 2, 50.0)
    assert (t["all"]["correct"], t["all"]["no_letter"]) == (1, 3)
    md = markdown({"m": t})
    assert "| m | 50.0 [9.5, 90.5] |" in md and "all (n=4)" in md
