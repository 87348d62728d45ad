"""The Ray executor on a local Ray cluster (started here with 1, 2 and 4 CPUs): the executor contract, the
export's relation files byte for byte and the answers row for row equal to the local executor's, a resume
after deleted and torn shards, a killed worker retried, and a failing shard as one clear CLI line.
Skipped cleanly without Ray (pip install -e '.[ray]')."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.executors import LocalExecutor, RayExecutor, Task
from tests.cases import ExecutorCase
from tests.executors.helpers import ROWS, Stop, StopAfter, export, same_files

# slow: ~2.5 min here (three local clusters; every Ray worker process imports torch), over the ~2 min a
# CI run may spend on them, so they run with the slow tests and need the [ray] extra. Skipped by a mark,
# not by importorskip at import: the module imports without Ray, so tests/test_meta.py sees TestRayExecutor.
pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the Ray executor's tests need ray: pip install -e '.[ray]'"),
]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda w: f"{w}workers")
def cluster(request: pytest.FixtureRequest) -> Any:
    """A local Ray cluster of `workers` CPUs, one per worker count for the whole module (starting one
    costs seconds); workers import this checkout's tests (their task functions) through PYTHONPATH."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old) if p)
    ex = RayExecutor(workers=request.param)
    ex._cluster()
    yield ex
    ex.close()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def only_two(cluster: RayExecutor) -> None:
    if cluster.workers != 2:
        pytest.skip("run once, on the 2-worker cluster")


class TestRayExecutor(ExecutorCase):
    name = "ray"

    @pytest.fixture()
    def executor(self, cluster: RayExecutor) -> Any:
        return cluster

    def test_an_actor_that_cannot_be_built_is_one_error(self, executor: Any) -> None:
        only_two(executor)  # Ray restarts the actor first: seconds per worker count
        super().test_an_actor_that_cannot_be_built_is_one_error(executor)

    def test_a_killed_worker_is_retried(self, cluster: RayExecutor, tmp_path: Path) -> None:
        from tests.executors.helpers import die_once

        only_two(cluster)
        tasks = [Task(f"task {i}", i) for i in range(4)]
        assert dict(cluster.map(die_once, tasks, str(tmp_path / "marker"), progress=False)) == {i: 2 * i for i in range(4)}
        assert (tmp_path / "marker").exists()  # one worker really died


@pytest.mark.parametrize("model, kw", [("ukge_logi", {}), ("ukge_logi", {"top_k": 4}), ("beurre", {"threshold": 0.05})])
def test_ray_export_is_byte_identical(cluster: RayExecutor, runs: dict[str, Path], model: str, kw: dict, tmp_path: Path) -> None:
    ref = export(runs[model], tmp_path / "ref", **kw)
    man = export(runs[model], tmp_path / "ray", executor=cluster, **kw)
    assert man["nnz"] == ref["nnz"] > 0 and man["executor"]["executor"] == "ray"
    assert same_files(tmp_path / "ref", tmp_path / "ray", ref)
    assert not (tmp_path / "ray.shards").exists()  # the default shard folder goes once the export is in place


def test_ray_resumes_after_deleted_and_torn_shards(cluster: RayExecutor, runs: dict[str, Path], tmp_path: Path) -> None:
    only_two(cluster)
    run = runs["ukge_logi"]
    ref = export(run, tmp_path / "ref")
    shards = tmp_path / "shards"
    with pytest.raises(Stop):
        export(run, tmp_path / "out", executor=StopAfter(10), shards=str(shards))
    left = sorted(p.name for p in shards.iterdir())
    (shards / left[0]).unlink()
    (shards / left[5]).write_bytes((shards / left[5]).read_bytes()[:64])
    kept = {n: (shards / n).stat().st_mtime_ns for n in left[1:5] + left[6:]}
    seen: dict[str, int] = {}
    real_map = cluster.map

    def counting_map(fn: Any, tasks: list[Task], shared: Any = None, **kw: Any) -> Any:
        seen["tasks"] = len(tasks)
        return real_map(fn, tasks, shared, **kw)

    cluster.map = counting_map  # type: ignore[method-assign]
    try:
        man = export(run, tmp_path / "out", executor=cluster, shards=f"file://{shards}")
    finally:
        del cluster.map
    assert seen["tasks"] == 3 * -(-man["n_entities"] // ROWS) - 8
    assert same_files(tmp_path / "ref", tmp_path / "out", ref)
    assert all((shards / n).stat().st_mtime_ns == t for n, t in kept.items() if (shards / n).exists()) or not shards.exists()


def test_a_failing_shard_is_one_cli_line(cluster: RayExecutor, runs: dict[str, Path], tmp_path: Path) -> None:
    """A shard that cannot be written (a folder sits at its path): retried, then one line naming it."""
    from pipeline.cli import cli

    only_two(cluster)
    shards = tmp_path / "shards"
    (shards / "rel-0001-h000000000-000000120.arrow" / "x").mkdir(parents=True)
    res = CliRunner().invoke(
        cli, ["export", str(runs["ukge_logi"]), "--threshold", "0.3", "--out", str(tmp_path / "e"),
              "--executor", "ray", "--shards", str(shards), "--allow-dense"],  # a toy model: dense at 0.3
    )
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "shard rel-0001-h000000000-000000120.arrow (relation 1, heads 0..119) failed:" in lines[0]
    assert "Traceback" not in res.output and not (tmp_path / "e").exists()


@pytest.mark.parametrize("calibration", ["none", "D+L"])
def test_ray_answers_equal_local(cluster: RayExecutor, toy_pipeline: dict, calibration: str, tmp_path: Path) -> None:
    """Batches answered on actors that each load the export (and the driver's saved L and delta): the
    same rows as the local executor."""
    from pipeline.formats.answers import read_answers
    from tests.answer.src_entry import answer_src

    if calibration != "none":
        only_two(cluster)
    kw = dict(kg=toy_pipeline["kg"], progress=False, valid_queries=toy_pipeline["valid"], train_queries=toy_pipeline["train"],
              l_epochs=3, device="cpu")
    local = answer_src(toy_pipeline["test"], toy_pipeline["export"], calibration, tmp_path / "local", **kw)
    remote = answer_src(toy_pipeline["test"], toy_pipeline["export"], calibration, tmp_path / "ray", executor=cluster, **kw)
    a, b = read_answers(local["path"]), read_answers(remote["path"])
    assert len(a.frame) > 0 and a.frame["type"].nunique() > 1
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert b.meta["executor"]["executor"] == "ray" and local.get("delta") == remote.get("delta")


def test_local_executor_is_the_default(toy_pipeline: dict, tmp_path: Path) -> None:
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods import SRC
    from pipeline.stages.answer import answer_query_set

    method = SRC.load(toy_pipeline["export"], "toy", kg=toy_pipeline["kg"])
    qs = read_query_set(toy_pipeline["test"])
    pd.testing.assert_frame_equal(answer_query_set(qs, method, progress=False)[0],
                                  answer_query_set(qs, method, progress=False, executor=LocalExecutor())[0])
