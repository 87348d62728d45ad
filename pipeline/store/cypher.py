"""The shared ``cypher/<name>.cypher`` files, read once each. Its own module so that every store module
can use it without importing the package ``pipeline.store`` back (no import cycle).

A file holds one statement, or several separated by ``;`` (:func:`cypher_statements`). Files named
``falkordb_*`` hold statements only FalkorDB accepts; every other statement is in the common subset of
Neo4j 5 and FalkorDB, which ``tests/store/test_cypher_lint.py`` checks with Neo4j's own Cypher front end.
Query text takes values only as ``$parameters``; the one thing formatted into it is an identifier (a
relationship type, a property key) at an upper-case ``{NAME}`` placeholder, by :func:`fill` alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache

from pipeline.core import config
from pipeline.core.errors import PipelineError

# an identifier placeholder: {REL}, {R1}, {CONF} (lower-case keys in braces are Cypher map literals)
PLACEHOLDER = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUOTED = re.compile(r"`[^`]+`")


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


def cypher_statements(name: str) -> list[str]:
    """The statements of ``cypher/<name>.cypher``, split at each ``;`` outside quotes (empty ones dropped)."""
    return [s for s in (p.strip() for p in split_statements(cypher_text(name))) if s]


def split_statements(text: str) -> list[str]:
    """``text`` cut at every ``;`` that is not inside a string or a backtick-quoted name."""
    parts, start, quote, i = [], 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote != "`":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"`":
            quote = c
        elif c == ";":
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def placeholders(text: str) -> set[str]:
    """The ``{NAME}`` placeholders of a query text."""
    return set(PLACEHOLDER.findall(text))


def fill(text: str, identifiers: Mapping[str, str]) -> str:
    """Format identifiers into ``text`` at its ``{NAME}`` placeholders. Each value must be a plain
    identifier (``conf_train``) or a backtick-quoted name (what ``quote_rel_type`` returns for a validated
    relationship type); every placeholder must get a value and every value must have a placeholder, so
    an unfilled query never reaches a store. Raises PipelineError naming the placeholder."""
    wanted = placeholders(text)
    for name, value in identifiers.items():
        if name not in wanted:
            raise PipelineError(f"query has no {{{name}}} placeholder")
        if not (_PLAIN.fullmatch(value) or _QUOTED.fullmatch(value)):
            raise PipelineError(f"{{{name}}}: {value!r} is not an identifier or a quoted name")
    missing = sorted(wanted - set(identifiers))
    if missing:
        raise PipelineError(f"query placeholder {{{missing[0]}}} has no value")
    return PLACEHOLDER.sub(lambda m: identifiers[m.group(1)], text)
