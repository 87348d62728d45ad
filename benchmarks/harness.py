"""The suite's harness: named benchmarks with their goals, the machine each ran on, and the one JSON file the
pages render from.

A benchmark is a function registered with :func:`benchmark`: keyword options with defaults (the runner turns
them into ``--options``), a :class:`Result` back (tables of raw values, the figures its goals read), goals
stated as a number and a direction (:class:`Goal`), and a quick size (option overrides that finish in
seconds). The runner (``python -m benchmarks``) calls it, adds what it ran on (:func:`machine`), the command
and the date, and merges the record into ``docs/benchmarks.json`` under the benchmark's name (or
``NAME.LABEL``), leaving every other record as it was. ``benchmarks/render.py`` turns a record into the
Markdown that the pages show and the runner prints.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import os
import pkgutil
import platform
import sys
import tempfile
import typing
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "docs" / "benchmarks.json"
FORMAT = 1
# modules of the package that hold no benchmark: the runner, this harness, the renderer, shared helpers
SUPPORT = {"__main__", "harness", "render", "processes", "queries"}
# the runner's own flags (python -m benchmarks run ... --quick --json F --label L): no benchmark option
RUNNER_FLAGS = {"quick", "json", "label"}


class BenchmarkError(Exception):
    """A benchmark cannot run as asked (a missing input, a missing optional package): one line for a user."""


@dataclass(frozen=True)
class Goal:
    """A goal: ``key`` names the figure of :attr:`Result.measured` it reads; met if ``value direction target``."""

    key: str
    text: str
    direction: Literal[">=", "<="]
    target: float
    unit: str = ""

    def met(self, value: float | None) -> bool | None:
        if value is None:
            return None
        return value >= self.target if self.direction == ">=" else value <= self.target

    def as_dict(self, value: float | None) -> dict[str, Any]:
        return {
            "key": self.key,
            "text": self.text,
            "direction": self.direction,
            "target": self.target,
            "unit": self.unit,
            "value": value,
            "met": self.met(value),
        }


@dataclass
class Table:
    """Rows of raw values (numbers, text, None for "not measured"); ``formats`` maps a column to the format
    spec of its numbers (default: see render.cell)."""

    columns: list[str]
    rows: list[list[Any]]
    title: str = ""
    formats: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(
                    f"table {self.title!r}: a row of {len(row)} cells for {len(self.columns)} columns"
                )
        return {"title": self.title, "columns": self.columns, "formats": self.formats, "rows": self.rows}


@dataclass
class Result:
    """What a benchmark returns: its tables, the figures its goals read (by goal key; None = not measured
    here), and notes (one line each) that a reader needs beside the tables."""

    tables: list[Table]
    measured: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Benchmark:
    name: str
    fn: Callable[..., Result]
    title: str
    goals: tuple[Goal, ...]
    quick: dict[str, Any]

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.fn) or ""

    def options(self) -> dict[str, inspect.Parameter]:
        return dict(inspect.signature(self.fn).parameters)

    def types(self) -> dict[str, Any]:
        return typing.get_type_hints(self.fn)


REGISTRY: dict[str, Benchmark] = {}


def benchmark(
    name: str, *, title: str, goals: list[Goal], quick: dict[str, Any] | None = None
) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Register the decorated function as the benchmark ``name`` (keyword-only options with defaults, or
    without a default where the user must give the input)."""

    def register(fn: Callable[..., Result]) -> Callable[..., Result]:
        if name in REGISTRY and REGISTRY[name].fn is not fn:
            raise ValueError(f"benchmark {name!r} is registered twice")
        for p in inspect.signature(fn).parameters.values():
            if p.kind is not inspect.Parameter.KEYWORD_ONLY:
                raise TypeError(f"benchmark {name!r}: option {p.name!r} must be keyword-only")
            if p.name in RUNNER_FLAGS:
                raise TypeError(f"benchmark {name!r}: option {p.name!r} is the runner's own flag")
        unknown = set(quick or {}) - set(inspect.signature(fn).parameters)
        if unknown:
            raise TypeError(f"benchmark {name!r}: quick names no option {sorted(unknown)}")
        REGISTRY[name] = Benchmark(name, fn, title, tuple(goals), dict(quick or {}))
        return fn

    return register


