"""`pipeline query --calibration`: a saved D file lowers the alphas by its delta exactly as SRC answers;
an edited one, and anything else, is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core.errors import PipelineError
from pipeline.engine import Adjacency, search_query
from pipeline.formats.calibration import read_delta, write_delta
from pipeline.methods.src.method import SRC
from pipeline.methods.src.saved import saved_label, saved_paths
from pipeline.softquery import parse
from tests.engine.test_oracle import graph_of


def _src(facts: list[tuple[int, int, int, float]], n: int = 3) -> SRC:
    return SRC.over(Adjacency.from_graph(graph_of(n, 1, facts)), "toy")


def test_saved_delta_lowers_alphas(tmp_path: Path) -> None:
    src = _src([(0, 0, 1, 0.3), (0, 0, 2, 0.6)])
    d = write_delta(tmp_path / "D-abc.json", 0.35, {0.0: 1.0, 0.35: 2.0}, {"model_hash": "m"})
    d_file, l_dir = saved_paths([str(d)])
    saved = src.apply_saved(delta_file=d_file)
    assert saved.delta == 0.35 and saved_label(d_file, saved.delta, l_dir) == "D (delta 0.35)"
    assert saved.adjacency is src.adjacency
    q = parse("#0(#0, ?y, 0.5)")
    # 0.3 fails alpha 0.5 but passes 0.5 - 0.35 = 0.15: entity 1 becomes an answer only with D
    assert search_query(q, src.adjacency)[1] == float("-inf")
    assert float(saved.utilities([q])[0, 1]) == pytest.approx(0.3)


def test_an_edited_saved_delta_is_refused(tmp_path: Path) -> None:
    """Editing the delta of a saved D file (0.0 -> 0.1) is detected by its seal, never used."""
    d = write_delta(tmp_path / "D-abc.json", 0.0, {0.0: 1.0}, {})
    assert read_delta(d) == 0.0
    doc = json.loads(d.read_text())
    d.write_text(json.dumps({**doc, "delta": 0.1}))
    with pytest.raises(PipelineError, match="edited after it was written"):
        _src([]).apply_saved(delta_file=d)


@pytest.mark.parametrize("name,content,message", [
    ("D-x.json", "{}", "not a saved delta"),
    ("D-x.json", "[]", "not a saved delta"),
    ("D-x.json", '{"delta": 0.0, "digest": "x"', "not a saved delta"),
    ("D-y.json", '{"delta": 0.1, "scores": {}}', "not a saved delta"),  # the unsealed format of older code
    ("other.json", "{}", "not a saved calibration"),
    ("L-x", None, "needs its backbone's run directory"),
])
def test_bad_calibration_paths(tmp_path: Path, name: str, content: str | None, message: str) -> None:
    p = tmp_path / "calibration" / name
    p.parent.mkdir()
    if content is None:
        p.mkdir()
    else:
        p.write_text(content)
    with pytest.raises(PipelineError, match=message):
        d_file, l_dir = saved_paths([str(p)])
        _src([], 2).apply_saved(l_dir=l_dir, delta_file=d_file)
