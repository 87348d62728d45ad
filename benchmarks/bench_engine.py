"""Engine benchmarks: queries/s per query type at batch sizes 1 and 256, one max-plus step
against the memory-bandwidth bound, and the memory of the KG tensors.

    PIPELINE_DATA=../shared/data python benchmarks/bench_engine.py [--datasets ppi5k,cn15k] [--n 256] [--seed 0]

Queries: each type of pipeline.softquery.types, relations and anchors drawn from the test graph's facts,
hybrid alpha (per atom a random level among zero/low/normal/high, the relation's 0/25/50/75th
percentile), random beta (U(0.1, 1) rounded to 0.1). Prints markdown tables.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import time

import numpy as np
import torch

from loaders import load
from pipeline.core.kg import observed_graph
from pipeline.engine import Adjacency, search_batch
from pipeline.engine.atoms import AtomParams, RelationMatrix
from pipeline.engine.maxplus import maxplus
from pipeline.softquery import QUERY_TYPES, Query


def random_queries(kg, name: str, count: int, rng: np.random.Generator) -> list[Query]:
    """count queries of one type: anchors are heads of random facts of the atom's relation."""
    facts = kg.graph("test")
    h, r, c = facts["h"].to_numpy(), facts["r"].to_numpy(), facts["conf"].to_numpy()
    rels = np.unique(r)
    levels = {x: [0.0, *np.percentile(c[r == x], [25, 50, 75])] for x in rels}
    qt = QUERY_TYPES[name]
    out = []
    for _ in range(count):
        rr = rng.choice(rels, size=qt.n_atoms)
        anchors = []
        for a, rel in zip(
            qt.template.atoms, rr, strict=True
        ):  # anchors of the template appear in order e1, e2, ...
            if a.variables() != (a.head, a.tail) and len(anchors) < qt.n_anchors:
                idx = np.nonzero(r == rel)[0]
                anchors.append(int(h[rng.choice(idx)]))
        alphas = [float(levels[x][rng.integers(4)]) for x in rr]
        betas = [round(float(rng.uniform(0.1, 1.0)), 1) for _ in rr]
        out.append(qt.build(rr.tolist(), anchors, alphas, betas))
    return out


def throughput(
    queries: list[Query], warmup: list[Query], adj: Adjacency, batch: int, budget_s: float = 3.0
) -> float:
    """Queries per second evaluating `queries` in batches of `batch` (stops early after budget_s). The
    warm-up runs other queries, so the engine's memo of derived arrays is only as warm as in real use."""
    search_batch(warmup, adj)
    done, start = 0, time.perf_counter()
    for i in range(0, len(queries), batch):
        search_batch(queries[i : i + batch], adj)
        done += len(queries[i : i + batch])
        if time.perf_counter() - start > budget_s:
            break
    return done / (time.perf_counter() - start)


def read_bandwidth(nbytes: int = 1 << 28) -> float:
    """Measured read bandwidth in bytes/s: summing a large int64 array (best of 5)."""
    x = torch.ones(nbytes // 8, dtype=torch.int64)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    return nbytes / best


def step_vs_bandwidth(kg, adj: Adjacency, bw: float, batch: int = 256) -> dict:
    """Time of one max-plus step with a dense state (every row read, the worst case) on the largest
    relation, against (bytes of the stored facts touched) / bandwidth."""
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
    for _ in range(7):  # best of 7: the machine is shared
        t = time.perf_counter()
        maxplus(state, m)
        times.append(time.perf_counter() - t)
    # per query: each stored fact's dst (8 B) and conf (4 B), plus the state read and the output written
    touched = batch * (int(counts[r]) * 12 + kg.n_entities * 4 * 2)
    bound = touched / bw
    return {
        "relation": kg.relation_names()[r],
        "facts": int(counts[r]),
        "batch": batch,
        "step_ms": 1e3 * min(times),
        "bound_ms": 1e3 * bound,
        "ratio": min(times) / bound,
    }


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def tensor_peak_kib(name: str) -> int:
    """Peak RSS growth (KiB) while building the test graph's tensors and engine index (Linux: the
    high-water mark is reset first, so the loader's own parsing peak does not hide it)."""
    kg = load(name)
    kg.graph("test")  # the loader's merged table exists before the measurement
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM
    rss0 = _status_kib("VmRSS")
    adj = Adjacency.from_graph(observed_graph(kg, "test"))
    peak = _status_kib("VmHWM") - rss0
    del adj
    return peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="ppi5k,cn15k")
    ap.add_argument("--n", type=int, default=256, help="queries per type")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--types", default=",".join(QUERY_TYPES))
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: on a shared machine extra threads spin and distort timings)",
    )
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    print(
        f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, device cpu"
    )
    bw = read_bandwidth()
    print(f"read bandwidth: {bw / 1e9:.1f} GB/s\n")
    for name in args.datasets.split(","):
        with multiprocessing.get_context("spawn").Pool(1) as pool:  # a fresh process: its own peak
            peak = pool.apply(tensor_peak_kib, (name,))
        kg = load(name)
        t = time.perf_counter()
        g = observed_graph(kg, "test")
        adj = Adjacency.from_graph(g)
        build = time.perf_counter() - t
        print(f"## {name} (test graph: {g.nnz:,} facts, {kg.n_entities:,} entities)\n")
        print(
            f"KG tensors: GraphTensors {g.nbytes() / 2**20:.1f} MiB, engine index (both orientations) "
            f"{adj.nbytes() / 2**20:.1f} MiB, built in {build:.2f} s; peak RSS growth while building "
            f"{peak / 1024:.1f} MiB (a dense float32 |E| x |E| matrix would be {4 * kg.n_entities**2 / 2**20:,.0f} MiB "
            "per relation)\n"
        )
        rng = np.random.default_rng(args.seed)
        print("| type | q/s batch 1 | q/s batch 256 |\n|---|---:|---:|")
        for qt in args.types.split(","):
            qs = random_queries(kg, qt, args.n + 64, rng)
            warm, qs = qs[:64], qs[64:]
            q1 = throughput(qs[:64], warm[:1], adj, 1, budget_s=2.0)
            q256 = throughput(qs, warm, adj, 256)
            print(f"| {qt} | {q1:,.0f} | {q256:,.0f} |", flush=True)
        s = step_vs_bandwidth(kg, adj, bw)
        print(
            f"\none max-plus step ({s['relation']}, {s['facts']:,} facts, batch {s['batch']}, dense state): "
            f"{s['step_ms']:.1f} ms vs bandwidth bound {s['bound_ms']:.1f} ms -> ratio {s['ratio']:.1f}x\n"
        )


if __name__ == "__main__":
    main()
