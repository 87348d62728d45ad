"""SRC on a model's export, in one process: queries/s per query type, without and with calibration."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import Goal, Result, Table, benchmark, progress

BATCH = 256


def random_l(graph, seed: int):
    """An L with seeded random weights over random unit feature tables (dim 16): it costs what a trained L
    costs (the same facts, the same index), and needs no training."""
    import torch

    from pipeline.methods.src.affine import AffineCalibration

    gen = torch.Generator().manual_seed(seed)
    d = 16
    tables = tuple(
        (torch.randn(k, d, generator=gen) / d**0.5).to(graph.device)
        for k in (graph.n_entities, graph.n_relations, graph.n_entities)
    )
    calib = AffineCalibration(d, d)
    with torch.no_grad():
        for p in calib.parameters():
            p.copy_(0.05 * torch.randn(p.shape, generator=gen))
    return calib.to(graph.device), tables


def saved_l(manifest: dict, l_dir: Path, device: str):
    """The L saved by ``pipeline answer --calibration L`` in ``l_dir``, with its backbone's feature tables."""
    from pipeline.methods.src.affine import feature_tables, load_affine
    from pipeline.models import load_run

    tables = feature_tables(load_run(manifest["run_dir"], device=device), device)
    calib = load_affine(l_dir, tables[0].shape[1], tables[1].shape[1], device)
    if calib is None:
        from benchmarks.harness import BenchmarkError

        raise BenchmarkError(f"{l_dir}: no L.pt")
    return calib, tables


def time_types(adj, by_type: dict, delta: float) -> dict[str, float]:
    """Queries/s per type, the type's queries in batches of BATCH (as ``pipeline answer`` batches them)."""
    import torch

    from pipeline.engine import search_batch
    from pipeline.methods.src.delta import lower_alphas

    out = {}
    for t, qs in by_type.items():
        low = [lower_alphas(q, delta) for q in qs]
        if adj.device.type == "cuda":
            torch.cuda.synchronize(adj.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            for i in range(0, len(low), BATCH):
                search_batch(low[i : i + BATCH], adj)
        if adj.device.type == "cuda":
            torch.cuda.synchronize(adj.device)
        out[t] = len(qs) / (time.perf_counter() - t0)
    return out


@benchmark(
    "answer",
    title="SRC on a model's export, in one process",
    # CN15k's goals are the whole command's (cold-answer)
    goals=[Goal("ppi5k_slowest", "PPI5k export: the slowest type, every calibration", ">=", 1000, "q/s")],
    quick={"variants": ("none", "D"), "repeat": 1, "per_type": 20},
)
def answer(
    *,
    queries: Path,
    adjacency: Path,
    variants: tuple[str, ...] = ("none", "D", "L", "D+L"),
    delta: float = 0.1,
    l_dir: Path | None = None,
    repeat: int = 2,
    threads: int = 1,
    per_type: int | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> Result:
    """The engine's queries/s per type over an export (``--adjacency``) for a query set (``--queries``), the
    type's queries in batches of 256 as ``pipeline answer`` runs them, the best of ``--repeat`` runs, each
    on a fresh index (nothing memoised) after one untimed pass (the process's first calls). Calibrations:
    ``none``; ``D`` (every alpha lowered by ``--delta``); ``L`` and ``D+L`` with the L saved in ``--l-dir``,
    else an L of seeded random weights (the same cost: the same facts, the same index). Building answer
    rows and files is not counted (``cold-answer`` measures whole commands)."""
    import torch

    from pipeline.engine import Adjacency
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.src.affine import calibrated_adjacency
    from pipeline.softquery.types import ordered_types

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    qs = read_query_set(queries)
    dataset = qs.meta["dataset"]
    graph, manifest = load_adjacency(adjacency, dataset=dataset, device=device)
    parsed = qs.queries()
    types = ordered_types(set(qs.frame["type"]))
    by_type = {
        t: [parsed[i] for i in np.nonzero((qs.frame["type"] == t).to_numpy())[0][:per_type]] for t in types
    }
    calib, tables = saved_l(manifest, l_dir, device) if l_dir else random_l(graph, seed)
    time_types(Adjacency.from_graph(graph), by_type, 0.0)  # untimed: the process's first calls
    best: dict[str, dict[str, float]] = {}
    with progress(len(variants) * repeat, "answer", "pass") as bar:
        for _ in range(repeat):
            for variant in variants:
                adj = Adjacency.from_graph(graph)
                if "L" in variant:
                    with torch.no_grad():
                        adj = calibrated_adjacency(adj, calib, tables)
                got = time_types(adj, by_type, delta if "D" in variant else 0.0)
                row = best.setdefault(variant, {})
                for t, v in got.items():
                    row[t] = max(row.get(t, 0.0), v)
                del adj
                bar.update(1)
    rows = [[v, *(best[v][t] for t in types)] for v in variants]
    measured: dict[str, float | None] = {}
    if dataset == "ppi5k":
        measured["ppi5k_slowest"] = min(min(r.values()) for r in best.values())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    note = (
        f"{dataset} export at threshold {manifest['threshold']} ({graph.nnz:,} facts), {len(qs)} queries"
        f"{f' (the first {per_type} per type)' if per_type else ''}; L {'saved' if l_dir else 'of random weights'};"
        f" {threads} torch thread(s) on {device}; peak RSS {peak:,.0f} MiB."
    )
    return Result([Table(["calibration", *types], rows, title="Queries/s per type")], measured, [note])
