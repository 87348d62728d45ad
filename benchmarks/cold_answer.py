"""``pipeline answer`` as a user meets it: fresh processes, per calibration, worker count and pair-cache
state, with the peak memory of the whole answering (every worker)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchmarkError, Goal, Result, Table, benchmark, progress, say
from benchmarks.processes import CLI, ROOT, PeakMemory, env, error_line

ORDER = ["1p", "2p", "2i", "ip", "2u", "up", "2in", "3in", "inp", "2il", "2m", "im"]
# --clock cpu: the answering stage's per-batch clock reads the process' CPU time (one worker: the engine's
# work, steadier than the wall clock on a shared machine); its wall-clock spans across workers stay time.time
CPU_CLOCK = (
    "import time, types, pipeline.stages.answer as a; "
    "a.time = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith('_')}); "
    "a.time.perf_counter = time.process_time; "
)


def _env(root: Path, cache: Path, threads: int | None) -> dict[str, str]:
    return env(root, PIPELINE_PAIR_CACHE=str(cache), **({"OMP_NUM_THREADS": str(threads)} if threads else {}))


def run_export(root: Path, o: dict[str, Any], cache: Path, out: Path) -> dict[str, Any]:
    """A fresh ``pipeline export`` of ``export_from`` into ``out`` (removed first): its wall seconds and what
    it prepared for answering."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        sys.executable,
        "-c",
        CLI,
        "export",
        str(o["export_from"]),
        "--threshold",
        str(o["threshold"]),
        "--out",
        str(out),
        "--json",
        *(["--device", o["device"]] if o["device"] else []),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=_env(root, cache, o["threads"]), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise BenchmarkError(f"pipeline export failed: {error_line(proc.stderr, proc.returncode)}")
    doc = json.loads(proc.stdout)
    return {"export_s": wall, "prepared": doc.get("prepared")}