def discover() -> dict[str, Benchmark]:
    """Import every benchmark module of this package; the registry, by name."""
    folder = Path(__file__).parent
    for info in pkgutil.iter_modules([str(folder)]):
        if info.name not in SUPPORT:
            importlib.import_module(f"benchmarks.{info.name}")
    return dict(sorted(REGISTRY.items()))


def machine() -> dict[str, Any]:
    """What this process runs on: cores it may use, the CPU's model, memory, OS, Python, torch, the GPU
    (None without CUDA) and the 1-minute load average now."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpu = platform.processor() or ""
    mem = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    torch_version, gpu = None, None
    try:
        import torch

        torch_version = torch.__version__
        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return {
        "cores": cores,
        "cpu": cpu,
        "arch": platform.machine(),
        "memory_gib": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": torch_version,
        "gpu": gpu,
        "load": [round(os.getloadavg()[0], 2)],
    }


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def make_record(
    bench: Benchmark,
    result: Result,
    *,
    command: str,
    options: dict[str, Any],
    quick: bool,
    host: dict[str, Any],
    date: str,
    seconds: float | None,
    source: str = "measured",
) -> dict[str, Any]:
    """The JSON record of one run: the same shape for every benchmark, measured or transcribed."""
    unknown = set(result.measured) - {g.key for g in bench.goals}
    if unknown:
        raise ValueError(f"benchmark {bench.name!r} measured figures no goal reads: {sorted(unknown)}")
    return {
        "benchmark": bench.name,
        "title": bench.title,
        "command": command,
        "options": {k: _plain(v) for k, v in options.items()},
        "quick": quick,
        "source": source,
        "date": date,
        "machine": host,
        "seconds": None if seconds is None else round(seconds, 1),
        "goals": [g.as_dict(_plain(result.measured.get(g.key))) for g in bench.goals],
        "tables": [_plain(t.as_dict()) for t in result.tables],
        "notes": list(result.notes),
    }


def _plain(value: Any) -> Any:
    """A value as JSON holds it: paths as text, tuples as lists, a float that is not finite as None (JSON
    has no NaN), numpy scalars as Python numbers."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read(path: Path = DEFAULT_JSON) -> dict[str, Any]:
    """The benchmarks file: ``{"format": 1, "benchmarks": {key: record}}`` (empty when missing)."""
    if not path.exists():
        return {"format": FORMAT, "benchmarks": {}}
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("format") != FORMAT:
        raise BenchmarkError(f"{path}: format {doc.get('format')!r}, this code reads format {FORMAT}")
    return doc


def merge(path: Path, key: str, record: dict[str, Any]) -> None:
    """Put ``record`` under ``key`` in the file at ``path``; every other record stays byte for byte."""
    from pipeline.core.atomic import exclusive, write_text

    lock = (
        Path(tempfile.gettempdir()) / f"benchmarks-json-{zlib.crc32(str(path.resolve()).encode()):08x}.lock"
    )
    with exclusive(lock, f"another benchmark writing {path}"):
        doc = read(path)
        doc["benchmarks"][key] = record
        doc["benchmarks"] = dict(sorted(doc["benchmarks"].items()))
        write_text(path, dumps(doc))


def dumps(doc: Any) -> str:
    """JSON with one line per table row (and per list of plain values): a diff shows the rows that moved."""
    return _pretty(doc, 0) + "\n"


def _pretty(obj: Any, depth: int) -> str:
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{inner}{json.dumps(k)}: {_pretty(v, depth + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(not isinstance(x, (dict, list)) for x in obj):
            return json.dumps(obj, ensure_ascii=False)
        return "[\n" + ",\n".join(inner + _pretty(x, depth + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


@contextmanager
def progress(total: int | None, desc: str, unit: str = "it") -> Iterator[Any]:
    """A progress bar for a benchmark's long loop, drawn as every stage of the pipeline draws its own."""
    from pipeline.core.progress import output

    with output(True).bar(total=total, desc=desc, unit=unit) as bar:
        yield bar


def say(line: str) -> None:
    """A line of what the benchmark is doing, on stderr (stdout holds the rendered result)."""
    print(line, file=sys.stderr, flush=True)
