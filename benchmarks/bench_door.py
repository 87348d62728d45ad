"""Speed at the door: what a person meets around the engine. Fresh processes of ``pipeline query`` (over an
observed graph and over an export) and ``pipeline answer`` against the floor of any torch tool (``python
-c "import torch, pandas, pyarrow"``), measured beside each other, round by round; a notebook's first and
second ``pl.query`` / ``pl.answer`` in one real Jupyter kernel; and, per command, where the time goes.

    PIPELINE_DATA=../shared/data python benchmarks/bench_door.py --dataset ppi5k --export EXPORT \
        [--queries TEST.parquet] [--baseline-root ../before] [--rounds 3] [--parts fresh,notebook,profile] \
        [--text '...' --text2 '...'] [--json OUT.json]

``fresh``: each round runs the floor, then each command of each code (this checkout, and the code at
--baseline-root if given, alternately), every one a new process (imports, loading, answering, printing,
as a user meets it). Reported: the minimum over rounds of each command's wall seconds, and that minimum
minus the floor's minimum ("above floor": what the project adds to the imports any torch tool pays); the
same for the CPU seconds (user + system) of each process, which a machine loaded by other jobs changes
far less than the wall clock.
``pipeline answer`` runs with ``--workers 1 --json``; its fixed costs are its wall minus the answering
stage's own seconds (the report's ``seconds``: batching, the engine, the answers rows). Every command's
cache state is what a user meets on the second command after ``pipeline export``: the parsed data set
and the export's index already written by an earlier process (one untimed warm-up run per code).

``notebook``: one Jupyter kernel per code (jupyter_client; the kernel's ``pipeline`` from that code),
cells timed inside the kernel: ``import pipeline``, the first ``pl.query`` (TEXT), a second one (TEXT2:
another text, the same data set and export), the first and a second ``pl.answer`` of the query set.

Each code runs with a PIPELINE_HOME of its own (a temporary folder), so one never reads what the other
wrote; ``--pair-cache`` shares one pair cache (the export's index and relation pairs, whose files the
codes write alike) where building it per code would cost minutes and gigabytes.

``profile``: each command once under cProfile in a fresh process per code: the cumulative seconds of the
functions where a fresh process spends its time (imports, loading the data set, its version key, the
graph's or the export's index, answering, printing), and ``python -X importtime``'s sum over the modules
the floor does not import.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FLOOR = "import torch, pandas, pyarrow"
_CLI = "import sys; from pipeline.cli import main; sys.argv[0] = 'pipeline'; main()"
TEXTS = {
    "ppi5k": ("binding(394.NGR_c00010, ?x) & activation(?x, ?y)", "expression(?y, 394.NGR_c11940, 0.2) & binding(?y, ?x, 0.3)"),
    "cn15k": ("isa(dog, ?x) & atlocation(?x, ?y)", "capableof(cat, ?y) | hasa(animal, ?y, 0.3)"),
}
# (label, qualified function name as cProfile prints it: file suffix, function) of each source of cost
STAGES = [
    ("load the data set (md5s, parse or read back)", ("loaders/base.py", "loaders/parsed.py"), "load_dataset"),
    ("the data-version key", "pipeline/store/ingest.py", "content_key"),
    ("the observed graph's index", "pipeline/methods/src/method.py", "over"),
    ("the export's index (manifest, map, checks)", "pipeline/formats/engine_index.py", "load_engine_index"),
    ("the query set read", "pipeline/formats/queryset.py", "read_query_set"),
    ("answering (engine, rows)", "pipeline/stages/answer.py", "answer_query_set"),
    ("the answers file written", "pipeline/formats/answers.py", "write_answers"),
    ("the query answered (engine)", "pipeline/methods/src/method.py", "search"),
]


PAIR_CACHE: str | None = None  # --pair-cache: one pair cache for every code (its files' format is shared)


def _env(root: Path, home: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "PIPELINE_HOME": home, **({"PIPELINE_PAIR_CACHE": PAIR_CACHE} if PAIR_CACHE else {})}


def commands(args: argparse.Namespace, out: Path) -> dict[str, list[str]]:
    text = args.text or TEXTS[args.dataset][0]
    cmds = {"query graph test": ["query", text, "--dataset", args.dataset, "--graph", "test", "--json"]}
    if args.export:
        cmds["query export"] = ["query", text, "--dataset", args.dataset, "--adjacency", args.export, "--json"]
    if args.queries and args.export:
        cmds["answer"] = ["answer", args.queries, "--adjacency", args.export, "--workers", "1", "--json",
                          "--out", str(out)]
    return cmds


ABORTS: dict[str, int] = {}  # commands that died by a signal (then run again), by code root


CPU: dict[str, float] = {"last": 0.0}  # CPU seconds (user + system) of the last command run


def run(root: Path, home: str, argv: list[str]) -> tuple[float, dict[str, Any] | None]:
    import resource

    for _ in range(3):  # a process that dies by a signal (an abort at its end) is counted and run again
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=root, env=_env(root, home), capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        CPU["last"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode >= 0:
            break
        ABORTS[str(root)] = ABORTS.get(str(root), 0) + 1
        print(f"{root}: {' '.join(argv[3:5])}... died by signal {-proc.returncode}: "
              f"{proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv[:4])}...: {proc.stderr.strip().splitlines()[-1:]} (exit {proc.returncode})")
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip().startswith(("{", "[")) else None
    except ValueError:
        doc = None
    return wall, doc if isinstance(doc, dict) else None


def fresh(args: argparse.Namespace, codes: dict[str, Path], homes: dict[str, str]) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="bench-door-"))
    cmds = commands(args, out)
    for code, root in codes.items():  # the warm-up: what the first command after export writes
        for argv in cmds.values():
            run(root, homes[code], [sys.executable, "-c", _CLI, *argv])
    walls: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    fixed: dict[str, list[float]] = {}
    for r in range(args.rounds):
        floor, _ = run(REPO, homes["this"], [sys.executable, "-c", FLOOR])
        walls.setdefault(("floor", ""), []).append(floor)
        cpus.setdefault(("floor", ""), []).append(CPU["last"])
        order = list(codes.items()) if r % 2 == 0 else list(codes.items())[::-1]
        for label, argv in cmds.items():
            for code, root in order:
                wall, doc = run(root, homes[code], [sys.executable, "-c", _CLI, *argv])
                walls.setdefault((label, code), []).append(wall)
                cpus.setdefault((label, code), []).append(CPU["last"])
                if label == "answer" and doc is not None:
                    fixed.setdefault(code, []).append(wall - float(doc["seconds"]))
        print(f"round {r + 1}: floor {floor:.2f} s, " + ", ".join(
            f"{k[0]} ({k[1]}) {v[-1]:.2f}" for k, v in walls.items() if k[0] != "floor"), file=sys.stderr)
    base = min(walls[("floor", "")])
    cbase = min(cpus[("floor", "")])
    rows = [{"command": "floor: python -c \"import torch, pandas, pyarrow\"", "code": "", "min wall s": round(base, 2),
             "above floor s": 0.0, "min CPU s": round(cbase, 2), "CPU above floor s": 0.0,
             "walls": [round(w, 2) for w in walls[("floor", "")]]}]
    for (label, code), ws in walls.items():
        if label == "floor":
            continue
        cs = cpus[(label, code)]
        row = {"command": f"pipeline {label}", "code": code, "min wall s": round(min(ws), 2),
               "above floor s": round(min(ws) - base, 2), "min CPU s": round(min(cs), 2),
               "CPU above floor s": round(min(cs) - cbase, 2), "walls": [round(w, 2) for w in ws]}
        if label == "answer" and code in fixed:
            row["fixed s (wall - answering)"] = round(min(fixed[code]), 2)
            row["fixed above floor s"] = round(min(fixed[code]) - base, 2)
        rows.append(row)
    return {"rows": rows}


KERNEL_CELLS = """
import time as _t
_t0 = _t.perf_counter(); import pipeline as pl; _imp = _t.perf_counter() - _t0
def _time(f):
    t = _t.perf_counter(); f(); return round(_t.perf_counter() - t, 4)
