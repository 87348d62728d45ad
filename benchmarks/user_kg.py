"""Your own uncertain KG end to end: ingest --from, sample, train, export, query, one process per command."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import Goal, Result, Table, benchmark, progress
from benchmarks.processes import env, pipeline_argv

RELATIONS = ("binds", "activates", "inhibits", "coexpressed_with")


def named_tsv(path: Path, n_facts: int, seed: int = 0) -> Path:
    """A named uncertain KG of ``n_facts`` rows (with header), about n_facts / 6 entities (at least 8): a ring
    so every entity is connected, then random facts over 4 relations with confidences U(0.05, 1) (seeded)."""
    rng = np.random.default_rng(seed)
    n_ent = max(8, n_facts // 6)
    names = [f"protein_{i}" for i in range(n_ent)]
    ring = min(n_ent, n_facts)
    lines = [f"{names[i]}\t{RELATIONS[i % 4]}\t{names[(i + 1) % n_ent]}\t0.9" for i in range(ring)]
    for _ in range(n_facts - ring):
        h, t = rng.integers(0, n_ent, 2)
        lines.append(f"{names[h]}\t{RELATIONS[rng.integers(0, 4)]}\t{names[t]}\t{rng.uniform(0.05, 1):.3f}")
    path.write_text("head\trelation\ttail\tconfidence\n" + "\n".join(lines) + "\n")
    return path


def timed(args: list[str], home: Path) -> tuple[float, str, str]:
    """Seconds, stdout and the one-line error (empty when the command succeeded) of ``pipeline ARGS``."""
    t0 = time.perf_counter()
    res = subprocess.run(
        pipeline_argv(*args), capture_output=True, text=True, env=env(PIPELINE_HOME=str(home))
    )
    seconds = time.perf_counter() - t0
    err = "" if res.returncode == 0 else (res.stderr.strip().splitlines() or ["?"])[-1]
    return seconds, res.stdout, err


def flow(n_facts: int, work: Path, home: Path, epochs: int, seed: int) -> list[list[Any]]:
    name = f"bench_user_{n_facts}"
    tsv = named_tsv(work / f"{name}.tsv", n_facts, seed)
    per_type = max(1, min(20, n_facts // 30))  # a tiny graph has only a handful of useful test queries
    run, adj, qdir = work / f"{name}-run", work / f"{name}-adj", work / f"{name}-queries"
    steps = [
        ("ingest --from", ["ingest", name, "--from", str(tsv), "--seed", str(seed), "--json"]),
        (
            "sample",
            [
                "sample",
                name,
                "--out",
                str(qdir),
                "--types",
                "1p,2p",
                "--per-type",
                str(per_type),
                "--seed",
                str(seed),
                "--no-browse",
                "--json",
            ],
        ),
        (
            "train",
            [
                "train",
                name,
                "--model",
                "ukge_logi",
                "--epochs",
                str(epochs),
                "--dim",
                "32",
                "--out",
                str(run),
                "--seed",
                str(seed),
                "--device",
                "cpu",
                "--json",
            ],
        ),
        ("export", ["export", str(run), "--threshold", "0.5", "--out", str(adj), "--json"]),
        (
            "query",
            [
                "query",
                "binds(protein_0, ?x) & activates(?x, ?y)",
                "--dataset",
                name,
                "--adjacency",
                str(adj),
                "--top",
                "5",
                "--json",
            ],
        ),
    ]
    rows = []
    for step, args in steps:
        seconds, out, err = timed(args, home)
        if err:  # e.g. a 30-fact graph has too few useful test queries: a row says so, the flow goes on
            rows.append([n_facts, step, seconds, None, err[:100]])
            continue
        doc = json.loads(out)
        note, own = "", None  # own: the seconds the command itself reports (no process start, no imports)
        if step == "ingest --from":
            note, own = (
                f"{doc['entities']} entities, {doc['relations']} relations, rows {doc['rows']}",
                doc["store_report"]["seconds"],
            )
        elif step == "sample":
            note, own = f"{doc['queries']} queries", doc["seconds"]
        elif step == "train":
            note, own = f"{doc.get('epochs_run')} epochs", doc.get("train_seconds")
        elif step == "export":
            note, own = f"{doc['nnz']} predicted facts", doc["seconds"]
        elif step == "query":
            note = ", ".join(f"{a['name']} {a['utility']:.3f}" for a in doc[:3])
        rows.append([n_facts, step, seconds, own, note])
    return rows


@benchmark(
    "user-kg",
    title="Your own uncertain KG, end to end",
    goals=[
        Goal("work_s", "a command's own work on the 5,000-fact graph (the slowest command)", "<=", 5, "s")
    ],
    quick={"facts": (30,), "epochs": 1},
)
def user_kg(
    *, facts: tuple[int, ...] = (30, 5000), epochs: int = 3, seed: int = 0, work: Path | None = None
) -> Result:
    """For each size in ``--facts``, a named TSV generated deterministically, then each command of ``ingest
    --from`` -> ``sample`` (1p, 2p) -> ``train`` (UKGE logi, ``--epochs``, dim 32) -> ``export`` (T = 0.5) ->
    ``query`` as a user runs them, a fresh process each in a throw-away PIPELINE_HOME: the wall seconds of
    the whole command (process start and imports included) and the seconds the command itself reports."""
    folder = Path(work or tempfile.mkdtemp(prefix="bench-user-kg-"))
    home = folder / "home"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    rows: list[list[Any]] = [
        [
            "-",
            'python -c "import torch"',
            time.perf_counter() - t0,
            None,
            "the floor of every command that trains, exports or queries",
        ]
    ]
    try:
        with progress(len(facts), "user-kg", "graph") as bar:
            for n in facts:
                rows += flow(n, folder, home, epochs, seed)
                bar.update(1)
    finally:
        timed(["store", "stop"], home)
    big = [r[3] for r in rows if r[0] == 5000 and r[3] is not None]
    return Result(
        [
            Table(
                ["facts", "command", "wall s", "work s", "result"],
                rows,
                formats={"wall s": ".1f", "work s": ".2f"},
            )
        ],
        {"work_s": max(big) if big else None},
    )
