"""Your own uncertain KG, end to end: generate a named TSV deterministically, then time each command of
ingest --from -> sample -> train -> export -> query, as a user would run them (one process per command).

    PIPELINE_HOME=/tmp/h nice -n 10 python benchmarks/bench_user_kg.py --facts 30 5000 --epochs 3

Prints one table row per (graph, command) with the wall time of the whole command (process start and
imports included). The generated graphs: entities `protein_<i>` with a ring so every entity is connected,
then random facts over 4 relations with confidences U(0.05, 1) rounded to 3 decimals (seeded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RELATIONS = ("binds", "activates", "inhibits", "coexpressed_with")


def named_tsv(path: Path, n_facts: int, seed: int = 0) -> Path:
    """A named uncertain KG of n_facts rows (with header), about n_facts / 6 entities (at least 8)."""
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


def timed(args: list[str]) -> tuple[float, str, str]:
    """Seconds, stdout and the one-line error (empty when the command succeeded)."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    err = "" if res.returncode == 0 else (res.stderr.strip().splitlines() or ["?"])[-1]
    return seconds, res.stdout, err


def flow(n_facts: int, work: Path, epochs: int, seed: int) -> list[dict]:
    name = f"bench_user_{n_facts}"
    tsv = named_tsv(work / f"{name}.tsv", n_facts, seed)
    per_type = max(1, min(20, n_facts // 30))  # a tiny graph has only a handful of useful test queries
    run, adj, qdir = work / f"{name}-run", work / f"{name}-adj", work / f"{name}-queries"
    steps = [
        ("ingest", ["ingest", name, "--from", str(tsv), "--seed", str(seed), "--json"]),
        ("sample", ["sample", name, "--out", str(qdir), "--types", "1p,2p", "--per-type", str(per_type), "--seed",
                    str(seed), "--no-browse", "--json"]),
        ("train", ["train", name, "--model", "ukge_logi", "--epochs", str(epochs), "--dim", "32", "--out", str(run),
                   "--seed", str(seed), "--device", "cpu", "--json"]),
        ("export", ["export", str(run), "--threshold", "0.5", "--out", str(adj), "--json"]),
        ("query", ["query", "binds(protein_0, ?x) & activates(?x, ?y)", "--dataset", name, "--adjacency",
                   str(adj), "--top", "5", "--json"]),
    ]
    rows = []
    for step, args in steps:
        seconds, out, err = timed(args)
        if err:  # e.g. a 30-fact graph has too few useful test queries: reported, the flow goes on
            rows.append({"facts": n_facts, "command": step, "wall s": f"{seconds:.1f}", "work s": "",
                         "result": err[:100]})
            continue
        doc = json.loads(out)
        note, work = "", None  # work: seconds the command itself reports (no process start, no imports)
        if step == "ingest":
            note = f"{doc['entities']} entities, {doc['relations']} relations, rows {doc['rows']}"
            work = doc["store_report"]["seconds"]
        elif step == "sample":
            note, work = f"{doc['queries']} queries", doc["seconds"]
        elif step == "train":
            note, work = f"{doc.get('epochs_run')} epochs", doc.get("train_seconds")
        elif step == "export":
            note, work = f"{doc['nnz']} predicted facts", doc["seconds"]
        elif step == "query":
            note = ", ".join(f"{a['name']} {a['utility']:.3f}" for a in doc[:3])
        rows.append({"facts": n_facts, "command": step, "wall s": f"{seconds:.1f}",
                     "work s": "" if work is None else f"{work:.2f}", "result": note})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, nargs="+", default=[30, 5000])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="Folder for the TSVs and artifacts (default: PIPELINE_HOME/bench_user_kg).")
    args = ap.parse_args()
    from pipeline.core import config

    work = args.work or config.home() / "bench_user_kg"
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PIPELINE_HOME", str(config.home()))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    base = {"facts": "-", "command": "import torch", "wall s": f"{time.perf_counter() - t0:.1f}", "work s": "",
            "result": "the floor of every command that trains, exports or queries"}
    rows = [base, *(r for n in args.facts for r in flow(n, work, args.epochs, args.seed))]
    widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in rows[0]}
    print(" | ".join(k.ljust(w) for k, w in widths.items()))
    print("-|-".join("-" * w for w in widths.values()))
    for r in rows:
        print(" | ".join(str(r[k]).ljust(w) for k, w in widths.items()))


if __name__ == "__main__":
    main()
