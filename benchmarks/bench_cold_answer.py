"""Cold answering (issue 31): `pipeline answer` as a user meets it, in FRESH processes, per calibration,
worker count and pair-cache state, with the peak memory of the whole answering (all workers).

    PIPELINE_DATA=../shared/data python benchmarks/bench_cold_answer.py --adjacency EXPORT --queries TEST \
        [--valid VALID] [--train TRAIN] [--calibrations none,D,L,D+L] [--workers-list 1,2] \
        [--cache cold,warm] [--repeat 1] [--baseline-root ../other-checkout] [--device cpu] [--json OUT.json]

Every cell runs ``python -c 'from pipeline.cli import main; main()' answer TEST --adjacency EXPORT
--calibration C --workers W --json`` as a new process (imports, loading the export and fitting what the
calibration needs included, as for a user; D and L reuse their saved fits after the first run, as a
user's second command does). q/s per type is read from the command's --json throughput: the engine's time
per type with one worker (``queries_per_s``), the type's wall-clock span over all workers with more
(``wall_queries_per_s``). ``cold`` removes the pair cache (PIPELINE_PAIR_CACHE, a folder of this run)
before the command; ``warm`` keeps what the previous command wrote. The OS page cache is not dropped.
Peak memory: the largest sum, over the command's process tree, of each process' proportional set size
(/proc/PID/smaps_rollup, sampled every 100 ms; pages shared by the workers counted once), Linux only.
--baseline-root: another checkout (e.g. the code before) run alternately with this one, cell by cell.
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


def run_answer(
    root: Path, args: argparse.Namespace, calibration: str, workers: int, cache: Path, out: Path
) -> dict[str, Any]:
    """One fresh `pipeline answer`; its --json report plus wall seconds and peak memory."""
    cmd = [
        sys.executable,
        "-c",
        "import sys; from pipeline.cli import main; sys.argv[0] = 'pipeline'; main()",
        "answer",
        args.queries,
        "--adjacency",
        args.adjacency,
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
    env = {
        **os.environ,
        "PIPELINE_PAIR_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mem = PeakMemory(proc.pid)
    stdout, stderr = proc.communicate()
    peak = mem.stop()
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(
            f"pipeline answer failed ({calibration}, {workers} workers): {stderr.strip().splitlines()[-1] if stderr.strip() else proc.returncode}"
        )
    report = json.loads(stdout)
    key = "queries_per_s" if workers == 1 else "wall_queries_per_s"
    qps = {t: s.get(key, s["queries_per_s"]) for t, s in report["throughput"].items()}
    return {"qps": qps, "wall_s": wall, "answer_s": report["seconds"], "peak_bytes": peak}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adjacency", required=True)
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
    args = ap.parse_args()
    calibs = [c.strip() for c in args.calibrations.split(",") if c.strip()]
    if args.valid is None:
        calibs = [c for c in calibs if c == "none"]
    if args.train is None:
        calibs = [c for c in calibs if "L" not in c]
    workers = [int(w) for w in args.workers_list.split(",")]
    states = [s.strip() for s in args.cache.split(",") if s.strip()]
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
                        cache = tmp / f"pairs-{label}"
                        best: dict[str, Any] | None = None
                        for _ in range(args.repeat):
                            if state == "cold":
                                shutil.rmtree(cache, ignore_errors=True)
                            got = run_answer(root, args, calib, w, cache, tmp / "out")
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
                        qps = " ".join(f"{t}:{v:,.0f}" for t, v in best["qps"].items())
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
        f"machine: {platform.platform()}, {os.cpu_count()} cores; queries: {args.queries}; export: {args.adjacency}\n"
    )
    print(
        "| code | calibration | workers | pair cache | "
        + " | ".join(types)
        + " | answer s | peak MiB | cache MiB |"
    )
    print("|---" * (len(types) + 7) + "|")
    for c in cells:
        peak = f"{c['peak_bytes'] / 2**20:,.0f}" if c["peak_bytes"] else "n/a"
        print(
            f"| {c['code']} | {c['calibration']} | {c['workers']} | {c['cache']} | "
            + " | ".join(f"{c['qps'].get(t, 0):,.0f}" for t in types)
            + f" | {c['answer_s']:.1f} | {peak} | {c['cache_bytes'] / 2**20:.1f} |"
        )
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"platform": platform.platform(), "cores": os.cpu_count(), "cells": cells}, indent=1)
        )


if __name__ == "__main__":
    main()
