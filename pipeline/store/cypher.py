"""The shared ``cypher/<name>.cypher`` files, read once each. Its own module so that every store module
can use it without importing the package ``pipeline.store`` back (no import cycle)."""

from __future__ import annotations

from functools import cache

from pipeline import config
from pipeline.errors import PipelineError


@cache
def cypher_text(name: str) -> str:
    """The query in ``cypher/<name>.cypher`` with its ``//`` comment lines removed."""
    path = config.repo_root() / "cypher" / f"{name}.cypher"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PipelineError(f"no Cypher file {path}") from None
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("//")]
    return "\n".join(lines).strip().rstrip(";")
