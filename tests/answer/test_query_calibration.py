"""`pipeline query --calibration L-dir` end to end: a calibration L fitted by `pipeline answer` on a tiny
named KG, saved under the run, then given to `pipeline query` for every query of the answers file: the
utilities printed equal the file's (to 1e-6), answer for answer; and they differ from the uncalibrated
ones, so the comparison is not between two uncalibrated runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pipeline.formats.answers import read_answers
from pipeline.formats.queryset import read_query_set
from tests.answer.conftest import run_cli


def test_saved_l_reproduces_the_answers_file(tiny_flow: dict, tmp_path: Path) -> None:
    sets, adj = tiny_flow["sets"], str(tiny_flow["adj"])
    rep = json.loads(run_cli("answer", sets["test"], "--adjacency", adj, "--calibration", "L", "--train-queries",
                             sets["train"], "--l-epochs", "2", "--seed", "0", "--out", str(tmp_path), "--json"))
    l_dir = Path(rep["l_dir"])
    assert l_dir.is_dir() and l_dir.name.startswith("L-") and l_dir.parent.parent == tiny_flow["run"]
    frame = read_answers(rep["path"]).frame
    qs = read_query_set(sets["test"])
    compared, changed = 0, 0
    for qid, text in zip(qs.frame["id"], qs.frame["text"], strict=True):
        rows = frame[(frame["query_id"] == qid) & (frame["rank"] <= 100)]
        want = {int(e): float(u) for e, u in zip(rows["entity"], rows["utility"], strict=True)
                if math.isfinite(u) and u > 0}
        args = ["query", text, "--dataset", tiny_flow["name"], "--adjacency", adj, "--top", "100", "--json"]
        got = {r["eid"]: r["utility"] for r in json.loads(run_cli(*args, "--calibration", str(l_dir)))}
        plain = {r["eid"]: r["utility"] for r in json.loads(run_cli(*args))}
        assert set(got) == set(want), qid
        assert [got[e] for e in want] == pytest.approx(list(want.values()), abs=1e-6), qid
        compared += len(want)
        changed += any(abs(plain.get(e, 0.0) - u) > 1e-6 for e, u in want.items())
    assert compared > 0 and changed > 0  # L moved some utility: the saved fit was applied
