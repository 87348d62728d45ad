"""The processes executor: the executor contract on forked workers; `pipeline answer` on every
core by default, with answers row for row those of one process, for calibrations none, D and D+L, with
the export's pair cache cold and warm; --workers 1 is today's in-process path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from pipeline.core.errors import PipelineError
from pipeline.executors import LocalExecutor, ProcessExecutor, answer_executor
from pipeline.executors.processes import cores
from tests.cases import ExecutorCase


class TestProcessExecutor(ExecutorCase):
    name = "processes"

    @pytest.fixture()
    def executor(self) -> Any:
        return ProcessExecutor(workers=2)

    def test_refuses_cluster_options(self) -> None:
        with pytest.raises(PipelineError, match="address= names a Ray cluster"):
            ProcessExecutor(address="ray://h:10001")
        with pytest.raises(PipelineError, match="workers=0: must be at least 1"):
            ProcessExecutor(workers=0)


def test_answer_uses_every_core_by_default() -> None:
    """The answering stage's default executor is named for what it is: processes, one per core; one worker
    (or ``local``) answers in this process."""
    from pipeline.stages.options import AnswerOptions

    assert AnswerOptions().executor == "processes" and AnswerOptions().workers is None
    assert isinstance(answer_executor("processes", None, 1), LocalExecutor)
    two = answer_executor("processes", None, 2)
    assert isinstance(two, ProcessExecutor) and two.workers == 2
    default = answer_executor()
    assert default.workers == cores() and isinstance(
        default, ProcessExecutor if cores() > 1 else LocalExecutor
    )
    assert isinstance(answer_executor("local", None, None), LocalExecutor)
    with pytest.raises(PipelineError, match="workers=0: must be at least 1"):
        answer_executor("processes", None, 0)


@pytest.mark.parametrize("calibration", ["none", "D", "D+L"])
def test_workers_answer_as_one_process(
    toy_pipeline: dict, calibration: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two forked workers (the batches of each type split between them), the pair cache cold then warm:
    the same answers file rows as one process without the cache."""
    from pipeline.formats.answers import read_answers
    from tests.answer.src_entry import answer_src

    kw = dict(
        kg=toy_pipeline["kg"],
        progress=False,
        valid_queries=toy_pipeline["valid"],
        train_queries=toy_pipeline["train"],
        l_epochs=3,
        device="cpu",
    )
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", "off")
    one = answer_src(toy_pipeline["test"], toy_pipeline["export"], calibration, tmp_path / "one", **kw)
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(tmp_path / "pairs"))
    base = read_answers(one["path"]).frame
    assert len(base) > 0 and base["type"].nunique() > 1
    for state in ("cold", "warm"):
        two = answer_src(
            toy_pipeline["test"],
            toy_pipeline["export"],
            calibration,
            tmp_path / state,
            executor=ProcessExecutor(workers=2),
            **kw,
        )
        got = read_answers(two["path"])
        pd.testing.assert_frame_equal(base, got.frame)
        assert got.meta["executor"] == {"executor": "processes", "workers": 2}
        assert all("wall_queries_per_s" in s for s in two["throughput"].values())
        assert one.get("delta") == two.get("delta")


def test_cli_workers(toy_pipeline: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.cli import cli
    from pipeline.formats.answers import read_answers

    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(tmp_path / "pairs"))
    monkeypatch.setattr("pipeline.methods.src.method._registered_sizes", lambda *_: (None, None))
    args = ["answer", str(toy_pipeline["test"]), "--adjacency", str(toy_pipeline["export"]), "--json"]
    runner = CliRunner()
    frames = []
    for w in ("1", "2"):
        res = runner.invoke(cli, [*args, "--workers", w, "--out", str(tmp_path / w)])
        assert res.exit_code == 0, res.output
        frames.append(read_answers(json.loads(res.stdout)["path"]).frame)
    pd.testing.assert_frame_equal(*frames)
    bad = runner.invoke(cli, [*args, "--workers", "0", "--out", str(tmp_path / "0")])
    assert (
        bad.exit_code != 0 and "--workers 0: must be at least 1" in bad.output and "Traceback" not in bad.output
    )


class _OnGpu:
    """A state that says it computes on a GPU (no GPU needed: the executor only reads ``device``)."""

    device = torch.device("cuda")

    def pid(self, _: Any) -> int:
        return os.getpid()


def _pid(state: _OnGpu, x: int) -> int:
    return state.pid(x)


def test_a_gpu_method_is_answered_in_this_process() -> None:
    """CUDA does not survive a fork: a state on a GPU runs its tasks here, one after another."""
    from pipeline.executors import ActorState, Task

    tasks = [Task(f"batch {i}", i) for i in range(3)]
    got = dict(ProcessExecutor(workers=2).map_on_actors(_pid, tasks, ActorState(_OnGpu), progress=False))
    assert set(got.values()) == {os.getpid()}


