"""``pipeline reproduce``, stage by stage, from its ledger: one column per work folder (a CPU and a GPU
reproduction, or the code before and after a change, side by side)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import BenchmarkError, Goal, Result, Table, benchmark
from benchmarks.processes import CLI

SKIPPED = "*"  # after a stage's seconds: the folder's last invocation skipped it (same inputs)


def read_ledger(where: Path) -> tuple[dict[str, tuple[float, bool]], dict]:
    """({stage: (seconds, skipped)}, the folder's reproduce.json or {}) of a work folder or a stages.json file.
    skipped: the folder's last invocation skipped the stage (e.g. ingest and sampling done beforehand on
    another machine), so its seconds are those of the run that made its outputs."""
    path = Path(where)
    if path.is_dir():
        path = path / "stages.json"
    if not path.is_file():
        raise BenchmarkError(f"{where}: no stages.json (a `pipeline reproduce` work folder has one)")
    doc = json.loads(path.read_text())
    last = path.parent / "reproduce.json"
    summary = json.loads(last.read_text()) if last.is_file() else {}
    skipped = {s["stage"] for s in summary.get("stages", []) if s.get("skipped")}
    return {name: (float(entry["seconds"]), name in skipped) for name, entry in doc.items()}, summary


@benchmark(
    "reproduce",
    title="pipeline reproduce, stage by stage",
    goals=[
        Goal("ppi5k_cpu_s", "PPI5k on a 2-core CPU, without training: every stage", "<=", 600, "s"),
        Goal("cn15k_cpu_s", "CN15k on a 2-core CPU, without training: every stage", "<=", 600, "s"),
        Goal("ppi5k_gpu_s", "PPI5k on a GPU, training included: the command", "<=", 120, "s"),
    ],
)
def reproduce(
    *,
    ledgers: tuple[Path, ...] = (),
    labels: tuple[str, ...] = (),
    dataset: str | None = None,
    out: Path | None = None,
    column: str | None = None,
    args: str = "",
) -> Result:
    """Each stage's seconds from the ledger (``stages.json``) of each work folder in ``--ledgers`` (labelled by
    ``--labels``, else the folder's name), in pipeline order, with the first column's ratio to each other.
    ``--dataset D --out WORK`` first runs ``pipeline reproduce D --out WORK ARGS`` (``--args "--epochs 100
    --device cuda"``) as a fresh process, adds its wall seconds, and puts its column first (stages already
    in the ledger with the same inputs are skipped, as the command does: a new ``--out`` times it from
    scratch; ``--column`` labels its column). A skipped stage is marked ``*``. The goals read the first
    column: on a CPU every stage but training, on a GPU the whole command."""
    from pipeline.stages.reproduce import _stage_order

    columns: list[tuple[str, dict[str, tuple[float, bool]], dict]] = []
    command_s = None
    if dataset:
        if out is None:
            raise BenchmarkError("--dataset needs --out WORK")
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", CLI, "reproduce", dataset, "--out", str(out), *shlex.split(args)],
            check=True,
        )
        command_s = time.perf_counter() - t0
        columns.append((column or Path(out).name, *read_ledger(out)))
    for i, where in enumerate(ledgers):
        columns.append((labels[i] if i < len(labels) else Path(where).resolve().name, *read_ledger(where)))
    if not columns:
        raise BenchmarkError("give --ledgers WORK[,WORK...] or --dataset D --out WORK")
    names = sorted({n for _, c, _ in columns for n in c}, key=_stage_order)
    cols = [
        "stage",
        *(f"{lab} s" for lab, _, _ in columns),
        *(f"{columns[0][0]} / {lab}" for lab, _, _ in columns[1:]),
    ]
    rows = []
    for name in [*names, "all stages"]:
        vals = [
            (sum(v for v, _ in c.values()), False) if name == "all stages" else c.get(name, (None, False))
            for _, c, _ in columns
        ]
        cells = [None if v is None else (f"{v:,.1f}{SKIPPED}" if skip else v) for v, skip in vals]
        first = vals[0][0]
        ratios = [None if v is None or first is None or v <= 0 else f"{first / v:.1f}x" for v, _ in vals[1:]]
        rows.append([name, *cells, *ratios])
    if command_s is not None:
        rows.append(["the command (wall)", command_s, *[None] * (len(cols) - 2)])
    _, ledger, summary = columns[0]
    cfg = summary.get("config", {})
    ds, on_gpu = summary.get("dataset"), str(cfg.get("device") or "").startswith("cuda")
    measured = {}
    if ds in ("ppi5k", "cn15k") and not on_gpu:
        measured[f"{ds}_cpu_s"] = sum(v for n, (v, _) in ledger.items() if not n.startswith("train"))
    if ds == "ppi5k" and on_gpu:
        measured["ppi5k_gpu_s"] = command_s if command_s is not None else summary.get("seconds")
    notes = (
        [f"{SKIPPED}: skipped by the folder's last invocation; the seconds of the run that made its outputs."]
        if any(skip for _, c, _ in columns for _, skip in c.values())
        else []
    )
    return Result([Table(cols, rows, formats={c: ",.1f" for c in cols[1:]})], measured, notes)
