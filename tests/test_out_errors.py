"""No tracebacks for paths the user gives: ``--out`` under a regular file or in a folder without
write permission, for every command that writes (export, answer, train, sample, evaluate --plot), is one
line and exit code 2, before any work; an OSError about a path that slips past the early checks is one
line too (the CLI's handler); a run's config.json that is not a JSON object is one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.formats.answers import write_answers
from pipeline.formats.queryset import read_query_set
from pipeline.methods import SRC
from pipeline.models import default_config, train
from pipeline.stages.answer import answer_query_set
from tests.answer.toy import PREDICTED, write_toy_query_set
from tests.models.toy import toy_kg


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A toy run, its export, a toy query set and an answers file."""
    from pipeline.stages.export import export_adjacency

    root = tmp_path_factory.mktemp("out-errors")
    cfg = default_config("toy", "ukge_logi", epochs=1, dim=8, batch_size=32, lr=0.02, seed=0)
    train(toy_kg(), cfg, root / "run", progress=False)
    export_adjacency(root / "run", threshold=0.3, out=root / "exp", progress=False, allow_dense=True)
    qs = read_query_set(write_toy_query_set(root / "toy_test.parquet"))
    frame, _ = answer_query_set(qs, SRC.over(PREDICTED, "toy", backbone="m"), progress=False)
    answers = write_answers(frame, root / "ans" / "a.parquet", {"dataset": "toy", "method": "m SRC", "query_set": str(qs.path)})
    return {"run": root / "run", "exp": root / "exp", "queries": Path(str(qs.path)), "answers": answers}


def _commands(made: dict[str, Path], out: Path) -> dict[str, list[str]]:
    return {
        "export": ["export", str(made["run"]), "--threshold", "0.3", "--out", str(out)],
        "answer": ["answer", str(made["queries"]), "--adjacency", str(made["exp"]), "--out", str(out)],
        "train": ["train", "ppi5k", "--model", "ukge_logi", "--epochs", "1", "--out", str(out)],
        "sample": ["sample", "ppi5k", "--out", str(out), "--per-type", "1"],
        "evaluate --plot": ["evaluate", str(made["answers"]), "--plot", str(out / "methods.png")],
    }


def _one_line(args: list[str]) -> str:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1, res.output
    assert "Traceback" not in res.output and res.output.startswith("error: ")
    return res.output


@pytest.mark.parametrize("command", ["export", "answer", "train", "sample", "evaluate --plot"])
def test_out_under_a_regular_file(made: dict[str, Path], tmp_path: Path, command: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    line = _one_line(_commands(made, blocker / "out")[command])
    option = "--plot" if command == "evaluate --plot" else "--out"
    assert f"{option} {blocker / 'out'}" in line and f"{blocker} is a file, not a folder" in line
    assert blocker.read_text() == "mine"


@pytest.mark.parametrize("command", ["export", "answer", "train", "sample", "evaluate --plot"])
def test_out_in_a_folder_without_write_permission(made: dict[str, Path], tmp_path: Path, command: str) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes in any folder whatever its mode; the path-under-a-file case covers the check")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        line = _one_line(_commands(made, locked / "out")[command])
        assert f"no permission to create files in {locked}" in line
    finally:
        locked.chmod(0o700)


def test_an_existing_file_as_out_and_a_folder_as_plot(made: dict[str, Path], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    assert "an existing file, not a folder" in _one_line(_commands(made, blocker)["export"])
    line = _one_line(["evaluate", str(made["answers"]), "--plot", str(tmp_path)])
    assert f"--plot {tmp_path}: a folder; give a file name" in line


def test_an_os_error_past_the_early_checks_is_one_line(made: dict[str, Path], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    # under a file: --update-docs's own check names it before any work
    line = _one_line(["evaluate", str(made["answers"]), "--update-docs", str(blocker / "docs")])
    assert str(blocker) in line
    # a folder where a table's file goes passes the early check: the CLI's handler makes the OSError one line
    docs = tmp_path / "docs"
    (docs / "results.json").mkdir(parents=True)
    line = _one_line(["evaluate", str(made["answers"]), "--update-docs", str(docs)])
    assert "results.json" in line


def test_a_run_config_that_is_not_an_object_is_one_line(made: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for p in made["run"].iterdir():
        (run / p.name).write_bytes(p.read_bytes())
    (run / "config.json").write_text("[]")
    line = _one_line(["export", str(run), "--out", str(tmp_path / "e")])
    assert f"{run / 'config.json'}: checksum mismatch" in line  # a sealed run: the edit is caught first
    (run / "checksums.json").unlink()  # a run written before checksums, or its list removed: refused as well
    line = _one_line(["export", str(run), "--out", str(tmp_path / "e")])
    assert f"{run / 'checksums.json'}: the run's list of checksums is missing" in line
    from pipeline.models.runs import write_run_json

    for name in ("metadata.json", "results.json"):  # listed again as they are
        write_run_json(run / name, json.loads((run / name).read_text()))
    write_run_json(run / "config.json", [])  # sealed, and still not an object
    line = _one_line(["export", str(run), "--out", str(tmp_path / "e")])
    assert f"{run / 'config.json'}: not a JSON object" in line
    write_run_json(run / "config.json", {"model": "ukge_logi"})
    assert "no 'dataset' field" in _one_line(["export", str(run), "--out", str(tmp_path / "e")])


def test_the_permission_check_names_the_folder(made: dict[str, Path], tmp_path: Path, monkeypatch) -> None:
    """The check the test above makes as a non-root user, here with os.access answering as it would for
    one (root passes every access check, so this is what runs on a root CI)."""
    from pipeline.core import atomic

    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(atomic.os, "access", lambda p, mode: False if Path(p) == locked else real(p, mode))
    for command in ("export", "answer", "train", "sample", "evaluate --plot"):
        line = _one_line(_commands(made, locked / "out")[command])
        assert f"no permission to create files in {locked}" in line, command
