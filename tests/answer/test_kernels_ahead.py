"""`pipeline answer` on an export starts loading the compiled engine steps before it reads its query set
and builds its method (formats.engine_index.load_kernels_ahead), so that the load runs beside them and not
inside the first large batch's time (CN15k's im batch waited 0.4-0.6 s for it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
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
    monkeypatch.setattr(
        kernels, "prepare", lambda n, device="cpu", queries=0: seen.append(("prepare", n, str(device), queries))
    )
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
    assert seen[0][3] == len(pd.read_parquet(queries))  # the query set's size, from its footer
    assert ("read",) in seen[1:]


def test_load_ahead_counts_the_manifests_facts_and_ignores_what_the_command_reports(
    export: Path, tmp_path: Path, monkeypatch
) -> None:
    import json

    seen = _record(monkeypatch)
    load_kernels_ahead(export, "cpu")
    nnz = sum(int(rel["nnz"]) for rel in json.loads((export / "manifest.json").read_text())["relations"])
    assert seen == [("prepare", nnz, "cpu", 0)]
    seen.clear()
    (tmp_path / "not-parquet.parquet").write_text("q(x) :- r(a, x)")
    load_kernels_ahead(export, "cpu", tmp_path / "not-parquet.parquet")  # no footer: no query counted
    assert seen == [("prepare", nnz, "cpu", 0)]
    seen.clear()
    load_kernels_ahead(tmp_path / "no-export", "cpu")  # no manifest: the command reports it later
    load_kernels_ahead(export, "tpu")  # no such device: the same
    assert seen == []


def test_while_the_load_runs_the_lightest_batches_go_first_and_the_file_is_the_same(
    export: Path, tmp_path: Path, monkeypatch
) -> None:
    """One task at a time in this process while the compiled steps load beside it: the batches run lightest
    first (they never wait for the load; the heaviest, which would, come once it is done), else heaviest
    first. The answers file is the same either way (rows merged in task order)."""
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.methods import SRC
    from pipeline.stages.answer import answer_query_set, task_cost

    qs = answer_stage.read_query_set(write_toy_query_set(tmp_path / "toy_test.parquet"))
    graph, _ = load_adjacency(export)
    method = SRC.over(graph, "toy")
    frames, orders = [], []
    run = answer_stage.answer_batch
    for loading in (False, True):
        ran: list[float] = []

        def record(m, batch, run=run, ran=ran):
            ran.append(task_cost(batch))
            return run(m, batch)

        monkeypatch.setattr(answer_stage, "answer_batch", record)
        monkeypatch.setattr(kernels, "loading", lambda loading=loading: loading)
        frame, _ = answer_query_set(qs, method, progress=False)
        frames.append(frame)
        orders.append(ran)
    assert len(set(orders[0])) >= 2, orders  # batches of different costs
    assert orders[0] == sorted(orders[0], reverse=True) and orders[1] == sorted(orders[1]), orders
    pd.testing.assert_frame_equal(frames[0], frames[1])
