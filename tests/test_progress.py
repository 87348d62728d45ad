"""Progress output, one policy: pipeline/core/progress.py decides bars, summaries and
warnings for every stage; bars close on every path; a notebook gets one bar per stage and no per-step
lines; progress=False keeps the summary, quiet drops it; no module but that one imports tqdm."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tqdm.std import tqdm as text_tqdm

import pipeline.core.progress as progress
from pipeline.core.progress import Output, output

REPO = Path(__file__).resolve().parents[1]


def test_only_the_progress_module_imports_tqdm():
    offenders = []
    for path in [*(REPO / "pipeline").rglob("*.py"), *(REPO / "loaders").rglob("*.py")]:
        if path.name == "progress.py" and path.parent.name == "core":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if any(n.split(".")[0] == "tqdm" for n in names) or (module or "").split(".")[0] == "tqdm":
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_switches(capsys, monkeypatch):
    monkeypatch.setattr(progress, "terminal", lambda: True)  # pytest captures stderr: as on a terminal
    assert output(True) == Output(True, False) and output(False).bars is False
    assert output(Output(True), quiet=True) == Output(True, True)
    for out, summary in ((output(True), True), (output(False), True), (output(True, quiet=True), False)):
        with out.bar(total=3, desc="stage") as bar:
            assert bar.disable is not out.bars
        out.summary("stage: 3 things")
        out.warn("something to know")
        err = capsys.readouterr()
        assert (err.out == "stage: 3 things\n") is summary
        assert "warning: something to know\n" in err.err  # warnings always


def test_a_bar_is_closed_when_its_stage_fails():
    before = len(text_tqdm._instances)
    with pytest.raises(RuntimeError), output(True).bar(total=5, desc="export") as bar:
        bar.update(1)
        raise RuntimeError("the stage failed")
    assert len(text_tqdm._instances) == before  # nothing left for the next bar to redraw


def test_the_export_bar_is_closed_when_the_export_is_refused(tmp_path):
    """A stale `export: 0%`: an export refused mid-way left its bar open."""
    from pipeline.core.errors import PipelineError
    from pipeline.models import default_config, train
    from pipeline.stages.export import export_adjacency
    from tests.models.toy import toy_kg

    train(toy_kg(), default_config("toy", "ukge_logi", epochs=1, dim=8, batch_size=32), tmp_path / "run",
          progress=False)
    before = len(text_tqdm._instances)
    with pytest.raises(PipelineError, match="more than its budget"):
        export_adjacency(tmp_path / "run", threshold=0.01, out=tmp_path / "e", progress=True, max_bytes=10)
    assert len(text_tqdm._instances) == before


def test_notebook_policy(monkeypatch, capsys):
    monkeypatch.setattr(progress, "in_kernel", lambda: True)
    out = output(True)
    with out.bar(total=2, desc="train") as outer, out.inner_bar(range(3), desc="epoch 1/2") as inner:
        assert outer.leave is True and inner.disable  # one finished bar per stage; no widget per epoch
    out.step_line("epoch 1: loss 0.1")
    assert "epoch 1" not in capsys.readouterr().err  # the figures go on the bar's postfix, not 60 lines
    monkeypatch.setattr(progress, "in_kernel", lambda: False)
    monkeypatch.setattr(progress, "terminal", lambda: True)
    with out.bar(total=2) as outer, out.inner_bar(range(3)) as inner:
        assert outer.leave is False and not inner.disable
    out.step_line("epoch 1: loss 0.1")
    assert "epoch 1: loss 0.1" in capsys.readouterr().err


def test_text_bars_in_a_kernel_without_widgets_refresh_rarely(monkeypatch):
    """tqdm.auto falls back to text bars where ipywidgets is missing: each refresh is an output chunk of the
    cell, so they refresh every KERNEL_TEXT_INTERVAL seconds (a 60-epoch cell made 44 chunks at tqdm's 0.1 s)."""
    monkeypatch.setattr(progress, "in_kernel", lambda: True)
    monkeypatch.setattr(progress, "_bar_class", lambda: (text_tqdm, False))
    with output(True).bar(total=3) as bar:
        assert bar.mininterval == progress.KERNEL_TEXT_INTERVAL
    monkeypatch.undo()
    # outside a kernel tqdm.auto is an asyncio subclass of the text bar: not taken for widgets (it was, so
    # a kernel without ipywidgets refreshed at 0.1 s)
    assert progress._bar_class()[1] is False


def test_output_redirected_to_a_file_is_plain_lines(tmp_path):
    """`python script.py > log 2>&1` with pl.run: the log held 193 lines of carriage returns and cursor-up
    codes (a text bar redrawn in a file); now no bar is drawn where stderr is not a terminal: each bar is one
    plain line when it closes (nested bars none), the per-step lines and summaries are plain lines."""
    import subprocess
    import sys

    script = (
        "from pipeline.core.progress import output\n"
        "out = output(True)\n"
        "with out.bar(total=3, desc='train') as bar:\n"
        "    for i in range(3):\n"
        "        with out.inner_bar(range(4), desc=f'epoch {i + 1}/3') as inner:\n"
        "            for _ in inner:\n"
        "                pass\n"
        "        out.step_line(f'epoch {i + 1}: loss 0.1')\n"
        "        bar.update(1)\n"
        "out.summary('train: done')\n"
    )
    log = tmp_path / "log"
    with log.open("wb") as f:
        subprocess.run([sys.executable, "-c", script], stdout=f, stderr=subprocess.STDOUT, check=True, cwd=REPO)
    text = log.read_text()
    assert "\r" not in text and "\x1b" not in text, repr(text)
    lines = text.splitlines()
    assert lines[:3] == ["epoch 1: loss 0.1", "epoch 2: loss 0.1", "epoch 3: loss 0.1"]
    assert lines[3].startswith("train: 3/3 it in ") and lines[3].endswith(" s") and lines[4:] == ["train: done"]
