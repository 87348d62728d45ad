"""The "How to add a component" table of docs/architecture.md, read: for each registry kind, the registry,
the files a newcomer touches and the test base to derive from.

``tests/test_meta.py`` checks the table against the code and names its row when a registered component
has no test class (docs/studies/one-answering-stage.md counted its files once). The table is the one
list: nothing else keeps its own copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
SECTION = "## How to add a component"
COLUMNS = ("to add", "kind", "registry", "files to touch", "test base")
NEW = "NEW"  # the placeholder of a new file's name in the table
_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Row:
    """One row: ``what`` ("a backbone"), ``kind`` (a key of REGISTRIES), ``registry`` (module, attribute),
    ``files`` (repository-relative paths, NEW for the new file), ``bases`` (class names in tests/cases.py;
    the first is the base of the kind)."""

    what: str
    kind: str
    registry: tuple[str, str]
    files: tuple[str, ...]
    bases: tuple[str, ...]

    def describe(self) -> str:
        """How a failure message points at this row."""
        return f"docs/architecture.md, '{SECTION[3:]}', row '{self.what}': {', '.join(self.files)}"


def read_table(text: str | None = None) -> list[Row]:
    """The rows of the section's first table (``text``: the document, default docs/architecture.md).
    A missing section, other columns or a cell without its code span is a ValueError naming the line."""
    text = DOC.read_text(encoding="utf-8") if text is None else text
    lines = text.splitlines()
    try:
        start = lines.index(SECTION)
    except ValueError:
        raise ValueError(f"{DOC.name}: no section '{SECTION}'") from None
    table: list[tuple[int, str]] = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("## "):
            break
        if line.startswith("|"):
            table.append((number, line))
        elif table:
            break  # the first table ends at its first non-table line
    if len(table) < 3:
        raise ValueError(f"{DOC.name}: section '{SECTION}' has no table with rows")
    header = tuple(c.strip().lower() for c in table[0][1].strip().strip("|").split("|"))
    if header != COLUMNS:
        raise ValueError(f"{DOC.name}:{table[0][0]}: the table's columns are {header}, expected {COLUMNS}")
    rows = []
    for number, line in table[2:]:  # past the header and its |---| line
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(COLUMNS):
            raise ValueError(f"{DOC.name}:{number}: {len(cells)} cells, expected {len(COLUMNS)}")
        what, kind, registry, files, bases = cells
        kinds, regs, base_names = _CODE.findall(kind), _CODE.findall(registry), _CODE.findall(bases)
        paths = tuple(c for c in _CODE.findall(files) if "/" in c)  # other code spans are names, not files
        if len(kinds) != 1 or len(regs) != 1 or "." not in regs[0] or not paths or not base_names:
            raise ValueError(f"{DOC.name}:{number}: expected `kind`, `module.ATTRIBUTE`, `path`s and `Base`s: {line}")
        module, attr = regs[0].rsplit(".", 1)
        rows.append(Row(what, kinds[0], (module, attr), paths, tuple(base_names)))
    return rows


def missing_files(row: Row) -> list[str]:
    """The row's paths that do not exist (a NEW file: its folder does not exist)."""
    out = []
    for rel in row.files:
        path = ROOT / rel
        if not (path.parent.is_dir() if NEW in path.name else path.exists()):
            out.append(rel)
    return out
