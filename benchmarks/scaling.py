"""How the pipeline's cost grows with the graph: synthetic KGs of N entities, a process per stage."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import Goal, Result, Table, benchmark, progress, say
from benchmarks.processes import ROOT, env

MODEL = "ukge_logi"
STAGES = ("synth", "train", "export", "export_topk", "sample", "answer", "answer_topk")
# the stage's own cost, without interpreter start-up and imports (which dominate at small N)
CORE = {
    "synth": "seconds",
    "train": "epoch_seconds",
    "export": "export_seconds",
    "export_topk": "export_seconds",
    "sample": "seconds",
    "answer": "answer_seconds",
    "answer_topk": "answer_seconds",
}


def stage(o: dict[str, Any]) -> dict[str, Any]:
    """One stage of one size, in this process; its own measurements."""
    import torch

    torch.set_num_threads(o["threads"])
    name = f"scale{o['n']}"
    home = Path(os.environ["PIPELINE_HOME"])
    run_dir = home / "runs" / f"{name}-{MODEL}"
    work = home / "scale" / name
    if o["stage"] == "synth":
        from pipeline.stages.options import IngestOptions
        from pipeline.stages.synth import synth_dataset

        rep = synth_dataset(
            name,
            o["n"],
            o["relations"],
            o["facts_per_entity"] * o["n"],
            like=o["like"],
            options=IngestOptions(seed=o["seed"], progress=False),
        )
        return {"facts": sum(rep["rows"].values()), "store_seconds": rep["store_report"].get("seconds")}
    if o["stage"] == "train":
        from loaders import load
        from pipeline.models import default_config, train

        cfg = default_config(name, MODEL, epochs=1, seed=o["seed"], select_on="last")
        return {"epoch_seconds": train(load(name), cfg, run_dir, progress=False)["seconds_per_epoch"]}
    if o["stage"].startswith("export"):
        from pipeline.stages.export import export_adjacency

        k = o["top_k"] if o["stage"] == "export_topk" else None
        thr = o["topk_threshold"] if k else o["threshold"]
        man = export_adjacency(
            run_dir, threshold=thr, out=work / o["stage"], progress=False, top_k=k, allow_dense=True
        )
        return {"nnz": man["nnz"], "bytes": man["bytes"], "export_seconds": man["seconds"]}
    if o["stage"] == "sample":
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
                    res = sample_to_dir(
                        kg,
                        store,
                        SampleOptions(
                            out=work / "queries",
                            split="train",
                            types=types,
                            per_type=o["per_type"],
                            seed=o["seed"],
                            browse=False,
                            progress=False,
                        ),
                    )
                    break
                except SamplingError as exc:
                    # a sparse graph offers too few walks of some shapes (im, 2m need multi-edges): drop the
                    # type named in the error and say so, rather than lose the whole size
                    m = re.search(r"query type (\w+):", str(exc))
                    if not m or m[1] not in types:
                        raise
                    types.remove(m[1])
                    skipped.append(m[1])
        return {"queries": res["queries"], "types_skipped": skipped}
    if o["stage"].startswith("answer"):
        from pipeline.methods import MethodOptions
        from pipeline.stages.answer import AnswerOptions, answer_queries

        exp = work / ("export_topk" if o["stage"] == "answer_topk" else "export")
        qfile = next((work / "queries").glob("*.parquet"))
        rep = answer_queries(
            qfile,
            MethodOptions(adjacency=exp, device="cpu", seed=o["seed"]),
            AnswerOptions(out=work / o["stage"], progress=False),
        )
        return {"answer_seconds": rep["seconds"]}
    raise ValueError(f"unknown stage {o['stage']}")


def child() -> None:
    """The child process: one stage (settings as JSON in argv[1]), one JSON line with its peak RSS."""
    import resource

    t0 = time.perf_counter()
    doc = stage(json.loads(sys.argv[1]))
    doc["seconds"] = time.perf_counter() - t0  # the stage without interpreter start-up
    doc["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(doc))


def fit(xs: list[float], ys: list[float]) -> float | None:
    """Growth exponent a of y ~ x**a (least squares in log-log), None with fewer than 2 points."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y and y > 0]
    if len(pts) < 2:
        return None
    return float(np.polyfit(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]), 1)[0])


