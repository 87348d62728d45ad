"""Cold answering: `pipeline answer` as a user meets it, in FRESH processes, per calibration,
worker count and pair-cache state, with the peak memory of the whole answering (all workers).

    PIPELINE_DATA=../shared/data python benchmarks/bench_cold_answer.py --adjacency EXPORT --queries TEST \
        [--valid VALID] [--train TRAIN] [--calibrations none,D,L,D+L] [--workers-list 1,2] \
        [--cache cold,warm] [--repeat 1] [--baseline-root ../other-checkout] [--device cpu] [--json OUT.json]
        [--pair-cache DIR (with --cache warm: an existing cache shared by both codes)]

Every cell runs ``python -c 'from pipeline.cli import main; main()' answer TEST --adjacency EXPORT
--calibration C --workers W --json`` as a new process (imports, loading the export and fitting what the
calibration needs included, as for a user; D and L reuse their saved fits after the first run, as a
user's second command does). q/s per type is read from the command's --json throughput: the engine's time
per type with one worker (``queries_per_s``), the type's wall-clock span over all workers with more
(``wall_queries_per_s``). ``cold`` removes the pair cache (PIPELINE_PAIR_CACHE, a folder of this run)
before the command; ``warm`` keeps what the previous command wrote; ``export`` (the first answer
after ``pipeline export``) removes it, then runs ``pipeline export RUN --threshold T`` (--export-from,
--threshold) into a fresh folder as its own process with the same cache folder, and answers on that
export (the export's seconds and what it prepared are reported beside); without --adjacency, the states
after it (e.g. ``--cache export,warm``) answer on that fresh export too. The OS page cache is not dropped.
--threads N sets OMP_NUM_THREADS of every command; --clock cpu reads q/s from the answering process' CPU
time instead of the wall clock (with one worker and one thread: what one quiet core gives; the compiled stream made
its figures so). Peak memory: the largest sum, over the command's process tree, of each process' proportional set size
(/proc/PID/smaps_rollup, sampled every 100 ms; pages shared by the workers counted once), Linux only.
--baseline-root: another checkout (e.g. the code before) run alternately with this one, cell by cell; the
answers files of the two codes in each cell are compared (DataFrame.equals) and the result printed.
Needs only the repository and its environment: no network, no fixed paths. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ORDER = [
    "1p",
    "2p",
    "3p",
    "2i",
    "3i",
    "ip",
    "pi",
    "2u",
    "up",
    "2in",
    "3in",
    "inp",
    "pin",
    "pni",
    "2il",
    "3il",
    "2m",
    "2nm",
    "3mp",
    "3pm",
    "im",
]


def _children(pid: int) -> list[int]:
    """pid and its descendants, from /proc/PID/task/TID/children (Linux; cheap, no scan of /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return out


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakMemory:
    """The peak of the summed PSS of a process tree, sampled in a thread."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every, self.peak = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.supported = os.path.exists("/proc/self/smaps_rollup")
        if self.supported:
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(_pss(p) for p in _children(self.pid)))
            self._stop.wait(self.every)

    def stop(self) -> int | None:
        self._stop.set()
        if self.supported:
            self._thread.join()
        return self.peak if self.supported else None


THREADS: int | None = None  # --threads: OMP_NUM_THREADS of every command


def _env(root: Path, cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PIPELINE_PAIR_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        **({"OMP_NUM_THREADS": str(THREADS)} if THREADS else {}),
    }


_CLI = "import sys; from pipeline.cli import main; sys.argv[0] = 'pipeline'; main()"
# --clock cpu: the answering stage's per-batch clock reads the process' CPU time (one worker: the engine's
# work, steadier than the wall clock on a shared machine); its wall-clock spans across workers stay time.time
_CPU_CLOCK = (
    "import time, types, pipeline.stages.answer as a; "
    "a.time = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith('_')}); "
    "a.time.perf_counter = time.process_time; "
)


def _error_line(stderr: str, rc: int) -> str:
    """The command's `error: ...` line (progress bars share its stderr), else its last line, else rc."""
    lines = [x for x in stderr.replace("\r", "\n").splitlines() if x.strip()]
    errors = [x[x.index("error:"):] for x in lines if "error:" in x]
    return errors[-1] if errors else lines[-1] if lines else f"exit status {rc}"


def run_export(root: Path, args: argparse.Namespace, cache: Path, out: Path) -> dict[str, Any]:
    """A fresh `pipeline export` of --export-from into out (removed first); its wall seconds and what it
    prepared for answering (the code's "prepared" report; absent in older code)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-c", _CLI, "export", args.export_from, "--threshold", str(args.threshold),
           "--out", str(out), "--json", *(["--device", args.device] if args.device else [])]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=_env(root, cache), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"pipeline export failed: {_error_line(proc.stderr, proc.returncode)}")
    doc = json.loads(proc.stdout)
    return {"export_s": wall, "scoring_s": doc.get("seconds"), "prepared": doc.get("prepared")}


def run_answer(
    root: Path, args: argparse.Namespace, calibration: str, workers: int, cache: Path, out: Path,
    adjacency: str | None = None,
) -> dict[str, Any]:
    """One fresh `pipeline answer`; its --json report plus wall seconds and peak memory."""
    cmd = [
        sys.executable,
        "-c",
        (_CPU_CLOCK if args.clock == "cpu" else "") + _CLI,
        "answer",
        args.queries,
        "--adjacency",
        adjacency or args.adjacency,
        "--calibration",
        calibration,
        "--workers",
        str(workers),
        "--out",
        str(out),
        "--json",
        "--seed",
        str(args.seed),
    ]
    if "D" in calibration or "L" in calibration:
        cmd += ["--valid-queries", args.valid]
    if "L" in calibration:
        cmd += ["--train-queries", args.train]
    if args.run:
        cmd += ["--run", args.run]
    if args.device:
        cmd += ["--device", args.device]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=root, env=_env(root, cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mem = PeakMemory(proc.pid)
    stdout, stderr = proc.communicate()
    peak = mem.stop()
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(
            f"pipeline answer failed ({calibration}, {workers} workers): {_error_line(stderr, proc.returncode)}"
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adjacency", default=None, help="the export answered (cache states cold, warm)")
    ap.add_argument("--export-from", default=None, help="cache state export: the run directory exported")
    ap.add_argument("--threshold", type=float, default=0.1, help="cache state export: --threshold")
    ap.add_argument("--queries", required=True)
    ap.add_argument("--valid", default=None, help="valid queries (calibrations with D or L)")
    ap.add_argument("--train", default=None, help="train queries (calibrations with L)")
    ap.add_argument("--calibrations", default="none,D,L,D+L")
    ap.add_argument("--workers-list", default="1,2")
    ap.add_argument(
        "--cache", default="cold,warm", help="pair-cache states, in order (cold removes it first)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell (the best q/s per type is kept)")
    ap.add_argument(
        "--baseline-root", default=None, help="another checkout run alternately (labelled 'before')"
    )
    ap.add_argument(
        "--run",
        default=None,
        help="the backbone's run directory (--run of pipeline answer; D and L save their fits there)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="--device of pipeline answer (cpu | cuda; default: its own)")
    ap.add_argument("--json", dest="json_out", default=None, help="also write every figure here")
    ap.add_argument("--pair-cache", default=None,
                    help="cache state warm only: this existing pair cache for every code (CN15k's index and pairs "
                         "are gigabytes; the codes write the same files), never removed")
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of every command")
    ap.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall",
        help="q/s per type from the wall clock (default) or the answering process' CPU time (one worker)",
    )
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    calibs = [c.strip() for c in args.calibrations.split(",") if c.strip()]
    if args.valid is None:
        calibs = [c for c in calibs if c == "none"]
    if args.train is None:
        calibs = [c for c in calibs if "L" not in c]
    workers = [int(w) for w in args.workers_list.split(",")]
    states = [s.strip() for s in args.cache.split(",") if s.strip()]
    if "export" in states and not args.export_from:
        ap.error("--cache export needs --export-from RUN_DIR")
    if args.pair_cache and set(states) != {"warm"}:
        ap.error("--pair-cache: an existing cache for the state warm alone")
    if states[0] != "export" and not args.adjacency:
        ap.error("--cache cold/warm need --adjacency EXPORT (or follow the state export: its fresh export)")
    roots = [("after", REPO)] + (
        [("before", Path(args.baseline_root).resolve())] if args.baseline_root else []
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    cells: list[dict[str, Any]] = []
    try:
        for calib in calibs:
            for w in workers:
                for state in states:
                    for label, root in roots:  # alternately, cell by cell
                        cache = Path(args.pair_cache).resolve() if args.pair_cache else tmp / f"pairs-{label}"
                        best: dict[str, Any] | None = None
                        for _ in range(args.repeat):
                            exported: dict[str, Any] = {}
                            if state in ("cold", "export"):
                                shutil.rmtree(cache, ignore_errors=True)
                            if state == "export":
                                exported = run_export(root, args, cache, tmp / f"export-{label}")
                            fresh = tmp / f"export-{label}"  # cold/warm after an export state: that export
                            got = run_answer(
                                root, args, calib, w, cache, tmp / f"out-{label}",
                                str(fresh) if state == "export" or not args.adjacency else None,
                            )
                            got.update(exported)
                            if best is None:
                                best = got
                            else:
                                best["qps"] = {t: max(v, best["qps"][t]) for t, v in got["qps"].items()}
                                best["peak_bytes"] = max(best["peak_bytes"] or 0, got["peak_bytes"] or 0)
                        assert best is not None
                        size = sum(p.stat().st_size for p in cache.rglob("*.bin")) if cache.exists() else 0
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
                            same = _same_answers(tmp / f"out-{roots[0][0]}", tmp / f"out-{label}")
                            cells[-1]["answers_equal"] = same
                            print(f"# answers files of {roots[0][0]} and {label} equal (DataFrame.equals): {same}", file=sys.stderr)
                        qps = " ".join(f"{t}:{v:,.0f}" for t, v in best["qps"].items())
                        if "export_s" in best:
                            prep = best.get("prepared") or {}
                            print(
                                f"# {label} export {best['export_s']:.1f} s wall (scoring {best['scoring_s']:.1f} s), "
                                f"prepared: {json.dumps(prep)}",
                                file=sys.stderr,
                            )
                        print(
                            f"# {label} {calib} w={w} {state}: answer {best['answer_s']:.1f} s, wall {best['wall_s']:.1f} s, "
                            f"peak {(best['peak_bytes'] or 0) / 2**20:,.0f} MiB, cache {size / 2**20:,.1f} MiB; {qps}",
                            file=sys.stderr,
                            flush=True,
                        )
                        if args.json_out:  # every figure so far, in case a later cell fails
                            Path(args.json_out).write_text(json.dumps({"cells": cells}, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    types = [t for t in ORDER if any(t in c["qps"] for c in cells)]
    types += sorted({t for c in cells for t in c["qps"]} - set(types))
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores; queries: {args.queries}; "
        f"export: {args.adjacency or 'fresh exports of ' + str(args.export_from)}\n"
    )
    print(
        "| code | calibration | workers | pair cache | "
        + " | ".join(types)
        + " | answer s | wall s | export s | peak MiB | cache MiB |"
    )
    print("|---" * (len(types) + 9) + "|")
    for c in cells:
        peak = f"{c['peak_bytes'] / 2**20:,.0f}" if c["peak_bytes"] else "n/a"
        print(
            f"| {c['code']} | {c['calibration']} | {c['workers']} | {c['cache']} | "
            + " | ".join(f"{c['qps'].get(t, 0):,.0f}" for t in types)
            + f" | {c['answer_s']:.1f} | {c['wall_s']:.1f} | "
            + (f"{c['export_s']:.1f}" if "export_s" in c else "-")
            + f" | {peak} | {c['cache_bytes'] / 2**20:.1f} |"
        )
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"platform": platform.platform(), "cores": os.cpu_count(), "cells": cells}, indent=1)
        )


if __name__ == "__main__":
    main()
