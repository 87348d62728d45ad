"""Exporting a trained run's neural adjacency: seconds, facts kept, size against the dense matrix."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import Goal, Result, Table, benchmark, progress


def verify(run_dir: Path, export_dir: Path, threshold: float, spec: str) -> tuple[int, float]:
    """Brute force (the model's ``score_block`` against all tails) for the first R relations x H heads of
    ``spec`` = "RxH" (H evenly spaced ids, or ``all``), against the export's facts of those heads: (pairs in
    one of the two only, the largest score difference over the pairs in both)."""
    import torch

    from pipeline.formats.adjacency import load_adjacency
    from pipeline.models import load_run

    model = load_run(run_dir)
    graph, _ = load_adjacency(export_dir)
    n = model.n_entities
    n_rel, n_heads = spec.split("x")
    heads = (
        np.arange(n) if n_heads == "all" else np.unique(np.linspace(0, n - 1, int(n_heads)).astype(np.int64))
    )
    only_one, max_diff = 0, 0.0
    tails = torch.arange(n)
    for r in range(min(int(n_rel), model.n_relations)):
        gh, gt, gs = (x.numpy() for x in graph.relation(r))
        sel = np.isin(gh, heads)
        got = dict(zip((gh[sel] * n + gt[sel]).tolist(), gs[sel].tolist(), strict=True))
        ref = {}
        with torch.no_grad():
            for a in range(0, len(heads), 64):
                hb = torch.as_tensor(heads[a : a + 64])
                p = model.score_block(hb, r, tails)
                hi, ti = (p >= threshold).nonzero(as_tuple=True)
                ref.update(zip((hb[hi] * n + ti).tolist(), p[hi, ti].tolist(), strict=True))
        only_one += len(got.keys() ^ ref.keys())
        max_diff = max([max_diff] + [abs(got[k] - ref[k]) for k in got.keys() & ref.keys()])
    return only_one, max_diff


@benchmark(
    "export",
    title="Exporting a neural adjacency",
    goals=[
        Goal(
            "dense_share", "an export's size against the dense matrix at T = 0.1 (the largest)", "<=", 10, "%"
        ),
        Goal("differing", "facts in the export or brute force only (--verify)", "<=", 0, "facts"),
    ],
    quick={"thresholds": (0.5,)},
)
def export(
    *,
    runs: tuple[Path, ...],
    thresholds: tuple[float, ...] = (0.05, 0.1),
    device: str | None = None,
    verify_slice: str | None = None,
    out: Path | None = None,
) -> Result:
    """``pipeline export`` of each trained run (``--runs RUN,RUN``) at each threshold, cold (into a fresh
    folder), then its load: seconds, facts kept, facts per relation, size against the dense float32 matrix
    (a threshold whose export would outgrow a third of it is refused by the density guard: a row says so).
    ``--verify-slice RxH`` also compares R relations x H heads against brute force (the model scoring all
    tails): box models export through the pruned scorer, which must keep exactly those facts."""
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.models import read_run
    from pipeline.stages.export import export_adjacency

    folder = Path(out or tempfile.mkdtemp(prefix="bench-export-"))
    rows, shares, differing = [], [], []
    with progress(len(runs) * len(thresholds), "export", "export") as bar:
        for run_dir in runs:
            run = read_run(run_dir)
            name = run.config["model"] + ("+psl" if run.config.get("psl") else "")
            for thr in thresholds:
                dest = folder / f"{Path(run_dir).name}-t{thr:g}"
                shutil.rmtree(dest, ignore_errors=True)
                try:
                    man = export_adjacency(run_dir, threshold=thr, out=dest, device=device, progress=False)
                except Exception as exc:  # noqa: BLE001 - e.g. the density guard: a row of the table
                    rows.append([run.dataset, name, thr, f"refused: {str(exc)[:70]}", *[None] * 7])
                    bar.update(1)
                    continue
                t0 = time.perf_counter()
                graph, _ = load_adjacency(dest)
                load_s = time.perf_counter() - t0
                nnz = sorted(r["nnz"] for r in man["relations"])
                share = 100 * man["bytes"] / man["dense_float32_bytes"]
                if abs(thr - 0.1) < 1e-9:
                    shares.append(share)
                check = None
                if verify_slice:
                    only, diff = verify(Path(run_dir), dest, thr, verify_slice)
                    differing.append(only)
                    check = f"{only} differ, max diff {diff:.1e}"
                rows.append(
                    [
                        run.dataset,
                        name,
                        thr,
                        man["device"],
                        man["seconds"],
                        load_s,
                        man["nnz"],
                        f"{nnz[0]:,}-{nnz[len(nnz) // 2]:,}-{nnz[-1]:,}",
                        man["bytes"] / 1e6,
                        share,
                        check,
                    ]
                )
                bar.update(1)
                if out is None:
                    shutil.rmtree(dest, ignore_errors=True)
    cols = [
        "data set",
        "model",
        "T",
        "device",
        "export s",
        "load s",
        "facts",
        "facts per relation (min-median-max)",
        "MB",
        "% of dense",
        "against brute force",
    ]
    return Result(
        [Table(cols, rows, formats={"% of dense": ".2f", "MB": ".1f"})],
        {"dense_share": max(shares) if shares else None, "differing": sum(differing) if differing else None},
    )
