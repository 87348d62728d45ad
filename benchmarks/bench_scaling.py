"""How the pipeline's cost grows with the graph: synthetic KGs of N entities, each stage in its own process.

    PIPELINE_HOME=/tmp/scale-home PIPELINE_DATA=../shared/data nice -n 10 python benchmarks/bench_scaling.py \
        --sizes 1000 3000 10000 --relations 10 --facts-per-entity 10 --threads 1 --json docs/scaling.json

For each N: `synth` (generate + `ingest --from` into the embedded store), `train` (ONE epoch of ukge_logi,
default dim), `export` at --threshold and again with --top-k, `sample` (100 queries per type, all 12 types,
train split so no usefulness filter), `answer` (SRC, no calibration) on each export. Every stage runs in a
child process (so peak RSS is the stage's own, from wait4) and prints one JSON line; the parent prints a
table (seconds, peak RSS MB, export MB and facts) and fits growth exponents log(cost) ~ a log N.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MODEL = "ukge_logi"


def stage(args: argparse.Namespace) -> dict:
    """Run one stage in this process; return its own measurements."""
    import torch

    torch.set_num_threads(args.threads)
    name = f"scale{args.n}"
    home = Path(os.environ["PIPELINE_HOME"])
    run_dir = home / "runs" / f"{name}-{MODEL}"
    work = home / "scale" / name
    if args.stage == "synth":
        from pipeline.stages.options import IngestOptions
        from pipeline.stages.synth import synth_dataset

        rep = synth_dataset(name, args.n, args.relations, args.facts_per_entity * args.n, like=args.like,
                            options=IngestOptions(seed=args.seed, progress=False))
        return {"facts": sum(rep["rows"].values()), "store_seconds": rep["store_report"].get("seconds")}
    if args.stage == "train":
        from loaders import load
        from pipeline.models import default_config, train

        cfg = default_config(name, MODEL, epochs=1, seed=args.seed, select_on="last")
        res = train(load(name), cfg, run_dir, progress=False)
        return {"epoch_seconds": res["seconds_per_epoch"]}
    if args.stage.startswith("export"):
        from pipeline.stages.export import export_adjacency

        k = args.top_k if args.stage == "export_topk" else None
        thr = args.topk_threshold if k else args.threshold
        man = export_adjacency(run_dir, threshold=thr, out=work / args.stage, progress=False, top_k=k, allow_dense=True)
        return {"nnz": man["nnz"], "bytes": man["bytes"], "export_seconds": man["seconds"],
                "scores": man["n_entities"] ** 2 * man["n_relations"]}
    if args.stage == "sample":
        from loaders import load
        from pipeline.sampling.sampler import SamplingError
        from pipeline.softquery.types import QUERY_TYPES
        from pipeline.stages.options import SampleOptions
        from pipeline.stages.sample import sample_to_dir
        from pipeline.store import open_store

        types, skipped = list(QUERY_TYPES), []
        kg = load(name)
        with open_store(None) as store:
            while True:
                try:
                    res = sample_to_dir(kg, store, SampleOptions(out=work / "queries", split="train", types=types, per_type=args.per_type, seed=args.seed, browse=False, progress=False))
                    break
                except SamplingError as exc:
                    # a sparse graph offers too few walks of some shapes (im, 2m need multi-edges): drop the
                    # type named in the error and say so, rather than lose the whole size
                    m = re.search(r"query type (\w+):", str(exc))
                    if not m or m[1] not in types:
                        raise
                    types.remove(m[1])
                    skipped.append(m[1])
        return {"queries": res["queries"], "file": res["file"], "types_skipped": skipped}
    if args.stage.startswith("answer"):
        from pipeline.methods import MethodOptions
        from pipeline.stages.answer import AnswerOptions, answer_queries

        exp = work / ("export_topk" if args.stage == "answer_topk" else "export")
        qfile = next((work / "queries").glob("*.parquet"))
        method = MethodOptions(adjacency=exp, device="cpu", seed=args.seed)
        rep = answer_queries(qfile, method, AnswerOptions(out=work / args.stage, progress=False))
        return {"answer_seconds": rep["seconds"]}
    raise SystemExit(f"unknown stage {args.stage}")


STAGES = ["synth", "train", "export", "export_topk", "sample", "answer", "answer_topk"]


def run_stage(argv: list[str], name: str, n: int) -> dict:
    cmd = [sys.executable, __file__, "--stage", name, "--n", str(n), *argv]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"stage": name, "n": n, "error": err.strip().splitlines()[-1] if err.strip() else "failed"}
    doc = json.loads(out.strip().splitlines()[-1])
    return {"stage": name, "n": n, "wall_s": wall, "peak_rss_mb": doc.pop("peak_rss_mb"), **doc}


def fit(xs: list[float], ys: list[float]) -> float | None:
    """Growth exponent a of y ~ x**a (least squares in log-log), None with fewer than 2 points."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y and y > 0]
    if len(pts) < 2:
        return None
    lx, ly = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(lx, ly, 1)[0])


