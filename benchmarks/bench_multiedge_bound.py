"""How fast can the multi-edge types (2m, im) go on a model's export?

    PIPELINE_DATA=../shared/data python benchmarks/bench_multiedge_bound.py QUERIES --adjacency EXPORT_DIR \
        [--pairs 4] [--threads 1]

1. The bound. A 2m/im query whose atoms are at alpha 0 steps from a state that is finite on every entity
   through the sum of two relations; without anything precomputed per relation pair, an exact step must
   read both relations' facts (src, dst, conf: 12 bytes a fact). Per such query of QUERIES: those bytes
   over the read bandwidth measured in the same run, and the queries/s that this allows.
2. The per-pair work the engine does instead (`adjacency.shared_keys`: the entries two relations share),
   against a byte table over all (o, s) keys (torch index_fill_/index_select), on the --pairs largest
   relation pairs of the query set; both must give the same positions (checked).
3. Where numba is installed: the same merge as the engine's compiled two-pointer loop
   (kernels.shared_two; column 2 times the numpy merge, PIPELINE_KERNELS=torch), and one fused dense step over a relation pair written two ways (merge each row's two fact lists;
   or a sparse accumulator, no merge), against the bound; the first calls (the compilation) timed apart.

Prints markdown tables and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's bandwidth probe

from bench_engine import read_bandwidth  # noqa: E402

from pipeline.engine import Adjacency  # noqa: E402
from pipeline.engine import kernels as engine_kernels  # noqa: E402
from pipeline.engine.adjacency import shared_keys  # noqa: E402
from pipeline.formats.adjacency import load_adjacency  # noqa: E402
from pipeline.formats.queryset import read_query_set  # noqa: E402
from pipeline.softquery import Query, Var  # noqa: E402

FACT_BYTES = 12  # src int32, dst int32, conf float32


def multi_edge(q: Query) -> tuple[tuple[int, ...], bool] | None:
    """The relations of a query's multi-edge (two or more atoms between the same two variables) and
    whether every atom of the query is at alpha 0 (then the step's state is finite everywhere); None
    without a multi-edge."""
    by_pair: dict[tuple, list] = {}
    for a in q.atoms:
        if isinstance(a.head, Var) and isinstance(a.tail, Var):
            by_pair.setdefault(frozenset((a.head, a.tail)), []).append(a)
    for atoms in by_pair.values():
        if len(atoms) >= 2:
            return tuple(int(a.relation) for a in atoms), all(a.alpha <= 0 for a in q.atoms)
    return None


def byte_table_shared(table: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    """shared_keys' positions (in a, in b) through a boolean table over every key (left all False)."""
    a, b = a.long(), b.long()
    table.index_fill_(0, a, True)
    in_a = table.index_select(0, b)
    table.index_fill_(0, a, False)
    table.index_fill_(0, b, True)
    in_b = table.index_select(0, a)
    table.index_fill_(0, b, False)
    return [torch.nonzero(in_b, as_tuple=True)[0], torch.nonzero(in_a, as_tuple=True)[0]]


def best_of(fn, repeat: int = 3) -> tuple[object, float]:
    best, got = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        got = fn()
        best = min(best, time.perf_counter() - t)
    return got, best


def numba_kernels():
    """(fused, spa) compiled with numba, or None where numba is not installed (the merge is the engine's
    own compiled one, pipeline.engine.kernels.shared_two)."""
    try:
        from numba import njit
    except ImportError:
        return None

    @njit(nogil=True)
    def fused(state, base_a, base_b, ptr, dst, conf, n, beta_a, beta_b, out):  # one dense alpha-0 step
        zero = np.float32(0.0)
        for s in range(n):
            x = state[s]
            i, ie = ptr[base_a + s], ptr[base_a + s + 1]
            j, je = ptr[base_b + s], ptr[base_b + s + 1]
            while i < ie or j < je:
                if j >= je or (i < ie and dst[i] < dst[j]):
                    o, v = dst[i], (x + beta_a * conf[i]) + beta_b * zero
                    i += 1
                elif i >= ie or dst[j] < dst[i]:
                    o, v = dst[j], (x + beta_a * zero) + beta_b * conf[j]
                    j += 1
                else:
                    o, v = dst[i], (x + beta_a * conf[i]) + beta_b * conf[j]
                    i += 1
                    j += 1
                if v > out[o]:
                    out[o] = v

    @njit(nogil=True)
    def spa(state, base_a, base_b, ptr, dst, conf, n, beta_a, beta_b, out, acc):  # the same step, no merge
        # a sparse accumulator: row s of relation a is spread into acc (n zeros, left zero), so relation
        # b's facts read a's confidence at the same (s, o) directly (0 where a has none); a's own entries
        # are counted alone too, which changes no maximum for betas >= 0 (maxplus._split_multi_edges)
        for s in range(n):
            x = state[s]
            i0, i1 = ptr[base_a + s], ptr[base_a + s + 1]
            for i in range(i0, i1):
                acc[dst[i]] = conf[i]
                out[dst[i]] = max(out[dst[i]], x + beta_a * conf[i])
            for j in range(ptr[base_b + s], ptr[base_b + s + 1]):
                out[dst[j]] = max(out[dst[j]], (x + beta_a * acc[dst[j]]) + beta_b * conf[j])
            for i in range(i0, i1):
                acc[dst[i]] = 0.0

    return fused, spa


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("queries", type=Path)
    ap.add_argument("--adjacency", type=Path, required=True)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    graph = load_adjacency(args.adjacency)[0]
    adj = Adjacency.from_graph(graph)
    n = adj.n_entities
    fwd = adj.oriented(True)
    counts = (fwd.ptr[n :: n] - fwd.ptr[: -1 : n]).tolist()  # facts per relation
    bw = statistics.median(read_bandwidth() for _ in range(3))

    qs = read_query_set(args.queries)
    rows, pairs = [], {}
    for q, t in zip(qs.queries(), qs.frame.type, strict=True):
        got = multi_edge(q) if t in ("2m", "im") else None
        if got is None:
            continue
        rels, dense = got
        facts = sum(counts[r] for r in rels)
        rows.append({"type": t, "dense": dense, "facts": facts})
        if len(rels) == 2:
            pairs[tuple(sorted(rels))] = facts
    print(f"read bandwidth {bw / 1e9:.1f} GB/s; {len(rows)} multi-edge queries, {len(pairs)} relation pairs\n")
    print("| type | queries | alpha 0 (dense step) | facts per dense step (median) | bound ms/query | bound q/s |")
    print("|---|---:|---:|---:|---:|---:|")
    summary = {"bandwidth_gbs": bw / 1e9, "types": {}}
    for t in ("2m", "im"):
        mine = [r for r in rows if r["type"] == t]
        dense = [r["facts"] for r in mine if r["dense"]]
        if not mine:
            continue
        # the bound of a query set: only the dense steps must read their pair (the others touch few rows)
        ms = sum(f * FACT_BYTES / bw for f in dense) / len(mine) * 1e3
        med = int(statistics.median(dense)) if dense else 0
        qps = f"{1e3 / ms:,.0f}" if ms else "-"  # no dense step: nothing bounds the set
        print(f"| {t} | {len(mine)} | {len(dense)} | {med:,} | {ms:.2f} | {qps} |")
        summary["types"][t] = {"queries": len(mine), "dense": len(dense), "median_facts": med, "bound_ms": ms}

    kernels = numba_kernels()
    if kernels is not None:
        t0 = time.perf_counter()
        tiny = np.arange(4, dtype=np.int32)
        engine_kernels.load()
        engine_kernels.shared_two(torch.from_numpy(tiny), torch.from_numpy(tiny))
        one = np.zeros(1, np.float32)  # a one-entity step, the kernels' argument types
        tiny_step = (one, 0, 0, np.zeros(2, np.int64), tiny, np.zeros(4, np.float32), 1, np.float32(1), np.float32(1))
        kernels[0](*tiny_step, one.copy())
        kernels[1](*tiny_step, one.copy(), one.copy())
        print(f"\nnumba: compiling the kernels took {time.perf_counter() - t0:.2f} s")
    table = torch.zeros(n * n, dtype=torch.bool) if n * n <= 1 << 32 else None
    head = "| pair | facts | shared | shared_keys ms | byte table ms | numba merge ms | numba step: merge ms | numba step: accumulator ms | bound ms |"
    print("\n" + head + "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary["pairs"] = []
    state = torch.rand(n, generator=torch.Generator().manual_seed(0)).numpy()
    for (ra, rb), facts in sorted(pairs.items(), key=lambda kv: -kv[1])[: args.pairs]:
        ka, kb = (adj._column_keys(True, r)[0] for r in (ra, rb))
        os.environ["PIPELINE_KERNELS"] = "torch"  # the numpy merge, whatever is loaded
        (shared, where), t_merge = best_of(lambda ka=ka, kb=kb: shared_keys([ka, kb]))
        os.environ["PIPELINE_KERNELS"] = "auto"
        t_table = t_nb = t_fused = t_spa = float("nan")
        if table is not None:
            got, t_table = best_of(lambda ka=ka, kb=kb: byte_table_shared(table, ka, kb))
            assert all(torch.equal(x, y) for x, y in zip(got, where, strict=True)), "byte table differs"
        if kernels is not None:
            (_, pa, pb), t_nb = best_of(lambda ka=ka, kb=kb: engine_kernels.shared_two(ka, kb))
            assert torch.equal(pa, where[0]) and torch.equal(pb, where[1])
            out, out2, acc = np.full(n, -np.inf, np.float32), np.full(n, -np.inf, np.float32), np.zeros(n, np.float32)
            step = (state, ra * n, rb * n, fwd.ptr.numpy(), fwd.dst.numpy(), fwd.conf.numpy(), n)
            step += (np.float32(0.7), np.float32(0.4))
            _, t_fused = best_of(lambda a=(*step, out): kernels[0](*a))
            _, t_spa = best_of(lambda a=(*step, out2, acc): kernels[1](*a))
            assert np.array_equal(out, out2), "the two fused steps differ"
        bound = facts * FACT_BYTES / bw
        print(
            f"| {ra}, {rb} | {facts:,} | {shared.numel():,} | {t_merge * 1e3:.1f} | {t_table * 1e3:.1f} | "
            f"{t_nb * 1e3:.1f} | {t_fused * 1e3:.1f} | {t_spa * 1e3:.1f} | {bound * 1e3:.1f} |"
        )
        summary["pairs"].append(
            {"pair": [ra, rb], "facts": facts, "shared": shared.numel(), "shared_keys_s": t_merge,
             "byte_table_s": t_table, "numba_merge_s": t_nb, "numba_fused_s": t_fused, "numba_accumulator_s": t_spa, "bound_s": bound}
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
