"""The documentation's tables, regenerated from the measured data they show.

A page holds a generated table between two markers; nothing between them is written by hand::

    <!-- table results.main -->
    | ... the rendered table ... |
    <!-- /table -->

Each ``tools/tables_*.py`` module defines ``TABLES``, a dict from a table's name to a function that takes the
docs folder and returns the table's Markdown, read from the JSON files that the measuring commands wrote.

    python tools/pages.py            rewrite every generated block of docs/
    python tools/pages.py --check    rewrite nothing; name each block that differs and exit 1

A marker naming no known table, or a block left open, is an error naming the page and line.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs"
OPEN = re.compile(r"^<!-- table ([A-Za-z0-9_.\-]+) -->$")
CLOSE = "<!-- /table -->"

Renderer = Callable[[Path], str]


class PageError(Exception):
    """A page's markers are wrong: names the page and line."""


def renderers(folder: Path = HERE) -> dict[str, Renderer]:
    """Every table of every ``tables_*.py`` module beside this file, by name (a name defined twice is an error)."""
    found: dict[str, Renderer] = {}
    for path in sorted(folder.glob("tables_*.py")):
        spec = importlib.util.spec_from_file_location(f"_pages_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, fn in getattr(module, "TABLES", {}).items():
            if name in found:
                raise PageError(f"{path.name}: table {name!r} is defined twice")
            found[name] = fn
    return found


def render_page(text: str, tables: dict[str, Renderer], docs: Path, page: str = "<page>") -> tuple[str, list[str]]:
    """``text`` with every block between markers replaced by its table; also the names of the blocks that changed."""
    out: list[str] = []
    changed: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = OPEN.match(line.strip())
        if m is None:
            if line.strip() == CLOSE:
                raise PageError(f"{page}:{i + 1}: '{CLOSE}' closes no open table")
            i += 1
            continue
        name, start = m.group(1), i
        if name not in tables:
            known = ", ".join(sorted(tables)) or "none"
            raise PageError(f"{page}:{i + 1}: no table named {name!r} (known: {known})")
        j = i + 1
        while j < len(lines) and lines[j].strip() != CLOSE:
            if OPEN.match(lines[j].strip()):
                raise PageError(f"{page}:{j + 1}: a table opens inside table {name!r} (opened at line {start + 1})")
            j += 1
        if j == len(lines):
            raise PageError(f"{page}:{start + 1}: table {name!r} is never closed with '{CLOSE}'")
        new = tables[name](docs).strip("\n").split("\n")
        if lines[i + 1 : j] != new:
            changed.append(name)
        out.extend(new)
        out.append(lines[j])
        i = j + 1
    return "\n".join(out), changed


def regenerate(docs: Path = DOCS, check: bool = False, tables: dict[str, Renderer] | None = None) -> list[str]:
    """Render every page of ``docs``; return ``page: table`` for each block that differed (written unless check)."""
    tables = renderers() if tables is None else tables
    stale: list[str] = []
    for path in sorted(docs.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if "<!-- table " not in text and CLOSE not in text:
            continue
        rel = path.relative_to(docs).as_posix()
        new, changed = render_page(text, tables, docs, rel)
        stale += [f"{rel}: {name}" for name in changed]
        if changed and not check:
            path.write_text(new, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table differs from its data")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder (default: the project's)")
    args = parser.parse_args(argv)
    try:
        stale = regenerate(args.docs, check=args.check)
    except PageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for entry in stale:
        print(f"{'differs from its data' if args.check else 'regenerated'}: {entry}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