# the stage's own cost, without interpreter start-up and imports (which dominate at small N)
CORE = {"synth": "seconds", "train": "epoch_seconds", "export": "export_seconds",
        "export_topk": "export_seconds", "sample": "seconds", "answer": "answer_seconds",
        "answer_topk": "answer_seconds"}


def print_table(rows: list[dict], sizes: list[int]) -> None:
    """Markdown: per stage and N, core seconds / peak RSS MB (and export MB), then the fitted exponents."""
    sizes = [n for n in sizes if any(r["n"] == n for r in rows)]
    print("| stage | " + " | ".join(f"N={n:,}" for n in sizes) + " | exponent time | exponent RSS |")
    print("|---" * (len(sizes) + 3) + "|")
    for name in CORE:
        got = {r["n"]: r for r in rows if r["stage"] == name and "error" not in r}
        if not got:
            continue
        cells = []
        for n in sizes:
            r = got.get(n)
            extra = f", {r['bytes'] / 1e6:.1f} MB / {r['nnz']:,} facts" if r and "bytes" in r else ""
            cells.append(f"{r[CORE[name]]:.2f} s / {r['peak_rss_mb']:.0f} MB{extra}" if r else "-")
        ns = sorted(got)
        a_t = fit(ns, [got[n][CORE[name]] for n in ns])
        a_m = fit(ns, [got[n]["peak_rss_mb"] for n in ns])
        print(f"| {name} | " + " | ".join(cells) + f" | {a_t if a_t is None else round(a_t, 2)} | "
              f"{a_m if a_m is None else round(a_m, 2)} |")
    failed = [r for r in rows if "error" in r]
    for r in failed:
        print(f"\nN={r['n']} {r['stage']}: {r['error']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", type=int, default=[1000, 3000, 10000])
    ap.add_argument("--relations", type=int, default=10)
    ap.add_argument("--facts-per-entity", type=int, default=10)
    ap.add_argument("--like", default="ppi5k")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--topk-threshold", type=float, default=0.1, help="threshold of the top-k export")
    ap.add_argument("--per-type", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stages", nargs="+", default=STAGES)
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--table", type=Path, nargs="+", default=None,
                    help="only print the table of saved --json files (a later file's row replaces an earlier one)")
    ap.add_argument("--stage", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stage:  # child: one stage, one JSON line
        import resource

        t0 = time.perf_counter()
        doc = stage(args)
        doc["seconds"] = time.perf_counter() - t0  # the stage without interpreter start-up
        doc["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(doc))
        return 0
    if args.table:
        merged: dict[tuple[str, int], dict] = {}
        for f in args.table:
            for r in json.loads(f.read_text()):
                if "error" not in r or (r["stage"], r["n"]) not in merged:
                    merged[r["stage"], r["n"]] = r
        rows = list(merged.values())
        print_table(rows, sorted({r["n"] for r in rows}))
        return 0
    passthrough = ["--relations", str(args.relations), "--facts-per-entity", str(args.facts_per_entity),
                   "--like", args.like, "--threshold", str(args.threshold), "--top-k", str(args.top_k), "--topk-threshold", str(args.topk_threshold),
                   "--per-type", str(args.per_type), "--threads", str(args.threads), "--seed", str(args.seed)]
    rows = []
    for n in args.sizes:
        for name in args.stages:
            row = run_stage(passthrough, name, n)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if "error" in row:
                break
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print_table(rows, args.sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
