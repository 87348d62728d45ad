"""Speed at the door: what a person meets around the engine, in fresh processes and in a notebook."""

from __future__ import annotations

import functools
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchmarkError, Goal, Result, Table, benchmark, progress, say
from benchmarks.processes import CLI, ROOT, env

FLOOR = "import torch, pandas, pyarrow"
TEXTS = {
    "ppi5k": (
        "binding(394.NGR_c00010, ?x) & activation(?x, ?y)",
        "expression(?y, 394.NGR_c11940, 0.2) & binding(?y, ?x, 0.3)",
    ),
    "cn15k": ("isa(dog, ?x) & atlocation(?x, ?y)", "capableof(cat, ?y) | hasa(animal, ?y, 0.3)"),
}
# (label, file suffix(es), function) of each source of cost, as cProfile names them
STAGES = [
    (
        "load the data set (md5s, parse or read back)",
        ("loaders/base.py", "loaders/parsed.py"),
        "load_dataset",
    ),
    ("the data-version key", "pipeline/store/ingest.py", "content_key"),
    ("the observed graph's index", "pipeline/methods/src/method.py", "over"),
    ("the export's index (manifest, map, checks)", "pipeline/formats/engine_index.py", "load_engine_index"),
    ("the query set read", "pipeline/formats/queryset.py", "read_query_set"),
    ("answering (engine, rows)", "pipeline/stages/answer.py", "answer_query_set"),
    ("the answers file written", "pipeline/formats/answers.py", "write_answers"),
    ("the query answered (engine)", "pipeline/methods/src/method.py", "search"),
]
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


@dataclass
class Door:
    """One run's settings: the codes compared (this checkout, and the code before a change), each with a
    PIPELINE_HOME of its own so one never reads what the other wrote."""

    dataset: str
    export: str | None
    queries: str | None
    text: str
    text2: str
    codes: dict[str, Path]
    homes: dict[str, str]
    pair_cache: str | None
    aborts: dict[str, int] = field(default_factory=dict)

    def env(self, code: str) -> dict[str, str]:
        return env(
            self.codes[code],
            PIPELINE_HOME=self.homes[code],
            **({"PIPELINE_PAIR_CACHE": self.pair_cache} if self.pair_cache else {}),
        )

    def commands(self, out: Path) -> dict[str, list[str]]:
        cmds = {
            "query graph test": ["query", self.text, "--dataset", self.dataset, "--graph", "test", "--json"]
        }
        if self.export:
            cmds["query export"] = [
                "query",
                self.text,
                "--dataset",
                self.dataset,
                "--adjacency",
                self.export,
                "--json",
            ]
        if self.queries and self.export:
            cmds["answer"] = [
                "answer",
                self.queries,
                "--adjacency",
                self.export,
                "--workers",
                "1",
                "--json",
                "--out",
                str(out),
            ]
        return cmds

    def run(self, code: str, argv: list[str]) -> tuple[float, float, dict[str, Any] | None]:
        """(wall s, CPU s of the process, its --json document) of a fresh process; a process that dies by a
        signal (an abort at its end) is counted and run again."""
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            proc = subprocess.run(
                argv, cwd=self.codes[code], env=self.env(code), capture_output=True, text=True
            )
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if proc.returncode >= 0:
                break
            self.aborts[code] = self.aborts.get(code, 0) + 1
            say(f"{code}: {' '.join(argv[3:5])}... died by signal {-proc.returncode}")
        if proc.returncode:
            raise BenchmarkError(
                f"{' '.join(argv[3:5])}...: {proc.stderr.strip().splitlines()[-1:]} (exit {proc.returncode})"
            )
        try:
            doc = json.loads(proc.stdout) if proc.stdout.strip().startswith(("{", "[")) else None
        except ValueError:
            doc = None
        return wall, cpu, doc if isinstance(doc, dict) else None


