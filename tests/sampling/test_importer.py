"""SQUK import end to end on a tiny hand-made KG: our engine's answers next to the published ones."""

from __future__ import annotations

import json

import pytest

from pipeline.formats.queryset import read_query_set
from pipeline.stages.import_squk import import_squk


def test_import_keeps_published_answers_and_adds_ours(tiny_kg, tmp_path):
    # 2p r0(#0, ?x) & r1(?x, ?y), alpha 0, beta 1. Hand-computed from TINY_FACTS:
    # train graph: y=3 via x=1: 0.8+0.9=1.7; y=4 via x=2: 0.5+0.6=1.1; any other y via x=1 and a missing
    # r1 fact (worth 0 at alpha 0): 0.8.  test graph adds r0(0,3)=0.7, r1(3,4)=0.5, r1(1,5)=0.3:
    # y=3 1.7, y=4 max(1.1, 0.7+0.5)=1.2, y=5 0.8+0.3=1.1, others 0.8.
    formula = "(r1(s1,e1))&(r2(e1,f1))"
    published = [0, 1, 2, 5, 4, 3], [0.8, 0.8, 0.8, 1.1, 1.2, 1.7]  # ascending, as SQUK writes them
    wrong = [4, 3], [0.8, 1.7]
    doc = {
        formula: [
            [{"r1": 0, "s1": 0, "r2": 1}, {"f1_answers": a}, {"f1_values": v}] for a, v in (published, wrong)
        ]
    }
    src = tmp_path / "test_type0001_equal_zero_soft_efo1_qaa.json"
    src.write_text(json.dumps(doc))
    (summary,) = import_squk([src], tiny_kg, None, tmp_path / "out", progress=False)
    assert summary["queries"] == 2 and summary["same_as_published"] == 1 and "other_shape" not in summary
    qs = read_query_set(summary["out"])
    assert qs.meta["split"] == "test" and qs.meta["alpha"] == "zero" and qs.meta["source"].startswith("squk:")
    row = qs.frame.iloc[0]
    assert row["type"] == "2p" and row["text"] == "#0(#0, ?e1) & #1(?e1, ?y)"
    assert list(row["answers_hard"]) == [3, 4, 5, 0, 1, 2]
    assert list(row["utilities_hard"]) == pytest.approx([1.7, 1.2, 1.1, 0.8, 0.8, 0.8], abs=1e-6)
    assert list(row["answers_easy"]) == [3, 4, 0, 1, 2, 5]
    assert list(row["utilities_easy"]) == pytest.approx([1.7, 1.1, 0.8, 0.8, 0.8, 0.8], abs=1e-6)
    assert list(row["answers_published"]) == [3, 4, 5, 0, 1, 2]
    assert list(qs.frame.iloc[1]["answers_published"]) == [3, 4]
