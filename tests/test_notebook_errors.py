"""Errors in a real Jupyter kernel (nbclient): a PipelineError shows as its one line (at most 3 with a
query's caret), not as a 13-88 line traceback through the project's internals; ``%tb`` right after shows the
traceback; a misspelled keyword of every ``pl`` function names the closest one. Skipped where jupyter is
absent (``pip install -e '.[notebook]'``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# one misspelled keyword per public function of the API, and the name it should suggest
MISSPELLED = {
    "ingest": ("pl.ingest('toy', source='x.tsv', seeed=1)", "seed"),
    "dataset": ("pl.dataset('toy', stor=None)", "store"),
    "query": ("pl.query('knows(ann, ?y)', dataset='toy', grpah='test')", "graph"),
    "train": ("pl.train('toy', epoch=3)", "epochs"),
    "export": ("pl.export('run', treshold=0.3)", "threshold"),
    "sample": ("pl.sample('toy', per_tpye=3)", "per_type"),
    "answer": ("pl.answer('q.parquet', adjacncy='adj')", "adjacency"),
    "evaluate": ("pl.evaluate(answer='a.parquet')", "answers"),
    "run": ("pl.run('toy', epoch=3)", "epochs"),
    "cypher": ("pl.cypher('RETURN 1', param={})", "params"),
}


def _error(cell) -> tuple[str, list[str]]:
    """(ename, the lines the notebook shows) of a cell's error output."""
    (err,) = [o for o in cell.outputs if o.output_type == "error"]
    return err.ename, ANSI.sub("", "\n".join(err.traceback)).splitlines()


@pytest.mark.slow
def test_pipeline_errors_are_one_line_in_a_kernel(fresh_store, tmp_path: Path) -> None:
    why = "the [notebook] extra is not installed: pip install -e '.[notebook]'"
    nbformat = pytest.importorskip("nbformat", reason=why)
    nbclient = pytest.importorskip("nbclient", reason=why)
    pytest.importorskip("ipykernel", reason=why)
    import pipeline as pl

    assert set(MISSPELLED) == {n for n in pl.__all__ if n[0].islower()}  # every function of the API
    (tmp_path / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\nbob\tknows\tcid\t0.6\n"
                                      "ann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    cells = ["import pipeline as pl\n_ = pl.ingest('toy', source='toy.tsv', quiet=True)",
             *(code for code, _ in MISSPELLED.values()),
             "pl.dataset('ppi5')",  # an unknown name, raised deep in the loaders
             "pl.query('knows(ann, ?y', dataset='toy', graph='test')",  # a syntax error: the text and its caret
             "%tb"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    env = {"PIPELINE_HOME": str(tmp_path / "home"), "PIPELINE_STORE": fresh_store.uri, "PYTHONPATH": str(REPO)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits them
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    first, *rest = nb.cells
    assert not [o for o in first.outputs if o.output_type == "error"]
    for (name, (_, suggested)), cell in zip(MISSPELLED.items(), rest, strict=False):
        ename, lines = _error(cell)
        assert ename == "PipelineError" and len(lines) <= 3, (name, lines)
        assert lines[0].startswith(f"PipelineError: {name}: unknown option ") and f"did you mean {suggested}" in lines[0]
        assert lines[-1] == "(%tb: the traceback)"
    unknown, syntax, tb = rest[len(MISSPELLED):]
    ename, lines = _error(unknown)
    assert ename == "UnknownNameError" and lines[0].startswith("UnknownNameError: unknown data set 'ppi5'")
    assert len(lines) == 2
    ename, lines = _error(syntax)
    assert ename == "QuerySyntaxError" and len(lines) == 3, lines
    assert lines[0].startswith("QuerySyntaxError: column 14: expected ')'") and lines[0].endswith("(%tb: the traceback)")
    assert lines[1:] == ["  knows(ann, ?y", "  " + " " * 13 + "^"]  # the caret under column 14, as the CLI draws it
    # %tb: the traceback of that last error, through the project's code
    shown = ANSI.sub("", "".join(o.get("text", "") + "\n".join(o.get("traceback", [])) for o in tb.outputs))
    assert len(shown.splitlines()) > 10 and "pipeline/api.py" in shown and "QuerySyntaxError" in shown
