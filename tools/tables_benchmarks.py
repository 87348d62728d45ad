"""The tables of docs/benchmarks.md, from docs/benchmarks.json (written by ``python -m benchmarks run``).

``benchmarks.goals``: every goal against its current figure; ``benchmarks.KEY``: one record (a benchmark's
name, or ``NAME.LABEL``) with its command, machine and date in one line, its goals, its tables. The Markdown
is the runner's own (benchmarks/render.py, loaded by path: no torch, no pipeline import).
"""

from __future__ import annotations

import importlib.util
import json
import re
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = "benchmarks.json"
PAGE = "benchmarks.md"  # the page of the goals' table: links to the other pages are relative to it
MARKER = re.compile(r"^<!-- table benchmarks\.(?!goals )([A-Za-z0-9_.\-]+) -->$", re.M)


def _render():
    spec = importlib.util.spec_from_file_location("_benchmarks_render", ROOT / "benchmarks" / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render = _render()


def _doc(docs: Path) -> dict:
    return json.loads((docs / FILE).read_text(encoding="utf-8"))


def pages_of(docs: Path) -> dict[str, str]:
    """Each record's page: the first page of ``docs`` whose generated block shows it."""
    found: dict[str, str] = {}
    for path in sorted(docs.rglob("*.md")):
        for m in MARKER.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(m.group(1), path.relative_to(docs).as_posix())
    return found


def goals(docs: Path) -> str:
    """The goals' table of benchmarks.md, each record's tables linked where they are shown."""
    where = {
        key: "below" if page == PAGE else f"[{Path(page).stem}]({page})"
        for key, page in pages_of(docs).items()
    }
    return render.goals(_doc(docs), where)


def record(key: str, docs: Path) -> str:
    """One record without its goals (the goals' table of benchmarks.md holds them)."""
    records = _doc(docs)["benchmarks"]
    if key not in records:
        raise KeyError(f"{docs / FILE} holds no record {key!r} (python -m benchmarks run writes it)")
    return render.record(records[key], with_goals=False)


def tables(docs: Path = ROOT / "docs") -> dict:
    """One table per record of the data file, and the goals table."""
    keys = _doc(docs)["benchmarks"] if (docs / FILE).exists() else {}
    return {"benchmarks.goals": goals, **{f"benchmarks.{k}": partial(record, k) for k in keys}}


TABLES = tables()
