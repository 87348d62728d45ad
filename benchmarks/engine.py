"""The SRC engine on the observed graphs: queries/s per type, one max-plus step against the read
bandwidth, the memory of the KG tensors."""

from __future__ import annotations

import multiprocessing
import time

import numpy as np

from benchmarks.harness import Goal, Result, Table, benchmark, progress
from benchmarks.queries import random_queries

TYPES = ("1p", "2p", "2i", "2in", "2il", "2m", "2u", "3in", "ip", "im", "inp", "up")
# the goal per data set: the slowest type at batch 256
FLOOR = {"ppi5k": 1000, "cn15k": 200}


def throughput(queries, warmup, adj, batch: int, budget_s: float = 3.0) -> float:
    """Queries per second evaluating ``queries`` in batches of ``batch`` (stops early after ``budget_s``). The
    warm-up runs other queries, so the engine's memo of derived arrays is only as warm as in real use."""
    from pipeline.engine import search_batch

    search_batch(warmup, adj)
    done, start = 0, time.perf_counter()
    for i in range(0, len(queries), batch):
        search_batch(queries[i : i + batch], adj)
        done += len(queries[i : i + batch])
        if time.perf_counter() - start > budget_s:
            break
    return done / (time.perf_counter() - start)


def read_bandwidth(nbytes: int = 1 << 28) -> float:
    """Read bandwidth in bytes/s: summing a large int64 array (best of 5)."""
    import torch

    x = torch.ones(nbytes // 8, dtype=torch.int64)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    return nbytes / best


def step_vs_bandwidth(kg, adj, bw: float, batch: int = 256) -> dict:
    """One max-plus step with a dense state (every row read: the worst case) on the largest relation, best
    of 7, against (bytes of the stored facts touched) / bandwidth."""
    import torch

    from pipeline.core.kg import observed_graph
    from pipeline.engine.atoms import AtomParams, RelationMatrix
    from pipeline.engine.maxplus import maxplus

    g = observed_graph(kg, "test")
    counts = torch.bincount(g.rel, minlength=kg.n_relations)
    r = int(counts.argmax())
    params = AtomParams(
        torch.full((batch,), r), torch.zeros(batch), torch.ones(batch), torch.zeros(batch, dtype=torch.bool)
    )
    m = RelationMatrix(adj, params, from_head=True)
    state = torch.rand(batch, kg.n_entities)
    maxplus(state, m)
    times = []
    for _ in range(7):
        t = time.perf_counter()
        maxplus(state, m)
        times.append(time.perf_counter() - t)
    # per query: each stored fact's dst (8 B) and conf (4 B), plus the state read and the output written
    touched = batch * (int(counts[r]) * 12 + kg.n_entities * 4 * 2)
    return {"facts": int(counts[r]), "step_ms": 1e3 * min(times), "bound_ms": 1e3 * touched / bw}


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def tensor_peak_kib(name: str) -> int:
    """Peak RSS growth (KiB) while building the test graph's tensors and engine index (Linux: the
    high-water mark is reset first, so the loader's own peak does not hide it). Run in a fresh process."""
    from loaders import load
    from pipeline.core.kg import observed_graph
    from pipeline.engine import Adjacency

    kg = load(name)
    kg.graph("test")  # the loader's merged table exists before the measurement
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM
    rss0 = _status_kib("VmRSS")
    adj = Adjacency.from_graph(observed_graph(kg, "test"))
    peak = _status_kib("VmHWM") - rss0
    del adj
    return peak


@benchmark(
    "engine",
    title="The SRC engine on the observed graphs",
    goals=[
        Goal("ppi5k_slowest", "PPI5k: the slowest type at batch 256", ">=", 1000, "q/s"),
        Goal("cn15k_slowest", "CN15k: the slowest type at batch 256", ">=", 200, "q/s"),
        Goal(
            "step_ratio",
            "one max-plus step against the read-bandwidth bound (the worse data set)",
            "<=",
            3,
            "x",
        ),
    ],
    quick={"datasets": ("ppi5k",), "n": 32, "types": ("1p", "2p", "2m")},
)
def engine(
    *,
    datasets: tuple[str, ...] = ("ppi5k", "cn15k"),
    n: int = 256,
    types: tuple[str, ...] = TYPES,
    seed: int = 0,
    threads: int = 1,
) -> Result:
    """Queries/s per type at batch 1 and batch ``n`` over each data set's observed test graph (queries as
    ``benchmarks/queries.py`` draws them: hybrid alpha, random beta; ``--threads`` torch threads, 1 by
    default: on a shared machine extra threads spin and distort timings); one max-plus step with a dense
    state on the largest relation against the bound (the bytes it must read / the measured read
    bandwidth); the memory of the KG tensors and the engine's index, and the peak while building them (in a
    fresh process). Needs PIPELINE_DATA."""
    import torch

    from loaders import load
    from pipeline.core.kg import observed_graph
    from pipeline.engine import Adjacency

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    bw = read_bandwidth()
    qps_cols, per_set, measured = {}, [], {}
    ratios = []
    for name in datasets:
        with multiprocessing.get_context("spawn").Pool(1) as pool:  # a fresh process: its own peak
            peak = pool.apply(tensor_peak_kib, (name,))
        kg = load(name)
        t = time.perf_counter()
        g = observed_graph(kg, "test")
        adj = Adjacency.from_graph(g)
        build = time.perf_counter() - t
        rng = np.random.default_rng(seed)
        col = {}
        with progress(len(types), f"engine {name}", "type") as bar:
            for qt in types:
                qs = random_queries(kg, qt, n + 64, rng)
                warm, qs = qs[:64], qs[64:]
                col[qt] = (throughput(qs[:64], warm[:1], adj, 1, budget_s=2.0), throughput(qs, warm, adj, n))
                bar.update(1)
        qps_cols[name] = col
        s = step_vs_bandwidth(kg, adj, bw)
        ratios.append(s["step_ms"] / s["bound_ms"])
        per_set.append(
            [
                name,
                g.nnz,
                kg.n_entities,
                g.nbytes() / 2**20,
                adj.nbytes() / 2**20,
                build,
                peak / 1024,
                4 * kg.n_entities**2 / 2**20,
                s["facts"],
                s["step_ms"],
                s["bound_ms"],
                ratios[-1],
            ]
        )
        if name in FLOOR and set(types) == set(TYPES):
            measured[f"{name}_slowest"] = min(b for _, b in col.values())
    cols = ["type"] + [f"{name} batch {b}" for name in datasets for b in (1, n)]
    rows = [[qt] + [v for name in datasets for v in qps_cols[name][qt]] for qt in types]
    measured["step_ratio"] = max(ratios)
    return Result(
        [
            Table(cols, rows, title="Queries/s per type"),
            Table(
                [
                    "data set",
                    "test facts",
                    "entities",
                    "facts MiB",
                    "engine index MiB",
                    "index built s",
                    "peak growth while building MiB",
                    "one dense relation MiB",
                    "step: relation facts",
                    "step ms",
                    "bound ms",
                    "step / bound",
                ],
                per_set,
                title="The KG tensors and one max-plus step (batch 256)",
            ),
        ],
        measured,
        [f"Read bandwidth measured: {bw / 1e9:.1f} GB/s."],
    )
