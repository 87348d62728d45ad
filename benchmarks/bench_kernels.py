"""The compiled stream (pipeline/engine/kernels.py) against the torch form of the same step.

    python benchmarks/bench_kernels.py [--entities 15000] [--entries 3000000] [--rows 1,2,4,8,36] \
        [--atoms 1,2,3] [--threads 1] [--repeat 3] \
        [--queries TEST --adjacency EXPORT --types 2m,im,2p --passes 3] [--device cuda]

1. One step, synthetic: `--entries` entries sorted by column over `--entities` entities (random sources,
   confidences, betas; a seeded generator), for each number of atoms and rows: ms of the torch form
   (maxplus._stream) and of the compiled form, best of --repeat, and whether the values are equal.
2. With --queries and --adjacency: the test queries of each of --types answered in this process (the
   export's engine index, the pair cache as it is), --passes passes per form after a first pass, CPU time
   of --threads threads: q/s per pass with the torch form (PIPELINE_KERNELS=torch) and the compiled one.
3. With --device cuda (a GPU and triton): the step on the GPU, the torch form (maxplus._stream's CUDA
   path) against the fused kernel (pipeline/engine/_stream_triton.py, with and without the segmented
   pre-reduction), median ms over --repeat timed calls (synchronised), each checked value for value
   against the CPU's compiled form; and the per-type table on the GPU (wall-clock, synchronised), the
   torch form (PIPELINE_KERNELS=torch) against the fused one (auto).

Needs only the repository and its environment (numba installed); prints markdown tables.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.engine import kernels  # noqa: E402
from pipeline.engine import maxplus as mp  # noqa: E402


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def step_table(args: argparse.Namespace) -> None:
    g = torch.Generator().manual_seed(0)
    n, f = args.entities, args.entries
    dst = torch.sort(torch.randint(0, n, (f,), generator=g, dtype=torch.int32)).values
    src = torch.randint(0, n, (f,), generator=g, dtype=torch.int32)
    print(f"\nOne step: {f:,} entries over {n:,} entities, sorted by column, {args.threads} thread(s), ms (best of {args.repeat})\n")
    print("| atoms | rows | torch form | compiled | equal |")
    print("|---|---:|---:|---:|---|")
    for atoms in ints(args.atoms):
        cc = torch.rand(atoms, f, generator=g)
        for rows in ints(args.rows):
            state = torch.rand(rows, n, generator=g) * 3
            betas = [torch.rand(rows, generator=g) for _ in range(atoms)]
            times = {}
            outs = {}
            for form, work in (("torch", 1 << 62), ("compiled", 0)):
                old = kernels.MIN_WORK
                kernels.MIN_WORK = work
                try:
                    best = float("inf")
                    for _ in range(args.repeat + 1):  # the first call: compilation or cache load, not timed
                        t = time.perf_counter()
                        outs[form] = mp._stream(state, slice(None), betas, src, dst, cc)
                        best = min(best, time.perf_counter() - t) if _ else best
                    times[form] = best
                finally:
                    kernels.MIN_WORK = old
            same = bool(torch.equal(outs["torch"], outs["compiled"]))
            print(f"| {atoms} | {rows} | {times['torch'] * 1e3:.1f} | {times['compiled'] * 1e3:.1f} | {same} |")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all()) and a.shape == b.shape


def _gpu_ms(fn, repeat: int) -> tuple[float, torch.Tensor]:
    """Median ms of fn() over `repeat` synchronised calls after one untimed call; fn's last result."""
    out = fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e3, out


def _torch_form(state, betas, src, dst, cc) -> torch.Tensor:
    return mp._stream(state, slice(None), betas, src, dst, cc)


