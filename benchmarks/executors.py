"""Local against Ray executors on the two heavy stages: wall seconds, identical output."""

from __future__ import annotations

import filecmp
import gc
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchmarkError, Goal, Result, Table, benchmark, progress


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _ray(workers: int) -> tuple[Any, float]:
    from pipeline.executors import RayExecutor

    t0 = time.perf_counter()
    ex = RayExecutor(workers=workers)
    ex._cluster()
    return ex, time.perf_counter() - t0


def _rows_per_block(run: Path) -> int:
    from pipeline.models import load_run

    model = load_run(run, device="cpu")
    return model.block_rows(model.n_entities)


def export_rows(
    run: Path, threshold: float, top_k: int | None, workers: tuple[int, ...], out: Path, bar
) -> list[list[Any]]:
    """A whole export, local then Ray at each worker count; identical bytes checked."""
    from pipeline.stages.export import export_adjacency, write_export
    from pipeline.stages.options import ExportOptions

    ref = out / "local"
    shutil.rmtree(ref, ignore_errors=True)
    what = f"{Path(run).name} T={threshold:g}" + (f" k={top_k}" if top_k else "")
    load0 = _load()
    t0 = time.perf_counter()
    man = export_adjacency(run, threshold=threshold, out=ref, top_k=top_k, progress=False)
    local = time.perf_counter() - t0
    bar.update(1)
    rows = [["export", what, "local", 1, None, None, local, 1.0, "reference", f"{load0} / {_load()}"]]
    for w in workers:
        dest = out / f"ray{w}"
        shutil.rmtree(dest, ignore_errors=True)
        load0 = _load()
        ex, start = _ray(w)
        try:
            t0 = time.perf_counter()
            m = write_export(
                run, ExportOptions(threshold=threshold, out=dest, top_k=top_k, progress=False), ex
            )
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        same = all(filecmp.cmp(ref / r["file"], dest / r["file"], shallow=False) for r in man["relations"])
        tasks = len(m["relations"]) * -(-m["n_entities"] // _rows_per_block(run))
        rows.append(
            [
                "export",
                what,
                "ray",
                w,
                tasks,
                start,
                wall,
                local / wall,
                "identical bytes" if same else "DIFFERENT",
                f"{load0} / {_load()}",
            ]
        )
        shutil.rmtree(dest, ignore_errors=True)
        bar.update(1)
    return rows


def answer_rows(queries: Path, adjacency: Path, workers: tuple[int, ...], bar) -> list[list[Any]]:
    """A query set answered by SRC (no calibration) locally, then by Ray actors that load the export."""
    import pandas as pd

    from pipeline.formats.queryset import read_query_set
    from pipeline.methods import SRC
    from pipeline.stages.answer import answer_query_set

    qs = read_query_set(queries)
    t0 = time.perf_counter()
    method = SRC.load(adjacency, qs.meta["dataset"])
    build = time.perf_counter() - t0
    counts = qs.frame["type"].value_counts()
    what = f"{Path(queries).name} ({len(qs)} queries, {len(counts)} types) on {Path(adjacency).name}"
    load0 = _load()
    t0 = time.perf_counter()
    ref, _ = answer_query_set(qs, method, progress=False)
    local = time.perf_counter() - t0
    bar.update(1)
    rows = [["answer", what, "local", 1, None, build, local, 1.0, "reference", f"{load0} / {_load()}"]]
    del method  # the driver's copy of the export: a Ray driver holds none
    gc.collect()
    for w in workers:
        load0 = _load()
        ex, start = _ray(w)
        try:
            t0 = time.perf_counter()
            # as `pipeline answer --executor ray` does: the driver only checks the manifest, actors load
            lazy = SRC.load(adjacency, qs.meta["dataset"], load=False)
            got, _ = answer_query_set(qs, lazy, progress=False, executor=ex)
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        try:
            pd.testing.assert_frame_equal(ref, got)
            same = "identical rows"
        except AssertionError:
            same = "DIFFERENT"
        rows.append(
            ["answer", what, "ray", w, len(counts), start, wall, local / wall, same, f"{load0} / {_load()}"]
        )
        bar.update(1)
    return rows


@benchmark(
    "executors",
    title="Local against Ray executors",
    goals=[Goal("differing", "Ray runs whose output differs from the local run's", "<=", 0, "runs")],
    quick={"workers": (1,)},
)
def executors(
    *,
    stage: str = "answer",
    run: Path | None = None,
    threshold: float = 0.1,
    top_k: int | None = None,
    queries: Path | None = None,
    adjacency: Path | None = None,
    workers: tuple[int, ...] = (1, 2),
    out: Path | None = None,
) -> Result:
    """``--stage export --run RUN [--threshold T --top-k K]``: a whole export through the export stage, locally,
    then on a local Ray cluster at each of ``--workers`` (each row starts its own cluster: "start s"), output
    compared byte for byte. ``--stage answer --queries Q --adjacency EXPORT``: the query set answered locally
    (start s: the driver's load of the export), then by Ray actors that each load the export, rows compared.
    Speedup = local wall / Ray wall. Needs ray (``pip install -e '.[ray]'``)."""
    import torch

    try:
        import ray  # noqa: F401
    except ImportError:
        raise BenchmarkError("ray is not installed (pip install -e '.[ray]')") from None
    torch.set_num_threads(1)  # the Ray workers run one torch thread each (Ray sets OMP_NUM_THREADS=1)
    with progress(1 + len(workers), "executors", "run") as bar:
        if stage == "export":
            if run is None:
                raise BenchmarkError("--stage export needs --run RUN_DIR")
            folder = Path(out or tempfile.mkdtemp(prefix="bench-executors-"))
            rows = export_rows(run, threshold, top_k, workers, folder, bar)
        elif stage == "answer":
            if queries is None or adjacency is None:
                raise BenchmarkError("--stage answer needs --queries and --adjacency")
            rows = answer_rows(queries, adjacency, workers, bar)
        else:
            raise BenchmarkError(f"--stage {stage!r}: export or answer")
    cols = [
        "stage",
        "input",
        "executor",
        "workers",
        "tasks",
        "start s",
        "wall s",
        "speedup",
        "output",
        "load before / after",
    ]
    return Result(
        [Table(cols, rows, formats={"start s": ".1f", "wall s": ".1f", "speedup": ".2f"})],
        {"differing": sum(r[8] == "DIFFERENT" for r in rows)},
    )
