"""Each stage's seconds of `pipeline reproduce`, from its ledger: one column per work folder, so
a CPU and a GPU reproduction (or code before and after) read side by side, with the ratio of the first to
each other.

    python benchmarks/bench_reproduce.py WORK [WORK2 ...] [--labels cpu,h200] [--json OUT.json]
    PIPELINE_DATA=../shared/data python benchmarks/bench_reproduce.py --run ppi5k --out WORK \
        [--label h200] -- --epochs 100 --select-on last --seed 0 --device cuda

WORK: a reproduction's work folder (its ``stages.json``, the ledger of every stage's seconds when it last
ran) or the ledger file itself. --run DATASET first runs ``pipeline reproduce DATASET --out WORK`` plus
the arguments after ``--`` as a fresh process (stages already in the ledger with the same inputs are
skipped, as the command does: give a new --out for a timing from scratch) and adds its wall time. Stages
are listed in pipeline order (ingest, sample, train, export, answer by calibration none/D/L/D+L); a stage
missing from a ledger reads "-"; one the folder's last invocation skipped is marked "*" (its seconds are
those of the run that made its outputs). The figures are the ledger's: each stage's wall clock inside the command
(imports and the data set's load are outside every stage; "command" is the whole process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SKIPPED = "*"  # marks a stage the folder's last invocation skipped


def read_ledger(where: str | Path) -> dict[str, tuple[float, bool]]:
    """{stage: (seconds, skipped)} of a work folder or a stages.json file; skipped: the folder's last
    invocation (its reproduce.json) skipped the stage (e.g. ingest and sampling done beforehand on
    another machine), so its seconds are those of the run that made its outputs."""
    path = Path(where)
    if path.is_dir():
        path = path / "stages.json"
    doc = json.loads(path.read_text())
    skipped: set[str] = set()
    last = path.parent / "reproduce.json"
    if last.is_file():
        skipped = {s["stage"] for s in json.loads(last.read_text()).get("stages", []) if s.get("skipped")}
    return {name: (float(entry["seconds"]), name in skipped) for name, entry in doc.items()}


def ordered(names: set[str]) -> list[str]:
    """Stages in pipeline order (the reproduction's own order for its notes)."""
    from pipeline.stages.reproduce import _stage_order

    return sorted(names, key=_stage_order)


def table(columns: list[tuple[str, dict[str, tuple[float, bool]]]]) -> list[str]:
    """Markdown rows: stage, each column's seconds (SKIPPED after a skipped stage's), then first / other
    per other column."""
    names = ordered({n for _, c in columns for n in c})
    head = "| stage | " + " | ".join(f"{label} s" for label, _ in columns)
    head += "".join(f" | {columns[0][0]} / {label}" for label, _ in columns[1:]) + " |"
    lines = [head, "|---|" + "---:|" * (2 * len(columns) - 1)]
    for name in [*names, "all stages"]:
        if name == "all stages":
            vals = [(sum(v for v, _ in c.values()), False) for _, c in columns]
        else:
            vals = [c.get(name, (None, False)) for _, c in columns]
        cells = ["-" if v is None else f"{v:,.1f}{SKIPPED if skip else ''}" for v, skip in vals]
        first = vals[0][0]
        ratios = ["-" if v is None or first is None or v <= 0 else f"{first / v:.1f}x" for v, _ in vals[1:]]
        label = name if name != "all stages" else "**all stages**"
        lines.append(f"| {label} | " + " | ".join(cells) + "".join(f" | {r}" for r in ratios) + " |")
    return lines


def run_reproduce(dataset: str, out: str, extra: list[str]) -> float:
    """``pipeline reproduce DATASET --out OUT EXTRA...`` as a fresh process; its wall seconds."""
    cmd = [
        sys.executable,
        "-c",
        "import sys; from pipeline.cli import main; sys.argv[0] = 'pipeline'; main()",
        "reproduce",
        dataset,
        "--out",
        out,
        *extra,
    ]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ledgers", nargs="*", help="work folders or stages.json files")
    ap.add_argument("--labels", default=None, help="comma-separated column labels (default: folder names)")
    ap.add_argument("--run", default=None, help="DATASET: run `pipeline reproduce` into --out first")
    ap.add_argument("--out", default=None, help="--run: the work folder (its column comes first)")
    ap.add_argument("--label", default=None, help="--run: the label of its column")
    ap.add_argument("--json", dest="json_out", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    columns: list[tuple[str, dict[str, tuple[float, bool]]]] = []
    command_s = None
    if args.run:
        if not args.out:
            ap.error("--run needs --out")
        command_s = run_reproduce(args.run, args.out, extra)
        columns.append((args.label or Path(args.out).name, read_ledger(args.out)))
    labels = args.labels.split(",") if args.labels else []
    for i, where in enumerate(args.ledgers):
        label = labels[i] if i < len(labels) else Path(where).resolve().name
        columns.append((label, read_ledger(where)))
    if not columns:
        ap.error("give a work folder or --run")
    try:
        import torch

        device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    except ImportError:
        device = "?"
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {device}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
    )
    print("\n".join(table(columns)))
    if any(skip for _, c in columns for _, skip in c.values()):
        print(f"\n{SKIPPED}: skipped by the folder's last invocation (same inputs); the seconds of the run that made its outputs")
    if command_s is not None:
        print(f"\nthe command (`pipeline reproduce {args.run} --out {args.out} {' '.join(extra)}`): {command_s:.1f} s wall")
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "columns": {label: {n: {"seconds": v, "skipped": k} for n, (v, k) in c.items()} for label, c in columns},
                    "command_s": command_s,
                    "extra": extra,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
