"""The store package's layout: no module of pipeline/store imports the package itself back (the import
cycle pipeline.store -> pipeline.store.base -> pipeline.store is gone), and the public names still come
from ``pipeline.store``."""

from __future__ import annotations

import ast
from pathlib import Path

import pipeline.store

STORE = Path(pipeline.store.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, lazy (function-level) imports included."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_no_store_module_imports_its_own_package():
    offenders = {
        p.name
        for p in STORE.glob("*.py")
        if p.name != "__init__.py" and "pipeline.store" in imported_modules(p)
    }
    assert offenders == set()


def test_the_public_names_are_still_there():
    from pipeline.store import CypherError, Store, cypher_text, open_store, relation_type  # noqa: F401

    assert cypher_text("ingest_facts").startswith("UNWIND")