def gpu_step_table(args: argparse.Namespace) -> None:
    from pipeline.engine._stream_triton import stream_max as fused

    g = torch.Generator().manual_seed(0)
    n, f = args.entities, args.entries
    dst = torch.sort(torch.randint(0, n, (f,), generator=g, dtype=torch.int32)).values
    src = torch.randint(0, n, (f,), generator=g, dtype=torch.int32)
    dsrc, ddst = src.cuda(), dst.cuda()
    print(f"\nOne step on {torch.cuda.get_device_name()}: {f:,} entries over {n:,} entities, sorted by column, "
          f"ms (median of {args.repeat}); equal: each GPU form against the CPU's compiled form\n")
    print("| atoms | rows | torch form (GPU) | fused, segmented | fused, per entry | equal |")
    print("|---|---:|---:|---:|---:|---|")
    for atoms in ints(args.atoms):
        cc = torch.rand(atoms, f, generator=g)
        dcc = cc.cuda()
        for rows in ints(args.rows):
            state = torch.rand(rows, n, generator=g) * 3
            betas = [torch.rand(rows, generator=g) for _ in range(atoms)]
            on_gpu = (state.cuda(), [b.cuda() for b in betas], dsrc, ddst, dcc)
            want = kernels.stream_max(state, betas, src, dst, cc)
            old = kernels.GPU_MIN_WORK
            kernels.GPU_MIN_WORK = 1 << 62
            try:
                t_torch, o_torch = _gpu_ms(partial(_torch_form, *on_gpu), args.repeat)
            finally:
                kernels.GPU_MIN_WORK = old
            t_seg, o_seg = _gpu_ms(partial(fused, *on_gpu, segmented=True), args.repeat)
            t_ent, o_ent = _gpu_ms(partial(fused, *on_gpu, segmented=False), args.repeat)
            eq = "/".join(str(_same(o.cpu(), want)) for o in (o_torch, o_seg, o_ent))
            print(f"| {atoms} | {rows} | {t_torch:.2f} | {t_seg:.2f} | {t_ent:.2f} | {eq} |", flush=True)


def type_table(args: argparse.Namespace) -> None:
    from pipeline.engine import search_batch
    from pipeline.formats.engine_index import load_engine_index
    from pipeline.formats.queryset import read_query_set

    gpu = args.device == "cuda"
    adj, _ = load_engine_index(args.adjacency, device=args.device)
    kernels.settle()
    qs = read_query_set(args.queries)
    queries, types = qs.queries(), qs.frame["type"].tolist()
    clock = time.perf_counter if gpu else time.process_time
    where = f"wall-clock on {torch.cuda.get_device_name()}" if gpu else f"CPU time of {args.threads} thread(s)"
    print(f"\nPer type, {args.passes} passes after a first one, {where}, q/s\n")
    print("| type | queries | torch form | compiled |")
    print("|---|---:|---|---|")
    for qtype in ints_or_names(args.types):
        batch = [q for q, t in zip(queries, types, strict=True) if t == qtype]
        if not batch:
            continue
        got = {}
        for form in ("torch", "auto"):
            os.environ["PIPELINE_KERNELS"] = form
            with torch.no_grad():
                search_batch(batch, adj)  # the first pass: the pairs this type reads, mapped
                rates = []
                for _ in range(args.passes):
                    t = clock()
                    search_batch(batch, adj)
                    if gpu:
                        torch.cuda.synchronize()
                    rates.append(len(batch) / max(clock() - t, 1e-9))
            got[form] = "-".join(f"{r:,.0f}" for r in (min(rates), max(rates)))
        print(f"| {qtype} | {len(batch)} | {got['torch']} | {got['auto']} |")


def ints_or_names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entities", type=int, default=15_000)
    ap.add_argument("--entries", type=int, default=3_000_000)
    ap.add_argument("--rows", default="1,2,4,8,36")
    ap.add_argument("--atoms", default="1,2,3")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--queries", default=None)
    ap.add_argument("--adjacency", default=None)
    ap.add_argument("--types", default="2m,im,2p,ip,inp,up")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if not kernels.load():
        sys.exit("numba cannot be imported or cannot compile here: nothing to compare")
    if args.device == "cuda":
        if not kernels.load_gpu():
            sys.exit("no CUDA GPU, or triton cannot be imported or cannot compile here: nothing to compare")
        gpu_step_table(args)
    else:
        step_table(args)
    if args.queries and args.adjacency:
        type_table(args)


if __name__ == "__main__":
    main()
