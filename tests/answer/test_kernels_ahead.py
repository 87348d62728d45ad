"""`pipeline answer` on an export starts loading the compiled engine steps before it reads its query set
and builds its method (formats.engine_index.load_kernels_ahead), so that the load runs beside them and not
inside the first large batch's time (CN15k's im batch waited 0.4-0.6 s for it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import pipeline.stages.answer as answer_stage
from pipeline.cli import cli
from pipeline.engine import kernels
from pipeline.formats.engine_index import load_kernels_ahead
from pipeline.models import default_config, train
from tests.answer.toy import write_toy_query_set
from tests.models.toy import toy_kg


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipeline.stages.export import export_adjacency

    root = tmp_path_factory.mktemp("kernels-ahead")
    cfg = default_config("toy", "ukge_logi", epochs=1, dim=8, batch_size=32, lr=0.02, seed=0)
    train(toy_kg(), cfg, root / "run", progress=False)
    export_adjacency(root / "run", threshold=0.3, out=root / "exp", progress=False, allow_dense=True)
    return root / "exp"


def _record(monkeypatch: pytest.MonkeyPatch) -> list:
    seen: list = []
    monkeypatch.setattr(kernels, "prepare", lambda n, device="cpu": seen.append(("prepare", n, str(device))))
    read = answer_stage.read_query_set
    monkeypatch.setattr(answer_stage, "read_query_set", lambda *a, **k: seen.append(("read",)) or read(*a, **k))
    return seen


def test_answer_starts_the_kernel_load_before_reading_its_queries(export: Path, tmp_path: Path, monkeypatch) -> None:
    seen = _record(monkeypatch)
    queries = write_toy_query_set(tmp_path / "toy_test.parquet")
    args = ["answer", str(queries), "--adjacency", str(export), "--out", str(tmp_path / "out"), "--device", "cpu",
            "--workers", "1"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert seen[0][0] == "prepare" and seen[0][2] == "cpu", seen  # first, on the device asked for
    assert ("read",) in seen[1:]


def test_load_ahead_counts_the_manifests_facts_and_ignores_what_the_command_reports(
    export: Path, tmp_path: Path, monkeypatch
) -> None:
    import json

    seen = _record(monkeypatch)
    load_kernels_ahead(export, "cpu")
    nnz = sum(int(rel["nnz"]) for rel in json.loads((export / "manifest.json").read_text())["relations"])
    assert seen == [("prepare", nnz, "cpu")]
    seen.clear()
    load_kernels_ahead(tmp_path / "no-export", "cpu")  # no manifest: the command reports it later
    load_kernels_ahead(export, "tpu")  # no such device: the same
    assert seen == []
