"""The example notebook: examples/researcher_day.ipynb runs top to bottom in a real Jupyter kernel (nbclient),
then every cell again in the same kernel, with no error and no flag, at most 5 output chunks a cell, leaves
nothing in the folder it runs from, and shows what it says it shows (metrics beside their chance level, a query
with no answer saying why, a misspelled keyword's one line). Skipped where jupyter is absent
(`pip install -e '.[notebook]'`; the README's install command includes it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "examples" / "researcher_day.ipynb"


def _result(cell) -> str:
    """What the cell's last expression shows (its execute_result)."""
    return "\n".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs if o.output_type == "execute_result")


def _texts(cell) -> str:
    out = []
    for o in cell.outputs:
        if o.output_type == "stream":
            out.append(o.text)
        elif o.output_type in ("execute_result", "display_data"):
            out.append(o.get("data", {}).get("text/plain", ""))
        elif o.output_type == "error":
            out.append(f"{o.ename}: {o.evalue}")
    return "\n".join(out)


@pytest.mark.slow
def test_the_example_notebook_runs_twice_in_one_kernel(fresh_store, tmp_path: Path) -> None:
    why = "the [notebook] extra is not installed: pip install -e '.[notebook]'"
    nbformat = pytest.importorskip("nbformat", reason=why)
    nbclient = pytest.importorskip("nbclient", reason=why)
    pytest.importorskip("ipykernel", reason=why)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    env = {"PIPELINE_HOME": str(tmp_path / "home"), "PIPELINE_STORE": fresh_store.uri, "PYTHONPATH": str(REPO)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits them
    try:
        client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path)}})
        code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        runs = []
        with client.setup_kernel():
            for _ in range(2):  # top to bottom, then every cell again: a re-run needs no flag
                for i, c in code:
                    client.execute_cell(c, i)
                runs.append([(_texts(c), len(c.outputs), _result(c)) for _, c in code])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    for run in runs:
        for (text, chunks, _), (i, c) in zip(run, code, strict=True):
            assert "Error" not in text.split(":")[0] and "Traceback" not in text, f"cell {i}: {text[:500]}"
            assert chunks <= 5, f"cell {i} made {chunks} output chunks: {c.source[:60]!r}"
    first, second = runs
    by_code = {c.source.splitlines()[0]: t for (t, _, _), (_, c) in zip(first, code, strict=True)}
    assert "knows" in by_code['kg = pl.ingest("people", facts)']
    training = by_code['run = pl.train(kg, model="ukge_logi", epochs=100, dim=16, lr=0.005, negatives=2, select_on="valid_pos",']
    assert "MSE" in training and "predicting the mean confidence" in training and "warning" not in training
    query = by_code['ranking = pl.query("knows(p00, ?x, 0.3) & helps(?x, ?y)", dataset=kg, adjacency=adj, top=5, explain=1)']
    assert query.startswith("#1 ") and "where ?x = " in query and "rank" in query and "utility" in query
    # a query with no answer says why in its own output (the Ranking's repr)
    assert "0 answers" in by_code['pl.query("knows(p00, ?y, 0.95)", dataset=kg, graph="test")']
    assert "no answer: knows(p00, ?y, 0.95): no fact meets alpha 0.95" in by_code['pl.query("knows(p00, ?y, 0.95)", dataset=kg, graph="test")']
    assert "test-1p-00000" in by_code['test = pl.sample(kg, split="test", alpha="normal", beta="equal", per_type=5, seed=0)']
    evaluation = by_code['answers = pl.answer(test, adjacency=adj, workers=1)']
    for row in ("tau", "rho", "MAP", "NDCG", "MAP chance", "NDCG chance"):
        assert row in evaluation
    # metrics that mean something: no type where every entity answers (alpha zero made MAP 100 for any ranking)
    assert "every entity is an answer" not in evaluation
    assert "did you mean graph?" in by_code["try:"]
    assert "30" in by_code['pl.cypher("MATCH (e:Entity {dataset: $d}) RETURN count(e) AS entities", {"d": "people"})']
    # run from any folder, it leaves nothing there: runs, exports, queries and answers go under PIPELINE_HOME
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    # the second pass shows the same results (the finished run and the export reused, the same answers)
    for (_, _, a), (_, _, b), (i, _) in zip(first, second, code, strict=True):
        assert a == b, f"cell {i} shows another result on the second run:\n{a}\n---\n{b}"
    assert "reused" in second[[c.source for _, c in code].index(next(c.source for _, c in code if c.source.startswith("run = ")))][0]
    json.dumps(nb)  # the executed notebook is a valid document