def test_batches_cut_within_types_merge_in_order(toy_pipeline: dict) -> None:
    """Small batches (several per type, answered out of order by four workers): the rows of one process."""
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods import SRC
    from pipeline.stages.answer import answer_query_set

    method = SRC.load(toy_pipeline["export"], "toy", kg=toy_pipeline["kg"])
    qs = read_query_set(toy_pipeline["test"])
    one, _ = answer_query_set(qs, method, batch_size=3, progress=False)
    four, stats = answer_query_set(qs, method, batch_size=3, progress=False, executor=ProcessExecutor(workers=4))
    pd.testing.assert_frame_equal(one, four)
    assert all(s["wall_queries_per_s"] > 0 for s in stats.values())


def test_a_type_cut_across_workers_answers_as_one_process(toy_pipeline: dict) -> None:
    """One type, more workers than types: the type is cut by answer_plan (parts out of the file's order)
    and the rows are put back in it: the frame of one process, row for row."""
    from pipeline.executors import ProcessExecutor
    from pipeline.formats.queryset import QuerySet, read_query_set
    from pipeline.methods import SRC
    from pipeline.stages.answer import answer_query_set

    method = SRC.load(toy_pipeline["export"], "toy", kg=toy_pipeline["kg"])
    full = read_query_set(toy_pipeline["test"])
    # the type with the most queries, in reverse order (a file need not be sorted)
    top = full.frame["type"].value_counts().index[0]
    frame = full.frame[full.frame["type"] == top].iloc[::-1].reset_index(drop=True)
    qs = QuerySet(frame, dict(full.meta), full.path)
    one, _ = answer_query_set(qs, method, progress=False)
    three, _ = answer_query_set(qs, method, progress=False, executor=ProcessExecutor(workers=3))
    pd.testing.assert_frame_equal(one, three)
    assert list(dict.fromkeys(one["query_id"])) == frame["id"].astype(str).tolist()


_FORK_AFTER_THREADS = """
import torch
from pipeline.executors import ActorState, ProcessExecutor, Task
from tests.executors.test_processes import _parallel_work

torch.set_num_threads(2)
a = torch.randn(1500, 1500)
(a @ a).sum()  # the parent's OpenMP pool is running when the workers fork
tasks = [Task(f"batch {i}", i) for i in range(3)]
got = dict(ProcessExecutor(workers=1).map_on_actors(_parallel_work, tasks, ActorState(int), progress=False))
print(sorted(got))
"""


def _parallel_work(_state: Any, i: int) -> int:
    x = torch.randn(2_000_000)
    (torch.randn(800, 800) @ torch.randn(800, 800)).sum()
    x.sort()
    return i


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="no fork here")
def test_forked_workers_do_not_hang_after_the_parent_used_threads() -> None:
    """A forked worker given more than one torch thread hangs in its first parallel region once the parent
    has used OpenMP's pool (one worker on 2 cores got 2 threads; two on 16 got 8): workers run one each."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    try:
        res = subprocess.run([sys.executable, "-c", _FORK_AFTER_THREADS], capture_output=True, text=True,
                             timeout=120, cwd=root, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("forked workers hung after the parent had used its OpenMP threads")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[0, 1, 2]"


_HEAP_FAULTS = """
import resource, sys
import torch
from pipeline.core.heap import keep_freed_heap
if sys.argv[1] == "keep":
    assert keep_freed_heap()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for mb in range(1, 21):  # a step's temporaries, each larger than the last: made, written, freed
    torch.full((mb << 18,), 1.0).sum()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_workers_keep_the_heap_they_free() -> None:
    """keep_freed_heap (each forked worker): temporaries of 1, 2, ... 20 MiB made and freed one after the
    other fault in about the largest one's pages (the heap keeps what was freed), where glibc's default
    maps each afresh above its adaptive threshold (210 MiB of pages: ~54,000 faults)."""
    runs = {
        mode: int(
            subprocess.run(
                [sys.executable, "-c", _HEAP_FAULTS, mode], capture_output=True, text=True, check=True
            ).stdout.split()[-1]
        )
        for mode in ("default", "keep")
    }
    assert runs["default"] > 40_000  # the premise: each temporary faulted in afresh
    # ~20 MiB: 5,120 pages and the interpreter's own, 5,400-7,700 faults; on some runs (the same code, one
    # thread or two) twice that, ~15,400-20,300: the largest temporaries' pages once more. Either is far
    # from the default's ~54,000, which is what a heap that gives back what it frees would cost
    assert runs["keep"] < 0.4 * runs["default"]
