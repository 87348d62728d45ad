"""The executor seam without Ray: the local executor's contract, and the sharded export it can drive (the
path Ray takes) writing byte-for-byte the single-process export's files, resuming, refusing foreign shards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.executors import EXECUTORS, LocalExecutor, Task, make_executor
from pipeline.formats.adjacency import load_adjacency, shard_file
from pipeline.stages.export import write_export
from pipeline.stages.options import ExportOptions
from tests.cases import ExecutorCase
from tests.executors.helpers import ROWS, N, Stop, StopAfter, export, same_files


class TestLocalExecutor(ExecutorCase):
    name = "local"

    @pytest.fixture()
    def executor(self) -> Any:
        return LocalExecutor()

    def test_refuses_cluster_options(self) -> None:
        with pytest.raises(PipelineError, match="address= names a Ray cluster"):
            make_executor("local", address="ray://h:10001")
        with pytest.raises(PipelineError, match="workers=2 needs executor='ray'"):
            make_executor("LOCAL", workers=2)
        assert EXECUTORS.canonical("Ray") == "ray"


@pytest.mark.parametrize(
    "model, kw",
    [("ukge_logi", {}), ("ukge_logi", {"top_k": 4}), ("ukge_logi", {"shard_heads": 40}), ("beurre", {"threshold": 0.05})],
)
def test_sharded_export_writes_the_same_bytes(runs: dict[str, Path], model: str, kw: dict, tmp_path: Path) -> None:
    """Shards on pyarrow's in-memory mock filesystem, concatenated: identical relation files (top-k, shards
    of several blocks, and a box model's pruned export, one shard per relation, included)."""
    # shard_heads shapes the shards only: the reference, not sharded, is refused it (it would do nothing)
    ref = export(runs[model], tmp_path / "ref", **{k: v for k, v in kw.items() if k != "shard_heads"})
    sharded = export(runs[model], tmp_path / "sharded", executor=LocalExecutor(), shards="mock://shards", **kw)
    assert ref["nnz"] == sharded["nnz"] > 0
    assert same_files(tmp_path / "ref", tmp_path / "sharded", ref)
    assert sharded.get("pruning", {}).get("facts") == ref.get("pruning", {}).get("facts")
    load_adjacency(tmp_path / "sharded", dataset="toy")  # the reader's checks pass


