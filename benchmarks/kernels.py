"""The compiled stream (pipeline/engine/kernels.py) against the torch form of the same max-plus step."""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchmarkError, Goal, Result, Table, benchmark, progress


def _same(a, b) -> bool:
    import torch

    return a.shape == b.shape and bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def _inputs(entities: int, entries: int):
    import torch

    g = torch.Generator().manual_seed(0)
    dst = torch.sort(torch.randint(0, entities, (entries,), generator=g, dtype=torch.int32)).values
    src = torch.randint(0, entities, (entries,), generator=g, dtype=torch.int32)
    return g, src, dst


def cpu_steps(
    entities: int, entries: int, rows: tuple[int, ...], atoms: tuple[int, ...], repeat: int, bar
) -> list[list[Any]]:
    """ms of the torch form and of the compiled form of one step, best of ``repeat`` after an untimed call."""
    import torch

    from pipeline.engine import kernels
    from pipeline.engine import maxplus as mp

    g, src, dst = _inputs(entities, entries)
    out = []
    for a in atoms:
        cc = torch.rand(a, entries, generator=g)
        for r in rows:
            state = torch.rand(r, entities, generator=g) * 3
            betas = [torch.rand(r, generator=g) for _ in range(a)]
            times, outs = {}, {}
            for form, work in (("torch", 1 << 62), ("compiled", 0)):
                old = kernels.MIN_WORK
                kernels.MIN_WORK = work
                try:
                    best = float("inf")
                    for i in range(
                        repeat + 1
                    ):  # the first call (compilation or the cache's load) is not timed
                        t = time.perf_counter()
                        outs[form] = mp._stream(state, slice(None), betas, src, dst, cc)
                        if i:
                            best = min(best, time.perf_counter() - t)
                    times[form] = best
                finally:
                    kernels.MIN_WORK = old
            out.append(
                [
                    a,
                    r,
                    times["torch"] * 1e3,
                    times["compiled"] * 1e3,
                    times["compiled"] / times["torch"],
                    bool(torch.equal(outs["torch"], outs["compiled"])),
                ]
            )
            bar.update(1)
    return out


def _gpu_ms(fn, repeat: int):
    import torch

    out = fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e3, out


def gpu_steps(
    entities: int, entries: int, rows: tuple[int, ...], atoms: tuple[int, ...], repeat: int, bar
) -> list[list[Any]]:
    """Median ms of torch's CUDA form and of the fused triton kernel (segmented and per entry), each checked
    value for value against the CPU's compiled form."""
    import torch

    from pipeline.engine import kernels
    from pipeline.engine import maxplus as mp
    from pipeline.engine._stream_triton import stream_max as fused

    g, src, dst = _inputs(entities, entries)
    dsrc, ddst = src.cuda(), dst.cuda()
    out = []
    for a in atoms:
        cc = torch.rand(a, entries, generator=g)
        dcc = cc.cuda()
        for r in rows:
            state = torch.rand(r, entities, generator=g) * 3
            betas = [torch.rand(r, generator=g) for _ in range(a)]
            on_gpu = (state.cuda(), [b.cuda() for b in betas], dsrc, ddst, dcc)
            want = kernels.stream_max(state, betas, src, dst, cc)
            old = kernels.GPU_MIN_WORK
            kernels.GPU_MIN_WORK = 1 << 62
            try:
                t_torch, o_torch = _gpu_ms(
                    lambda on_gpu=on_gpu: mp._stream(on_gpu[0], slice(None), *on_gpu[1:]), repeat
                )
            finally:
                kernels.GPU_MIN_WORK = old
            t_seg, o_seg = _gpu_ms(partial(fused, *on_gpu, segmented=True), repeat)
            t_ent, o_ent = _gpu_ms(partial(fused, *on_gpu, segmented=False), repeat)
            same = all(_same(o.cpu(), want) for o in (o_torch, o_seg, o_ent))
            out.append([a, r, t_torch, t_seg, t_ent, min(t_seg, t_ent) / t_torch, same])
            bar.update(1)
    return out


