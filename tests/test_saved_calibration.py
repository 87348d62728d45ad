"""`pipeline query --calibration`: a saved D file lowers the alphas by its delta exactly as SRC answers;
anything else is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core.errors import CorruptArtifactError, PipelineError
from pipeline.core.provenance import seal
from pipeline.engine import Adjacency, search_query
from pipeline.methods.calibration import lower_alphas
from pipeline.methods.saved_calibration import apply_saved
from pipeline.query import parse
from tests.engine.test_oracle import graph_of


def test_saved_delta_lowers_alphas(tmp_path: Path) -> None:
    adj = Adjacency.from_graph(graph_of(3, 1, [(0, 0, 1, 0.3), (0, 0, 2, 0.6)]))
    d = tmp_path / "D-abc.json"
    d.write_text(json.dumps(seal({"delta": 0.35, "scores": {}})))
    saved = apply_saved(adj, {}, [str(d)])
    assert saved.delta == 0.35 and saved.label == "D (delta 0.35)" and saved.adjacency is adj
    q = parse("#0(#0, ?y, 0.5)")
    # 0.3 fails alpha 0.5 but passes 0.5 - 0.35 = 0.15: entity 1 becomes an answer only with D
    assert search_query(q, adj)[1] == float("-inf")
    assert float(search_query(lower_alphas(q, saved.delta), saved.adjacency)[1]) == pytest.approx(0.3)


@pytest.mark.parametrize("name,content,message", [
    ("D-x.json", "{}", "from before D files were sealed: answer again with `--calibration D`"),
    ("D-x.json", "[]", "not a saved delta"),
    ("D-x.json", '{"delta": 0.0, "digest": "x"', "unreadable saved delta"),
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
    adj = Adjacency.from_graph(graph_of(2, 1, []))
    with pytest.raises(PipelineError, match=message):
        apply_saved(adj, {}, [str(p)])


def test_an_edited_saved_delta_is_refused_naming_the_file(tmp_path: Path) -> None:
    """Issue 45, item 6: "delta": 0.0 edited to 0.1 changed `pipeline query --calibration` from 0 to 195
    answers; the D file is sealed now, like every other saved artifact."""
    adj = Adjacency.from_graph(graph_of(2, 1, []))
    d = tmp_path / "D-abc.json"
    d.write_text(json.dumps(seal({"delta": 0.0, "scores": {"0.0": 1.0}}), indent=2))
    assert apply_saved(adj, {}, [str(d)]).delta == 0.0
    d.write_text(d.read_text().replace('"delta": 0.0', '"delta": 0.1'))
    with pytest.raises(CorruptArtifactError, match=f"{d}: the saved delta was edited"):
        apply_saved(adj, {}, [str(d)])