_res = dict(import_s=round(_imp, 3))
if {export!r}:
    _res["query_export_first_s"] = _time(lambda: pl.query({text!r}, dataset={dataset!r}, adjacency={export!r}, top=20))
    _res["query_export_second_s"] = _time(lambda: pl.query({text2!r}, dataset={dataset!r}, adjacency={export!r}, top=20))
_res["query_graph_first_s"] = _time(lambda: pl.query({text!r}, dataset={dataset!r}, graph="test", top=20))
_res["query_graph_second_s"] = _time(lambda: pl.query({text2!r}, dataset={dataset!r}, graph="test", top=20))
if {queries!r} and {export!r}:
    _res["answer_first_s"] = _time(lambda: pl.answer({queries!r}, adjacency={export!r}, out={out!r}, workers=1, quiet=True))
    _res["answer_second_s"] = _time(lambda: pl.answer({queries!r}, adjacency={export!r}, out={out!r}, workers=1, quiet=True))
import json as _j; print(_j.dumps(_res))
"""


def notebook(args: argparse.Namespace, codes: dict[str, Path], homes: dict[str, str]) -> dict[str, Any]:
    from jupyter_client.manager import start_new_kernel

    got = {}
    text, text2 = (args.text or TEXTS[args.dataset][0]), (args.text2 or TEXTS[args.dataset][1])
    for code, root in codes.items():
        best: dict[str, float] = {}
        for _ in range(args.rounds):
            km, kc = start_new_kernel(kernel_name="python3", env=_env(root, homes[code]), cwd=str(root))
            try:
                lines: list[str] = []
                cell = KERNEL_CELLS.format(text=text, text2=text2, dataset=args.dataset, export=args.export,
                                           queries=args.queries, out=tempfile.mkdtemp(prefix="bench-door-nb-"))
                reply = kc.execute_interactive(cell, timeout=600, output_hook=functools.partial(_collect, lines=lines))
                if reply["content"]["status"] != "ok":
                    raise SystemExit(f"kernel ({code}): {reply['content'].get('evalue')}")
                doc = json.loads([x for x in lines if x.startswith("{")][-1])
            finally:
                kc.stop_channels()
                km.shutdown_kernel(now=True)
            for k, v in doc.items():
                best[k] = min(best.get(k, v), v)
        got[code] = best
        print(f"notebook ({code}): {best}", file=sys.stderr)
    return got


def _collect(msg: dict[str, Any], lines: list[str]) -> None:
    if msg["msg_type"] == "stream":
        lines.extend(msg["content"]["text"].splitlines())


def profile(args: argparse.Namespace, codes: dict[str, Path], homes: dict[str, str]) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="bench-door-prof-"))
    got: dict[str, Any] = {}
    floor = _imports([sys.executable, "-X", "importtime", "-c", FLOOR], REPO, homes["this"])
    for label, argv in commands(args, out).items():
        for code, root in codes.items():
            prof = out / f"{label.replace(' ', '_')}-{code}.prof"
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"import cProfile; cProfile.run({_CLI!r}, {str(prof)!r})", *argv],
                           cwd=root, env=_env(root, homes[code]), capture_output=True, text=True, check=True)
            wall = time.perf_counter() - t0
            mods = _imports([sys.executable, "-X", "importtime", "-c", _CLI, *argv], root, homes[code])
            extra = {m: s for m, s in mods.items() if m not in floor}
            got[f"{label} ({code})"] = {"wall under cProfile s": round(wall, 2), **_stages(prof),
                                        "imports beyond the floor s (importtime, self)": round(sum(extra.values()) / 1e6, 3),
                                        "modules beyond the floor": len(extra)}
    return got


def _imports(argv: list[str], root: Path, home: str) -> dict[str, int]:
    proc = subprocess.run(argv, cwd=root, env=_env(root, home), capture_output=True, text=True)
    mods = {}
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            parts = line[len("import time:"):].split("|")
            if parts[0].strip().isdigit():
                mods[parts[2].strip()] = int(parts[0])
    return mods


def _stages(prof: Path) -> dict[str, float]:
    import pstats

    st = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    out = {}
    for label, suffix, fn in STAGES:
        cum = [v[3] for (file, _, name), v in st.items() if name == fn and file.endswith(suffix)]
        if cum:
            out[label] = round(max(cum), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ppi5k")
    ap.add_argument("--export", default=None, help="a neural adjacency export of the data set")
    ap.add_argument("--queries", default=None, help="a query set answered by `pipeline answer`")
    ap.add_argument("--text", default=None)
    ap.add_argument("--text2", default=None, help="the notebook's second query")
    ap.add_argument("--baseline-root", default=None, help="another checkout (e.g. the code before), run alternately")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", default="fresh,notebook,profile")
    ap.add_argument("--pair-cache", default=None, help="one pair cache folder for every code (CN15k's index and "
                    "pairs are gigabytes: built once, not once per code)")
    ap.add_argument("--json", dest="json_out", default=None)
    args = ap.parse_args()
    global PAIR_CACHE
    PAIR_CACHE = str(Path(args.pair_cache).resolve()) if args.pair_cache else None
    if args.export:
        args.export = str(Path(args.export).resolve())
    if args.queries:
        args.queries = str(Path(args.queries).resolve())
    codes = {"this": REPO}
    if args.baseline_root:
        codes["before"] = Path(args.baseline_root).resolve()
    # each code its own PIPELINE_HOME (parsed data sets, pair cache), so one never reads what the other wrote
    homes = {code: tempfile.mkdtemp(prefix=f"bench-door-home-{code}-") for code in codes}
    report: dict[str, Any] = {"machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores",
                              "date": datetime.now(timezone.utc).isoformat(timespec="minutes"),
                              "load_before": os.getloadavg()[0], "dataset": args.dataset}
    parts = args.parts.split(",")
    if "fresh" in parts:
        report["fresh"] = fresh(args, codes, homes)
    if "notebook" in parts:
        report["notebook"] = notebook(args, codes, homes)
    if "profile" in parts:
        report["profile"] = profile(args, codes, homes)
    report["load_after"] = os.getloadavg()[0]
    report["aborts"] = {code: ABORTS.get(str(root), 0) for code, root in codes.items()}
    print(f"# {report['machine']}, {report['date']}, load average {report['load_before']:.1f} -> {report['load_after']:.1f}; "
          f"commands that died by a signal and ran again: {report['aborts']}")
    if "fresh" in report:
        rows = report["fresh"]["rows"]
        cols = ["command", "code", "min wall s", "above floor s", "min CPU s", "CPU above floor s",
                "fixed s (wall - answering)", "fixed above floor s", "walls"]
        print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
        for r in rows:
            print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    if "notebook" in report:
        keys = sorted({k for v in report["notebook"].values() for k in v})
        print("\n| notebook cell | " + " | ".join(report["notebook"]) + " |\n|---|" + "---|" * len(report["notebook"]))
        for k in keys:
            print(f"| {k} | " + " | ".join(str(v.get(k, "")) for v in report["notebook"].values()) + " |")
    if "profile" in report:
        cells = report["profile"]
        keys = [k for k in dict.fromkeys(k for v in cells.values() for k in v)]
        print("\n| source of cost (s, cProfile cumulative) | " + " | ".join(cells) + " |\n|---|" + "---|" * len(cells))
        for k in keys:
            print(f"| {k} | " + " | ".join(str(v.get(k, "")) for v in cells.values()) + " |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