@benchmark(
    "scaling",
    title="Cost against graph size",
    goals=[
        Goal(
            "answer_exponent",
            "answering's seconds against N (the growth exponent, the larger export)",
            "<=",
            1,
            "",
        )
    ],
    quick={
        "sizes": (300, 600),
        "per_type": 5,
        "stages": ("synth", "train", "export_topk", "sample", "answer_topk"),
    },
)
def scaling(
    *,
    sizes: tuple[int, ...] = (1000, 3000, 10000),
    relations: int = 10,
    facts_per_entity: int = 10,
    like: str = "ppi5k",
    threshold: float = 0.5,
    top_k: int = 10,
    topk_threshold: float = 0.1,
    per_type: int = 100,
    threads: int = 1,
    seed: int = 0,
    stages: tuple[str, ...] = STAGES,
    home: Path | None = None,
) -> Result:
    """For each N of ``--sizes`` a synthetic KG (N entities, ``--relations``, ``--facts-per-entity`` x N facts,
    confidences like ``--like``'s): ``synth`` (generate and ``ingest --from`` into the embedded store),
    ``train`` (one epoch of UKGE logi), ``export`` at ``--threshold`` and ``export_topk`` with ``--top-k``,
    ``sample`` (``--per-type`` queries per type, train split; a type the sparse graph cannot offer is dropped
    and said), ``answer`` (SRC, no calibration) on each export. Each stage runs in a child process (its own
    peak RSS); cells are the stage's own seconds / peak RSS MB, and the growth exponents a of cost ~ N^a.
    The store and files go to ``--home`` (default: a throw-away PIPELINE_HOME)."""
    folder = Path(home or tempfile.mkdtemp(prefix="bench-scaling-"))
    base = {
        "relations": relations,
        "facts_per_entity": facts_per_entity,
        "like": like,
        "threshold": threshold,
        "top_k": top_k,
        "topk_threshold": topk_threshold,
        "per_type": per_type,
        "threads": threads,
        "seed": seed,
    }
    rows: list[dict[str, Any]] = []
    try:
        with progress(len(sizes) * len(stages), "scaling", "stage") as bar:
            for n in sizes:
                for name in stages:
                    cmd = [
                        sys.executable,
                        "-c",
                        "from benchmarks.scaling import child; child()",
                        json.dumps({**base, "stage": name, "n": n}),
                    ]
                    t0 = time.perf_counter()
                    proc = subprocess.run(
                        cmd,
                        cwd=ROOT,
                        env=env(ROOT, PIPELINE_HOME=str(folder)),
                        capture_output=True,
                        text=True,
                    )
                    bar.update(1)
                    if proc.returncode:
                        err = proc.stderr.strip().splitlines()
                        rows.append({"stage": name, "n": n, "error": err[-1] if err else "failed"})
                        say(f"N={n} {name}: {rows[-1]['error']}")
                        break
                    doc = json.loads(proc.stdout.strip().splitlines()[-1])
                    rows.append({"stage": name, "n": n, "wall_s": time.perf_counter() - t0, **doc})
    finally:
        subprocess.run(
            [sys.executable, "-c", "from pipeline.store import embedded; embedded.stop()"],
            cwd=ROOT,
            env=env(ROOT, PIPELINE_HOME=str(folder)),
            capture_output=True,
        )
    done = [n for n in sizes if any(r["n"] == n and "error" not in r for r in rows)]
    table_rows, exps = [], {}
    for name in CORE:
        got = {r["n"]: r for r in rows if r["stage"] == name and "error" not in r}
        if not got:
            continue
        cells = []
        for n in done:
            r = got.get(n)
            extra = f", {r['bytes'] / 1e6:.1f} MB / {r['nnz']:,} facts" if r and "bytes" in r else ""
            cells.append(f"{r[CORE[name]]:.2f} s / {r['peak_rss_mb']:.0f} MB{extra}" if r else None)
        ns = sorted(got)
        exps[name] = fit(ns, [got[n][CORE[name]] for n in ns])
        table_rows.append([name, *cells, exps[name], fit(ns, [got[n]["peak_rss_mb"] for n in ns])])
    answer_exps = [e for k, e in exps.items() if k.startswith("answer") and e is not None]
    notes = [f"N={r['n']} {r['stage']}: {r['error']}" for r in rows if "error" in r]
    notes += [
        f"N={r['n']}: types skipped by sampling: {', '.join(r['types_skipped'])}"
        for r in rows
        if r.get("types_skipped")
    ]
    return Result(
        [
            Table(
                ["stage", *(f"N={n:,}" for n in done), "exponent time", "exponent RSS"],
                table_rows,
                formats={"exponent time": ".2f", "exponent RSS": ".2f"},
            )
        ],
        {"answer_exponent": max(answer_exps) if answer_exps else None},
        notes,
    )
