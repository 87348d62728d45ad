"""`pipeline cypher "STATEMENT" [--param NAME=VALUE ...]`: one Cypher statement on the store the project
uses (embedded by default, authenticated from its credentials file; or any --store URI), so a person can
look inside without another client. Rows come back as plain values (nodes and relationships as their
property maps); a rejected statement is one line."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pipeline.core.errors import PipelineError
from pipeline.store.base import CypherError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs: VALUE is read as JSON when it is JSON (``3``, ``0.5``, ``true``, ``null``,
    ``[1, 2]``, ``"007"``), else taken as the string it is (``name=ann``). Raises PipelineError."""
    params: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not _NAME.fullmatch(name):
            raise PipelineError(f"--param {item!r}: expected NAME=VALUE with NAME a plain identifier")
        if name in params:
            raise PipelineError(f"--param {name} is given twice")
        try:
            params[name] = json.loads(raw)
        except ValueError:
            params[name] = raw
    return params


def run_statement(store: Any, statement: str, params: dict[str, Any] | None = None) -> list[dict]:
    """Run one statement on an open Store; its rows. Raises PipelineError on a rejected statement (one
    line) or StoreUnavailable."""
    if not statement.strip():
        raise PipelineError("empty Cypher statement")
    try:
        return store.run(statement, params or {})
    except CypherError as exc:
        raise PipelineError(one_line(str(exc))) from None


def one_line(message: str) -> str:
    """A store's error on one line: its first line (the query it names follows on the next)."""
    return " ".join(message.splitlines()[0].split()) if message else message


def cell(value: Any) -> str:
    """A value as a table cell: strings as they are, everything else as JSON (lists, maps, null)."""
    return value if isinstance(value, str) else json.dumps(value, default=str)
