"""The results pages' renderers (tools/tables_results.py), loaded by path as tools/pages.py loads them: tests
check that what a command writes is what the page's table reads."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_tables_results", ROOT / "tools" / "tables_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(name: str, docs: Path) -> str:
    """The Markdown of the results table ``name`` rendered from the data in ``docs``."""
    return tables().TABLES[name](Path(docs))