def fresh(d: Door, rounds: int) -> list[list[Any]]:
    """Each round: the floor, then each command of each code, alternately; minima over the rounds."""
    out = Path(tempfile.mkdtemp(prefix="bench-door-"))
    cmds = d.commands(out)
    for code in d.codes:  # the warm-up: what the first command after export writes
        for argv in cmds.values():
            d.run(code, [sys.executable, "-c", CLI, *argv])
    walls: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    fixed: dict[str, list[float]] = {}
    with progress(rounds, "door: fresh processes", "round") as bar:
        for r in range(rounds):
            wall, cpu, _ = d.run("this", [sys.executable, "-c", FLOOR])
            walls.setdefault(("floor", ""), []).append(wall)
            cpus.setdefault(("floor", ""), []).append(cpu)
            order = list(d.codes) if r % 2 == 0 else list(d.codes)[::-1]
            for label, argv in cmds.items():
                for code in order:
                    wall, cpu, doc = d.run(code, [sys.executable, "-c", CLI, *argv])
                    walls.setdefault((label, code), []).append(wall)
                    cpus.setdefault((label, code), []).append(cpu)
                    if label == "answer" and doc is not None:
                        fixed.setdefault(code, []).append(wall - float(doc["seconds"]))
            bar.update(1)
    base, cbase = min(walls[("floor", "")]), min(cpus[("floor", "")])
    rows = [[f'floor: python -c "{FLOOR}"', "", base, 0.0, cbase, 0.0, None, None]]
    for (label, code), ws in walls.items():
        if label == "floor":
            continue
        cs = cpus[(label, code)]
        f = min(fixed[code]) if label == "answer" and code in fixed else None
        rows.append(
            [
                f"pipeline {label}",
                code,
                min(ws),
                min(ws) - base,
                min(cs),
                min(cs) - cbase,
                f,
                None if f is None else f - base,
            ]
        )
    return rows


def notebook(d: Door, rounds: int) -> dict[str, dict[str, float]]:
    """One Jupyter kernel per code and round, cells timed inside it; minima over the rounds."""
    from jupyter_client.manager import start_new_kernel

    got = {}
    for code, root in d.codes.items():
        best: dict[str, float] = {}
        for _ in range(rounds):
            km, kc = start_new_kernel(kernel_name="python3", env=d.env(code), cwd=str(root))
            try:
                lines: list[str] = []
                cell = KERNEL_CELLS.format(
                    text=d.text,
                    text2=d.text2,
                    dataset=d.dataset,
                    export=d.export,
                    queries=d.queries,
                    out=tempfile.mkdtemp(prefix="bench-door-nb-"),
                )
                reply = kc.execute_interactive(
                    cell, timeout=600, output_hook=functools.partial(_collect, lines=lines)
                )
                if reply["content"]["status"] != "ok":
                    raise BenchmarkError(f"kernel ({code}): {reply['content'].get('evalue')}")
                doc = json.loads([x for x in lines if x.startswith("{")][-1])
            finally:
                kc.stop_channels()
                km.shutdown_kernel(now=True)
            for k, v in doc.items():
                best[k] = min(best.get(k, v), v)
        got[code] = best
    return got


def _collect(msg: dict[str, Any], lines: list[str]) -> None:
    if msg["msg_type"] == "stream":
        lines.extend(msg["content"]["text"].splitlines())


def profile(d: Door) -> dict[str, dict[str, float]]:
    """Each command once under cProfile per code: cumulative seconds of the sources of cost, and
    ``-X importtime``'s sum over the modules the floor does not import."""
    out = Path(tempfile.mkdtemp(prefix="bench-door-prof-"))
    got: dict[str, dict[str, float]] = {}
    floor = _imports([sys.executable, "-X", "importtime", "-c", FLOOR], d, "this")
    for label, argv in d.commands(out).items():
        for code in d.codes:
            prof = out / f"{label.replace(' ', '_')}-{code}.prof"
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", f"import cProfile; cProfile.run({CLI!r}, {str(prof)!r})", *argv],
                cwd=d.codes[code],
                env=d.env(code),
                capture_output=True,
                text=True,
                check=True,
            )
            wall = time.perf_counter() - t0
            mods = _imports([sys.executable, "-X", "importtime", "-c", CLI, *argv], d, code)
            extra = {m: s for m, s in mods.items() if m not in floor}
            got[f"{label} ({code})"] = {
                "wall under cProfile": wall,
                **_stages(prof),
                "imports beyond the floor (importtime, self)": sum(extra.values()) / 1e6,
                "modules beyond the floor": len(extra),
            }
    return got


def _imports(argv: list[str], d: Door, code: str) -> dict[str, int]:
    proc = subprocess.run(argv, cwd=d.codes[code], env=d.env(code), capture_output=True, text=True)
    mods = {}
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            parts = line[len("import time:") :].split("|")
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
            out[label] = max(cum)
    return out