def per_type(
    queries: Path, adjacency: Path, types: tuple[str, ...], passes: int, device: str
) -> list[list[Any]]:
    """The test queries of each type answered in this process, ``passes`` passes per form after a first one:
    q/s with the torch form (PIPELINE_KERNELS=torch) and the compiled one (CPU time; wall-clock on a GPU)."""
    import torch

    from pipeline.engine import kernels, search_batch
    from pipeline.formats.engine_index import load_engine_index
    from pipeline.formats.queryset import read_query_set

    gpu = device == "cuda"
    adj, _ = load_engine_index(adjacency, device=device)
    kernels.settle()
    qs = read_query_set(queries)
    parsed, kinds = qs.queries(), qs.frame["type"].tolist()
    clock = time.perf_counter if gpu else time.process_time
    rows = []
    for qtype in types:
        batch = [q for q, t in zip(parsed, kinds, strict=True) if t == qtype]
        if not batch:
            continue
        got = {}
        for form in ("torch", "auto"):
            os.environ["PIPELINE_KERNELS"] = form
            with torch.no_grad():
                search_batch(batch, adj)  # the first pass: the pairs this type reads, mapped
                rates = []
                for _ in range(passes):
                    t = clock()
                    search_batch(batch, adj)
                    if gpu:
                        torch.cuda.synchronize()
                    rates.append(len(batch) / max(clock() - t, 1e-9))
            got[form] = f"{min(rates):,.0f}-{max(rates):,.0f}"
        rows.append([qtype, len(batch), got["torch"], got["auto"]])
    os.environ.pop("PIPELINE_KERNELS", None)
    return rows


@benchmark(
    "kernels",
    title="The compiled max-plus step",
    goals=[
        Goal(
            "ratio",
            "the compiled (CPU) or fused (GPU) step's ms against the torch form's (the worst shape)",
            "<=",
            1,
            "x",
        ),
        Goal("differing", "shapes whose values differ from the reference form", "<=", 0, "shapes"),
    ],
    quick={"entries": 300_000, "rows": (1, 8), "atoms": (1, 2), "repeat": 2},
)
def kernels(
    *,
    entities: int = 15_000,
    entries: int = 3_000_000,
    rows: tuple[int, ...] = (1, 2, 4, 8, 36),
    atoms: tuple[int, ...] = (1, 2, 3),
    threads: int = 1,
    repeat: int = 3,
    device: str = "cpu",
    queries: Path | None = None,
    adjacency: Path | None = None,
    types: tuple[str, ...] = ("2m", "im", "2p", "ip", "inp", "up"),
    passes: int = 3,
) -> Result:
    """One step on synthetic input (``--entries`` entries sorted by column over ``--entities`` entities, random
    sources, confidences and betas, seeded) for each number of atoms and rows. On the CPU: ms of the torch
    form (``maxplus._stream``) and of the compiled numba form, best of ``--repeat``, values compared. With
    ``--device cuda`` (a GPU and triton): torch's CUDA form against the fused kernel
    (``pipeline/engine/_stream_triton.py``, with and without the segmented pre-reduction), median of
    ``--repeat`` synchronised calls, each checked against the CPU's compiled form. With ``--queries`` and
    ``--adjacency``: each of ``--types``' queries answered in this process, torch form against compiled."""
    import torch

    from pipeline.engine import kernels as engine_kernels

    torch.set_num_threads(threads)
    if not engine_kernels.load():
        raise BenchmarkError("numba cannot be imported or cannot compile here: nothing to compare")
    tables: list[Table] = []
    with progress(len(rows) * len(atoms), "kernels", "shape") as bar:
        if device == "cuda":
            if not engine_kernels.load_gpu():
                raise BenchmarkError("no CUDA GPU, or triton cannot be imported or cannot compile here")
            steps = gpu_steps(entities, entries, rows, atoms, repeat, bar)
            tables.append(
                Table(
                    [
                        "atoms",
                        "rows",
                        "torch form (GPU) ms",
                        "fused, segmented ms",
                        "fused, per entry ms",
                        "fused / torch",
                        "equal",
                    ],
                    steps,
                    title=f"One step on {torch.cuda.get_device_name()}: {entries:,} entries, median of {repeat}",
                    formats={"fused / torch": ".2f"},
                )
            )
            ratio = max(r[5] for r in steps)
        else:
            steps = cpu_steps(entities, entries, rows, atoms, repeat, bar)
            tables.append(
                Table(
                    ["atoms", "rows", "torch form ms", "compiled ms", "compiled / torch", "equal"],
                    steps,
                    title=f"One step: {entries:,} entries over {entities:,} entities, {threads} thread(s), "
                    f"best of {repeat}",
                    formats={"compiled / torch": ".2f"},
                )
            )
            ratio = max(r[4] for r in steps)
    if queries and adjacency:
        tables.append(
            Table(
                ["type", "queries", "torch form q/s", "compiled q/s"],
                per_type(queries, adjacency, types, passes, device),
                title="Per type, in one process",
            )
        )
    return Result(tables, {"ratio": ratio, "differing": sum(not r[-1] for r in steps)})