def test_resume_rescores_only_missing_or_partial_shards(runs: dict[str, Path], tmp_path: Path) -> None:
    run = runs["ukge_logi"]
    ref = export(run, tmp_path / "ref")
    shards = tmp_path / "shards"
    with pytest.raises(Stop):
        export(run, tmp_path / "out", executor=StopAfter(12), shards=str(shards))
    left = sorted(p.name for p in shards.iterdir())
    assert len(left) == 12 and not (tmp_path / "out").exists()  # no manifest, no export: only shards
    (shards / left[3]).unlink()  # deleted
    partial = shards / left[7]
    partial.write_bytes(partial.read_bytes()[:100])  # a torn write
    kept = {name: (shards / name).stat().st_mtime_ns for name in left if name not in (left[3], left[7])}
    scored: list[str] = []

    class Counting(LocalExecutor):
        def map(self, fn: Any, tasks: list[Task], shared: Any = None, **kw: Any) -> Any:
            scored.extend(t.label.split()[1] for t in tasks)
            return super().map(fn, tasks, shared, **kw)

    man = export(run, tmp_path / "out", executor=Counting(), shards=f"file://{shards}")
    n_shards = 3 * -(-N // ROWS)
    assert len(scored) == n_shards - 10 and left[3] in scored and left[7] in scored
    assert not set(kept) & set(scored)
    assert same_files(tmp_path / "ref", tmp_path / "out", ref) and man["nnz"] == ref["nnz"]
    assert not shards.exists() or not any(shards.iterdir())  # shards removed once the export is in place


def test_a_shard_of_another_export_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    with pytest.raises(Stop):
        export(runs["ukge_logi"], tmp_path / "a", executor=StopAfter(2), shards=str(shards))
    with pytest.raises(ArtifactError, match=r"shard .*rel-0000-h000000000-000000017\.arrow: belongs to another export \(threshold"):
        export(runs["ukge_logi"], tmp_path / "b", executor=LocalExecutor(), shards=str(shards), threshold=0.5)


def test_density_guard_stays_global(runs: dict[str, Path], tmp_path: Path) -> None:
    """The size guard judges the whole export on the driver: a tiny threshold over a small budget fails."""
    with pytest.raises(PipelineError, match="more than its budget of 1.0 KB"):
        write_export(runs["ukge_logi"], ExportOptions(threshold=0.01, out=tmp_path / "x", progress=False, block_rows=ROWS,
                                                      shards="mock://g", max_bytes=1000), LocalExecutor())


def test_shard_filesystems(tmp_path: Path) -> None:
    from pipeline.formats.adjacency import read_shard, shard_filesystem, write_shard

    fs, base = shard_filesystem(tmp_path / "s")
    assert isinstance(fs, pafs.LocalFileSystem) and base == str((tmp_path / "s").resolve())
    fs, base = shard_filesystem("memory://bucket/p")  # not pyarrow's: through fsspec
    assert isinstance(fs, pafs.PyFileSystem)
    fs.create_dir(base, recursive=True)
    meta = {"format": "f", "relation": "0"}
    import numpy as np

    cols = (np.array([0, 1], np.int32), np.array([2, 0], np.int32), np.array([0.5, 0.25], np.float32))
    size = write_shard(fs, f"{base}/{shard_file(0, 0, 2)}", meta, [cols])
    assert size > 0 and [i.base_name for i in fs.get_file_info(pafs.FileSelector(base))] == [shard_file(0, 0, 2)]
    batches, got = read_shard(fs, f"{base}/{shard_file(0, 0, 2)}", meta)
    assert got["relation"] == "0" and pa.Table.from_batches(batches).column("score").to_pylist() == [0.5, 0.25]
    assert read_shard(fs, f"{base}/missing.arrow", meta) is None


def test_without_ray_the_ray_executor_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    from click.testing import CliRunner

    from pipeline.cli import cli

    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: `import ray` raises ImportError
    res = CliRunner().invoke(cli, ["export", str(tmp_path / "run"), "--executor", "ray"])
    assert res.exit_code == 2 and res.output.strip() == "error: --executor ray needs Ray: pip install 'soft-queries[ray]'"
    res = CliRunner().invoke(cli, ["export", str(tmp_path / "run"), "--executor", "dask"])
    assert res.exit_code == 2 and "executor" in res.output and "Traceback" not in res.output


def test_src_for_actors_loads_nothing_on_the_driver(toy_pipeline: dict) -> None:
    """SRC.load(load=False) only checks the manifest; its recipe rebuilds, in any process, the method that
    build() loads, with the same utilities."""
    import torch

    from pipeline.formats.queryset import read_query_set
    from pipeline.methods import SRC

    lazy = SRC.load(toy_pipeline["export"], "toy", kg=toy_pipeline["kg"], load=False)
    full = SRC.load(toy_pipeline["export"], "toy", kg=toy_pipeline["kg"])
    assert lazy.adjacency is None and lazy.n_entities == full.n_entities and lazy.label == full.label
    queries = read_query_set(toy_pipeline["test"]).queries()[:3]
    with pytest.raises(PipelineError, match="did not load its export"):
        lazy.utilities(queries)
    build, args = lazy.portable()
    assert torch.equal(build(*args).utilities(queries), full.utilities(queries))
    with pytest.raises(ArtifactError, match="an export of data set 'toy', not 'ppi5k'"):
        SRC.load(toy_pipeline["export"], "ppi5k", kg=toy_pipeline["kg"], load=False)