def run_answer(
    root: Path, o: dict[str, Any], calibration: str, workers: int, cache: Path, out: Path, adjacency: str
) -> dict[str, Any]:
    """One fresh ``pipeline answer``: q/s per type (its --json report), its seconds, wall seconds, peak memory."""
    cmd = [
        sys.executable,
        "-c",
        (CPU_CLOCK if o["clock"] == "cpu" else "") + CLI,
        "answer",
        str(o["queries"]),
        "--adjacency",
        adjacency,
        "--calibration",
        calibration,
        "--workers",
        str(workers),
        "--out",
        str(out),
        "--json",
        "--seed",
        str(o["seed"]),
    ]
    if "D" in calibration or "L" in calibration:
        cmd += ["--valid-queries", str(o["valid"])]
    if "L" in calibration:
        cmd += ["--train-queries", str(o["train"])]
    if o["run"]:
        cmd += ["--run", str(o["run"])]
    if o["device"]:
        cmd += ["--device", o["device"]]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        env=_env(root, cache, o["threads"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    mem = PeakMemory(proc.pid)
    stdout, stderr = proc.communicate()
    peak = mem.stop()
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise BenchmarkError(
            f"pipeline answer failed ({calibration}, {workers} workers): "
            f"{error_line(stderr, proc.returncode)}"
        )
    report = json.loads(stdout)
    key = "queries_per_s" if workers == 1 else "wall_queries_per_s"
    qps = {t: s.get(key, s["queries_per_s"]) for t, s in report["throughput"].items()}
    return {"qps": qps, "wall_s": wall, "answer_s": report["seconds"], "peak_bytes": peak}


def _same_answers(a: Path, b: Path) -> bool:
    """Whether two answer folders hold the same answers files, frame for frame (DataFrame.equals)."""
    import pandas as pd

    fa, fb = sorted(p.name for p in a.glob("*.parquet")), sorted(p.name for p in b.glob("*.parquet"))
    return bool(fa) and fa == fb and all(pd.read_parquet(a / f).equals(pd.read_parquet(b / f)) for f in fa)


@benchmark(
    "cold-answer",
    title="A fresh pipeline answer",
    goals=[
        Goal("ppi5k_slowest", "PPI5k: the slowest type, one worker", ">=", 1000, "q/s"),
        Goal("cn15k_multi_edge", "CN15k: the slower of 2m and im", ">=", 200, "q/s"),
        Goal("cn15k_chains", "CN15k: the slowest of 2p, ip, inp and up", ">=", 500, "q/s"),
        Goal("cn15k_peak_mib", "CN15k: peak memory of the answering, every process", "<=", 4096, "MiB"),
    ],
    quick={"calibrations": ("none",), "workers": (1,), "cache": ("warm",)},
)
def cold_answer(
    *,
    queries: Path,
    adjacency: Path | None = None,
    export_from: Path | None = None,
    threshold: float = 0.1,
    valid: Path | None = None,
    train: Path | None = None,
    calibrations: tuple[str, ...] = ("none", "D", "L", "D+L"),
    workers: tuple[int, ...] = (1, 2),
    cache: tuple[str, ...] = ("cold", "warm"),
    repeat: int = 1,
    baseline_root: Path | None = None,
    run: Path | None = None,
    seed: int = 0,
    device: str | None = None,
    pair_cache: Path | None = None,
    threads: int | None = None,
    clock: str = "wall",
) -> Result:
    """Every cell runs ``pipeline answer QUERIES --adjacency EXPORT --calibration C --workers W --json`` as a
    new process (imports, loading the export, fitting what the calibration needs, as for a user; D and L
    reuse their saved fits in ``--run`` after the first). q/s per type comes from the command's --json
    throughput: the engine's time per type with one worker, the type's wall-clock span over all workers
    with more. Pair-cache states (``--cache``, in order): ``cold`` removes the pair cache first (a folder of
    this run); ``warm`` keeps what the previous command wrote (``--pair-cache DIR``: an existing one, kept);
    ``export`` (the first answer after ``pipeline export``) removes it, runs ``pipeline export
    --export-from RUN --threshold T`` as its own process and answers on that export. ``--threads`` sets
    OMP_NUM_THREADS of every command; ``--clock cpu`` reads q/s from the answering process' CPU time.
    Peak memory: the largest summed PSS of the command's process tree (Linux). ``--baseline-root``: another
    checkout (the code before a change) run alternately, cell by cell, answers compared (DataFrame.equals).
    The best of ``--repeat`` runs per cell."""
    from pipeline.formats.queryset import read_query_set

    if "export" in cache and not export_from:
        raise BenchmarkError("--cache export needs --export-from RUN_DIR")
    if pair_cache and set(cache) != {"warm"}:
        raise BenchmarkError("--pair-cache: an existing cache, for the state warm alone")
    if cache[0] != "export" and not adjacency:
        raise BenchmarkError("--cache cold/warm need --adjacency EXPORT (or follow the state export)")
    if clock not in ("wall", "cpu"):
        raise BenchmarkError(f"--clock {clock!r}: wall or cpu")
    dataset = read_query_set(queries).meta["dataset"]
    calibs = [c for c in calibrations if (c == "none" or valid) and ("L" not in c or train)]
    o = {
        "queries": Path(queries).resolve(),
        "valid": valid,
        "train": train,
        "run": run,
        "seed": seed,
        "device": device,
        "threads": threads,
        "clock": clock,
        "export_from": export_from,
        "threshold": threshold,
    }
    roots = [("this", ROOT)] + ([("before", Path(baseline_root).resolve())] if baseline_root else [])
    tmp = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    cells: list[dict[str, Any]] = []
    try:
        with progress(
            len(calibs) * len(workers) * len(cache) * len(roots) * repeat, "cold-answer", "command"
        ) as bar:
            for calib in calibs:
                for w in workers:
                    for state in cache:
                        for label, root in roots:  # alternately, cell by cell
                            folder = Path(pair_cache).resolve() if pair_cache else tmp / f"pairs-{label}"
                            best: dict[str, Any] | None = None
                            for _ in range(repeat):
                                exported: dict[str, Any] = {}
                                if state in ("cold", "export"):
                                    shutil.rmtree(folder, ignore_errors=True)
                                if state == "export":
                                    exported = run_export(root, o, folder, tmp / f"export-{label}")
                                fresh = (
                                    tmp / f"export-{label}"
                                )  # cold/warm after an export state: that export
                                where = str(fresh) if state == "export" or not adjacency else str(adjacency)
                                got = {
                                    **run_answer(root, o, calib, w, folder, tmp / f"out-{label}", where),
                                    **exported,
                                }
                                bar.update(1)
                                if best is None:
                                    best = got
                                else:
                                    best["qps"] = {t: max(v, best["qps"][t]) for t, v in got["qps"].items()}
                                    best["peak_bytes"] = max(best["peak_bytes"] or 0, got["peak_bytes"] or 0)
                            assert best is not None
                            size = (
                                sum(p.stat().st_size for p in folder.rglob("*.bin")) if folder.exists() else 0
                            )
                            cells.append(
                                {
                                    "code": label,
                                    "calibration": calib,
                                    "workers": w,
                                    "cache": state,
                                    "cache_bytes": size,
                                    **best,
                                }
                            )
                            if label == roots[-1][0] and len(roots) > 1:  # both codes answered this cell
                                cells[-1]["answers_equal"] = _same_answers(
                                    tmp / "out-this", tmp / f"out-{label}"
                                )
                            say(
                                f"{label} {calib} w={w} {state}: answer {best['answer_s']:.1f} s, "
                                f"wall {best['wall_s']:.1f} s"
                            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    types = [t for t in ORDER if any(t in c["qps"] for c in cells)]
    types += sorted({t for c in cells for t in c["qps"]} - set(types))
    cols = [
        "code",
        "calibration",
        "workers",
        "pair cache",
        *types,
        "answer s",
        "wall s",
        "export s",
        "peak MiB",
        "cache MiB",
    ] + (["answers equal"] if len(roots) > 1 else [])
    rows = []
    for c in cells:
        row = [
            c["code"],
            c["calibration"],
            c["workers"],
            c["cache"],
            *(c["qps"].get(t) for t in types),
            c["answer_s"],
            c["wall_s"],
            c.get("export_s"),
            c["peak_bytes"] / 2**20 if c["peak_bytes"] else None,
            c["cache_bytes"] / 2**20,
        ]
        rows.append(row + ([c.get("answers_equal")] if len(roots) > 1 else []))
    mine = [c for c in cells if c["code"] == "this"]
    measured: dict[str, float | None] = {}
    if dataset == "ppi5k" and any(c["workers"] == 1 for c in mine):
        measured["ppi5k_slowest"] = min(min(c["qps"].values()) for c in mine if c["workers"] == 1)
    if dataset == "cn15k":
        multi = [min(c["qps"][t] for t in ("2m", "im")) for c in mine if {"2m", "im"} <= set(c["qps"])]
        chains = [
            min(c["qps"][t] for t in ("2p", "ip", "inp", "up"))
            for c in mine
            if {"2p", "ip", "inp", "up"} <= set(c["qps"])
        ]
        peaks = [c["peak_bytes"] / 2**20 for c in mine if c["peak_bytes"]]
        measured |= {
            "cn15k_multi_edge": min(multi) if multi else None,
            "cn15k_chains": min(chains) if chains else None,
            "cn15k_peak_mib": max(peaks) if peaks else None,
        }
    return Result(
        [
            Table(
                cols,
                rows,
                formats={
                    "answer s": ".1f",
                    "wall s": ".1f",
                    "export s": ".1f",
                    "peak MiB": ",.0f",
                    "cache MiB": ",.1f",
                },
            )
        ],
        measured,
        [f"{dataset}: {Path(queries).name}; q/s per type from the {clock} clock."],
    )