@benchmark(
    "door",
    title="Speed at the door",
    goals=[
        Goal(
            "ppi5k_query_above_floor",
            "PPI5k: a fresh pipeline query above the floor (the slower of graph and export)",
            "<=",
            0.5,
            "s",
        ),
        Goal(
            "cn15k_query_above_floor",
            "CN15k: a fresh pipeline query above the floor (the slower)",
            "<=",
            1.5,
            "s",
        ),
        Goal(
            "answer_fixed_above_floor",
            "a fresh pipeline answer's fixed costs (wall - answering) above the floor",
            "<=",
            0.5,
            "s",
        ),
        Goal("ppi5k_second_query_s", "PPI5k: a notebook's second pl.query over the export", "<=", 0.1, "s"),
    ],
    quick={"rounds": 1, "parts": ("fresh",)},
)
def door(
    *,
    dataset: str = "ppi5k",
    export: Path | None = None,
    queries: Path | None = None,
    text: str | None = None,
    text2: str | None = None,
    baseline_root: Path | None = None,
    rounds: int = 3,
    parts: tuple[str, ...] = ("fresh", "notebook", "profile"),
    pair_cache: Path | None = None,
) -> Result:
    """``fresh``: each round runs the floor any torch tool pays (``python -c "import torch, pandas, pyarrow"``),
    then ``pipeline query`` over the observed test graph and over ``--export``, and ``pipeline answer
    --queries --workers 1``, each a new process, for this checkout and the code at ``--baseline-root``
    alternately; the minimum over rounds of wall and CPU seconds, and those minus the floor's; ``pipeline
    answer``'s fixed costs are its wall minus its answering seconds. Each command's cache state is the second
    command after ``pipeline export`` (an untimed warm-up per code). ``notebook``: cells timed inside a real
    Jupyter kernel per code and round: the first and a second ``pl.query`` (another text), the first and a
    second ``pl.answer``. ``profile``: each command once under cProfile per code, where its time goes.
    ``--pair-cache`` shares one pair cache between the codes (CN15k's is gigabytes)."""
    if dataset not in TEXTS and not (text and text2):
        raise BenchmarkError(f"--dataset {dataset}: give --text and --text2 (queries over its relations)")
    codes = {"this": ROOT} | ({"before": Path(baseline_root).resolve()} if baseline_root else {})
    d = Door(
        dataset,
        str(Path(export).resolve()) if export else None,
        str(Path(queries).resolve()) if queries else None,
        text or TEXTS[dataset][0],
        text2 or TEXTS[dataset][1],
        codes,
        {code: tempfile.mkdtemp(prefix=f"bench-door-home-{code}-") for code in codes},
        str(Path(pair_cache).resolve()) if pair_cache else None,
    )
    tables, measured = [], {}
    if "fresh" in parts:
        rows = fresh(d, rounds)
        seconds = ["min wall s", "above floor s", "min CPU s", "CPU above floor s",
                   "fixed costs s (wall - answering)", "fixed above floor s"]
        tables.append(
            Table(
                ["command", "code", *seconds],
                rows,
                title=f"Fresh processes ({dataset}), minima of {rounds} rounds",
                formats=dict.fromkeys(seconds, ".2f"),
            )
        )
        mine = [r for r in rows if r[1] == "this"]
        queries_above = [r[3] for r in mine if r[0].startswith("pipeline query")]
        if queries_above and dataset in ("ppi5k", "cn15k"):
            measured[f"{dataset}_query_above_floor"] = max(queries_above)
        fixed = [r[7] for r in mine if r[7] is not None]
        if fixed:
            measured["answer_fixed_above_floor"] = fixed[0]
    if "notebook" in parts:
        nb = notebook(d, rounds)
        keys = sorted({k for v in nb.values() for k in v})
        tables.append(
            Table(
                ["notebook cell s", *nb],
                [[k, *(v.get(k) for v in nb.values())] for k in keys],
                title=f"A notebook, one kernel per code, minima of {rounds}",
            )
        )
        if dataset == "ppi5k" and "query_export_second_s" in nb["this"]:
            measured["ppi5k_second_query_s"] = nb["this"]["query_export_second_s"]
    if "profile" in parts:
        cells = profile(d)
        keys = list(dict.fromkeys(k for v in cells.values() for k in v))
        tables.append(
            Table(
                ["source of cost (s, cProfile cumulative)", *cells],
                [[k, *(v.get(k) for v in cells.values())] for k in keys],
                title="Where the time goes",
            )
        )
    notes = [f"Commands that died by a signal and ran again: {d.aborts}."] if d.aborts else []
    return Result(tables, measured, notes)
