"""SRC on a model's export: queries/s per type before/after, the max-plus step against the
memory bound, one calibration-L batch, peak RSS; and the exactness check of the fast engine.

    PIPELINE_DATA=../shared/data python benchmarks/bench_exports.py QUERIES --adjacency EXPORT_DIR \
        [--engines before,after] [--variants none,D,L,D+L] [--delta 0.1] [--repeat 2] [--threads 1] \
        [--l-train TRAIN_QUERIES [--l-paths N]] [--check N] [--seed 0] [--device cpu|cuda]

"before" is the frozen engine of tests/engine/reference (commit e09fd49), "after" is pipeline.engine,
"unsplit" is pipeline.engine with multi-edges through the union of supports (maxplus._SPLIT_MULTI_EDGES
off: the engine before round 4); runs alternate between engines per variant so all see the same load.
--check-base unsplit: --check compares after with unsplit on one index (the frozen one needs ~8 GB on CN15k). Variants: none; D (every alpha
lowered by --delta); L and D+L with an affine calibration L of seeded random weights (std 0.05): its
cost is that of a trained one (same facts, same index), and no training is needed to time it. The time
counted is the engine's evaluation of each type's batches of 256 (as `pipeline answer` runs it), each
run on a fresh index (nothing memoised), after one untimed pass per engine on a throwaway index (the
process's first calls: lazy initialisation, the allocator's first pages).
--check N: also evaluate N random queries per type (hybrid alpha, random beta, relations and anchors
drawn from the export) with both engines and print the largest difference per variant (0 = bit-for-bit).
--l-train: time one calibration-L batch (64 alpha-0 train queries: calibrated index, forward, backward).
--l-paths N (with --l-train): N alternating L steps of the current engine, the batch's relations calibrated
with autograd over every fact (calibrated_adjacency) vs training_adjacency; seconds per phase, the two
losses and the largest difference of the gradients of L's parameters.
Prints markdown tables and a JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.engine.reference: the "before" engine
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's bandwidth probe

from bench_engine import read_bandwidth  # noqa: E402

from pipeline.formats.adjacency import load_adjacency  # noqa: E402
from pipeline.formats.queryset import read_query_set  # noqa: E402
from pipeline.methods.src.affine import (  # noqa: E402
    AffineCalibration,
    ConfBuffers,
    calibrated_adjacency,
    query_relations,
    training_adjacency,
)
from pipeline.methods.src.delta import lower_alphas, zero_alphas  # noqa: E402
from pipeline.softquery import QUERY_TYPES, Query  # noqa: E402
from pipeline.softquery.types import ordered_types  # noqa: E402

BATCH = 256


def engines() -> dict[str, tuple[Callable, Callable]]:
    """name -> (index builder, search_batch)."""
    import pipeline.engine as after
    import tests.engine.reference.adjacency as ref_adj
    import tests.engine.reference.evaluate as ref_eval

    def before_index(graph):  # the frozen engine indexes int64 ids, as the loader of its time gave it
        wide = {k: getattr(graph, k).long() for k in ("head", "rel", "tail")}
        return ref_adj.Adjacency.from_graph(dataclasses.replace(graph, **wide))

    def unsplit_evaluate(queries, adj):  # this engine with multi-edges through the union
        import pipeline.engine.maxplus as mp

        old, mp._SPLIT_MULTI_EDGES = mp._SPLIT_MULTI_EDGES, False
        try:
            return after.search_batch(queries, adj)
        finally:
            mp._SPLIT_MULTI_EDGES = old

    return {
        "before": (before_index, ref_eval.evaluate_batch),
        "unsplit": (after.Adjacency.from_graph, unsplit_evaluate),
        "after": (after.Adjacency.from_graph, after.search_batch),
    }


def engine_modules(name: str) -> tuple:
    """(atoms, maxplus) modules of an engine."""
    import importlib

    pkg = "tests.engine.reference" if name == "before" else "pipeline.engine"
    return importlib.import_module(f"{pkg}.atoms"), importlib.import_module(f"{pkg}.maxplus")


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so a timer reads the work's end (a no-op on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def random_l(graph, seed: int) -> tuple[AffineCalibration, tuple[torch.Tensor, ...]]:
    """An L with seeded random weights over random unit feature tables (dim 16): times like a trained L."""
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
    calib.to(graph.device)
    return calib, tables


def time_types(evaluate: Callable, adj, by_type: dict[str, list[Query]], delta: float) -> dict[str, float]:
    """queries/s per type, batches of BATCH per type."""
    out = {}
    for t, qs in by_type.items():
        batch_qs = [lower_alphas(q, delta) for q in qs]
        sync(adj.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            for i in range(0, len(batch_qs), BATCH):
                evaluate(batch_qs[i : i + BATCH], adj)
        sync(adj.device)
        out[t] = len(qs) / (time.perf_counter() - t0)
    return out


def random_queries(graph, name: str, count: int, rng: np.random.Generator) -> list[Query]:
    """count queries of one type over the export: relations with facts, anchors = heads of their facts,
    hybrid alpha (0 or the relation's 25/50/75th percentile of exported scores), random beta."""
    rel = graph.rel.cpu().numpy()
    head = graph.head.cpu().numpy()
    conf = graph.conf.cpu().numpy()
    rels = np.unique(rel)
    starts = np.searchsorted(rel, rels)
    ends = np.searchsorted(rel, rels, side="right")
    levels = {
        int(r): [0.0, *np.percentile(conf[s:e], [25, 50, 75]).round(4).tolist()]
        for r, s, e in zip(rels, starts, ends, strict=True)
    }
    span = {int(r): (int(s), int(e)) for r, s, e in zip(rels, starts, ends, strict=True)}
    qt = QUERY_TYPES[name]
    out = []
    for _ in range(count):
        rr = [int(x) for x in rng.choice(rels, size=qt.n_atoms)]
        anchors = []
        for a, r in zip(qt.template.atoms, rr, strict=True):
            if a.variables() != (a.head, a.tail) and len(anchors) < qt.n_anchors:
                s, e = span[r]
                anchors.append(int(head[rng.integers(s, e)]))
        alphas = [float(levels[r][rng.integers(4)]) for r in rr]
        betas = [round(float(rng.uniform(0.1, 1.0)), 1) for _ in rr]
        out.append(qt.build(rr, anchors, alphas, betas))
    return out


def step_vs_bound(name: str, index: Callable, graph, bw: float, batch: int = BATCH) -> dict:
    """One max-plus step, dense state, the largest exported relation, alpha 0 (every fact read)."""
    atoms, mp = engine_modules(name)
    counts = torch.bincount(graph.rel.long(), minlength=graph.n_relations)
    r = int(counts.argmax())
    adj = index(graph)
    params = atoms.AtomParams(
        *(x.to(graph.device) for x in (torch.full((batch,), r), torch.zeros(batch), torch.ones(batch))),
        torch.zeros(batch, dtype=torch.bool, device=graph.device),
    )
    m = atoms.RelationMatrix(adj, params, True)
    state = torch.rand(batch, graph.n_entities, generator=torch.Generator().manual_seed(0)).to(graph.device)
    mp.maxplus(state, m)
    times = []
    for _ in range(5):
        sync(graph.device)
        t = time.perf_counter()
        mp.maxplus(state, m)
        sync(graph.device)
        times.append(time.perf_counter() - t)
    touched = batch * (int(counts[r]) * 12 + graph.n_entities * 4 * 2)  # as benchmarks/bench_engine.py
    return {
        "relation": r,
        "facts": int(counts[r]),
        "step_ms": 1e3 * min(times),
        "bound_ms": 1e3 * touched / bw,
    }


def union_seconds(index: Callable, graph, pairs: int = 6, repeat: int = 3) -> dict:
    """Seconds to build a multi-edge's union of supports (the cost of 2m/im), for the relation pairs of
    the `pairs` largest relations taken two by two, best of `repeat` with the memo cleared each time."""
    adj = index(graph)
    top = torch.bincount(graph.rel.long(), minlength=graph.n_relations).argsort(descending=True)[:pairs].tolist()
    todo = [((True, a), (True, b)) for a, b in zip(top[::2], top[1::2], strict=False)]

    def best_of(build: Callable) -> tuple[int, float]:
        """Entries built over every pair and the best seconds of `repeat` runs, the memo cleared each time."""
        best = float("inf")
        for _ in range(repeat):
            adj._memo.clear()
            t0 = time.perf_counter()
            size = sum(build(p)[0].numel() for p in todo)
            best = min(best, time.perf_counter() - t0)
        return size, best

    size, seconds = best_of(adj._union)
    out = {"pairs": len(todo), "entries": size, "seconds": seconds}
    if hasattr(adj, "shared_facts"):  # the split path's only per-pair array: entries in both relations
        shared, seconds = best_of(adj.shared_facts)
        out.update(shared_entries=shared, shared_seconds=seconds)
    return out


def l_batch_seconds(
    name: str, index: Callable, evaluate: Callable, graph, train: list[Query], seed: int
) -> float:
    """Seconds of one L training step: calibrated index of the batch's relations, forward, backward
    (before: the calibration code of commit e09fd49 too)."""
    import importlib

    mod = "tests.engine.reference.calibration" if name == "before" else "pipeline.methods.src.affine"
    calibrated_adjacency = importlib.import_module(mod).calibrated_adjacency
    adj = index(graph)
    calib, tables = random_l(graph, seed)
    qs = [zero_alphas(q) for q in train[:64]]
    with torch.no_grad():
        truth = evaluate(qs, adj)
    t0 = time.perf_counter()
    cal = calibrated_adjacency(adj, calib, tables, query_relations(qs))
    pred = evaluate(qs, cal)
    loss = (pred - truth).pow(2).mean()
    loss.backward()
    sync(graph.device)
    return time.perf_counter() - t0


L_PATHS = {"autograd": calibrated_adjacency, "spliced": training_adjacency}


def l_paths(adj, graph, train: list[Query], seed: int, repeat: int) -> dict:
    """One L training step of the current engine with the batch's relations calibrated by autograd over
    every fact (calibrated_adjacency, the earlier code) and by training_adjacency
    (no autograd, gradients spliced in at the facts the engine reads), the latter also with ConfBuffers kept
across its steps (as fit_affine does), alternating, `repeat` times each:
    seconds per phase (index, forward, backward), the losses and the largest gradient difference."""
    from pipeline.engine import search_batch

    calib, tables = random_l(graph, seed)
    qs = [zero_alphas(q) for q in train[:64]]
    rels = query_relations(qs)
    with torch.no_grad():
        truth = search_batch(qs, adj)
    buffers = ConfBuffers(adj)  # as fit_affine keeps them across its steps
    paths = {
        **L_PATHS,
        "spliced+buffers": lambda a, c, t, r: training_adjacency(a, c, t, r, buffers),
    }
    out: dict = {k: [] for k in paths}
    grads: dict = {}
    for _ in range(repeat):
        for name, build in paths.items():
            calib.zero_grad()
            t0 = time.perf_counter()
            cal = build(adj, calib, tables, rels)
            sync(graph.device)
            t1 = time.perf_counter()
            loss = (search_batch(qs, cal) - truth).pow(2).mean()
            sync(graph.device)
            t2 = time.perf_counter()
            loss.backward()
            sync(graph.device)
            t3 = time.perf_counter()
            del cal
            out[name].append(
                {"index_s": t1 - t0, "forward_s": t2 - t1, "backward_s": t3 - t2, "total_s": t3 - t0}
            )
            grads[name] = (loss.item(), [p.grad.clone() for p in calib.parameters()])
            print(
                f"L step ({name}): index {t1 - t0:.2f} s, forward {t2 - t1:.2f} s, backward {t3 - t2:.2f} s, "
                f"total {t3 - t0:.2f} s, loss {loss.item():.8g}",
                flush=True,
            )
    (la, ga), (lb, gb), (lc, gc) = grads["autograd"], grads["spliced"], grads["spliced+buffers"]
    out["loss_autograd"], out["loss_spliced"] = la, lb
    assert lc == lb and all(torch.equal(b, c) for b, c in zip(gb, gc, strict=True)), "buffers changed a result"
    out["grad_max_abs_diff"] = max(float((a - b).abs().max()) for a, b in zip(ga, gb, strict=True))
    out["grad_max_abs"] = max(float(a.abs().max()) for a in ga)
    out["shapes"] = sorted({str(len(q.atoms)) + " atoms" for q in qs})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("queries")
    ap.add_argument("--adjacency", required=True)
    ap.add_argument("--engines", default="before,after")
    ap.add_argument("--variants", default="none,D,L,D+L")
    ap.add_argument("--types", default=None, help="comma-separated query types (default: all in the set)")
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check", type=int, default=0, help="random queries per type for the exactness check")
    ap.add_argument(
        "--check-base", default="before", help="the engine --check compares with: before (frozen) or unsplit"
    )
    ap.add_argument("--l-train", default=None, help="a train query set (alpha zero): time one L batch")
    ap.add_argument(
        "--l-paths", type=int, default=0, help="with --l-train: N alternating L steps, autograd vs spliced"
    )
    ap.add_argument("--step", action="store_true", help="time one max-plus step against the memory bound")
    ap.add_argument("--unions", action="store_true", help="time building multi-edge unions of supports")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the export and the index on that device)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    qs = read_query_set(args.queries)
    t0 = time.perf_counter()
    graph, manifest = load_adjacency(args.adjacency, dataset=qs.meta["dataset"], device=args.device)
    print(f"loaded {graph.nnz:,} facts in {time.perf_counter() - t0:.1f} s", flush=True)
    eng = {k: v for k, v in engines().items() if k in args.engines.split(",")}
    parsed = qs.queries()
    types = args.types.split(",") if args.types else ordered_types(set(qs.frame["type"]))
    by_type = {t: [parsed[i] for i in np.nonzero((qs.frame["type"] == t).to_numpy())[0]] for t in types}
    calib, tables = random_l(graph, args.seed)
    for index, evaluate in eng.values():  # untimed: the process's first calls, not an engine's cost
        time_types(evaluate, index(graph), by_type, 0.0)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for variant in args.variants.split(","):
        delta = args.delta if "D" in variant else 0.0
        for _ in range(args.repeat):
            for name, (index, evaluate) in eng.items():  # alternating before/after
                adj = index(graph)
                if "L" in variant:
                    with torch.no_grad():
                        adj = calibrated_adjacency(adj, calib, tables)
                got = time_types(evaluate, adj, by_type, delta)
                best = table.setdefault(variant, {}).setdefault(name, {})
                for t, v in got.items():
                    best[t] = max(best.get(t, 0.0), v)
                print(
                    f"{variant:4s} {name:6s} " + " ".join(f"{t}:{v:.0f}" for t, v in got.items()), flush=True
                )
                del adj

    print(
        f"\n{manifest['dataset']} export (threshold {manifest['threshold']}, {graph.nnz:,} facts), "
        f"{len(qs)} queries of {Path(args.queries).name}; {platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s); queries/s, best of {args.repeat}, batches of {BATCH}\n"
    )
    print("| variant | engine | " + " | ".join(types) + " |")
    print("|---|---|" + "---:|" * len(types))
    for variant, per in table.items():
        for name, best in per.items():
            print(f"| {variant} | {name} | " + " | ".join(f"{best.get(t, 0.0):,.0f}" for t in types) + " |")

    result: dict = {"table": table}
    if args.step:
        bw = read_bandwidth()
        for name, (index, _) in eng.items():
            s = step_vs_bound(name, index, graph, bw)
            s["ratio"] = s["step_ms"] / s["bound_ms"]
            result[f"step_{name}"] = s
            print(
                f"\nmax-plus step ({name}): relation #{s['relation']} ({s['facts']:,} facts), batch {BATCH}, "
                f"dense state: {s['step_ms']:.1f} ms vs bound {s['bound_ms']:.1f} ms ({bw / 1e9:.1f} GB/s) "
                f"-> {s['ratio']:.2f}x"
            )
    if args.unions:
        for _ in range(2):  # alternating
            for name, (index, _) in eng.items():
                u = union_seconds(index, graph)
                result.setdefault(f"union_s_{name}", []).append(u["seconds"])
                print(
                    f"\nunion of supports ({name}): {u['pairs']} relation pairs, {u['entries']:,} entries in "
                    f"{u['seconds'] * 1e3:.0f} ms"
                )
                if "shared_seconds" in u:
                    result.setdefault(f"shared_s_{name}", []).append(u["shared_seconds"])
                    print(
                        f"shared entries ({name}): {u['shared_entries']:,} entries in "
                        f"{u['shared_seconds'] * 1e3:.0f} ms"
                    )
    if args.l_train and args.l_paths:
        train = read_query_set(args.l_train).queries()
        got = l_paths(engines()["after"][0](graph), graph, train, args.seed, args.l_paths)
        result["l_paths"] = got
        for name in (*L_PATHS, "spliced+buffers"):
            best = min(got[name], key=lambda r: r["total_s"])
            print(
                f"\ncalibration L, one batch of 64 ({name}), best of {args.l_paths}: "
                + ", ".join(f"{k} {v:.2f}" for k, v in best.items())
            )
        print(
            f"losses {got['loss_autograd']!r} / {got['loss_spliced']!r}; largest |gradient difference| "
            f"{got['grad_max_abs_diff']:.3g} (largest |gradient| {got['grad_max_abs']:.3g})"
        )
    if args.l_train and not args.l_paths:
        train = read_query_set(args.l_train).queries()
        for name, (index, evaluate) in eng.items():
            sec = l_batch_seconds(name, index, evaluate, graph, train, args.seed)
            result[f"l_batch_s_{name}"] = sec
            print(f"\ncalibration L, one batch of 64 alpha-0 train queries ({name}): {sec:.2f} s")
    if args.check:
        rng = np.random.default_rng(args.seed)
        (bi, be), (ai, ae) = engines()[args.check_base], engines()["after"]
        before = bi(graph)
        after = before if args.check_base == "unsplit" else ai(graph)  # one index serves both
        worst: dict[str, float] = {}
        for t in QUERY_TYPES:
            qq = random_queries(graph, t, args.check, rng)
            for variant in args.variants.split(","):
                delta = args.delta if "D" in variant else 0.0
                b_adj, a_adj = before, after
                if "L" in variant:
                    with torch.no_grad():
                        b_adj = calibrated_adjacency(before, calib, tables)
                        a_adj = calibrated_adjacency(after, calib, tables)
                low = [lower_alphas(q, delta) for q in qq]
                with torch.no_grad():
                    ub, ua = be(low, b_adj), ae(low, a_adj)
                same_inf = torch.equal(torch.isinf(ub), torch.isinf(ua))
                fin = torch.isfinite(ub)
                diff = float((ub[fin] - ua[fin]).abs().max()) if bool(fin.any()) else 0.0
                worst[f"{t}/{variant}"] = diff if same_inf else float("inf")
            print(
                f"check {t}: " + ", ".join(f"{v}={worst[f'{t}/{v}']:.3g}" for v in args.variants.split(",")),
                flush=True,
            )
        result["check_max_abs_diff"] = max(worst.values())
        print(
            f"\nexactness, {args.check} random queries per type: largest |before - after| = {max(worst.values()):.3g}"
        )
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS {result['peak_rss_mib']:,.0f} MiB")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
