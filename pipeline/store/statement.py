"""`pipeline cypher "STATEMENT" [--param NAME=VALUE ...]`: one Cypher statement on the store the project
uses (embedded by default, authenticated from its credentials file; or any --store URI), so a person can
look inside without another client. Rows come back as plain values (nodes and relationships as their
property maps); a rejected statement is one line."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from pipeline.core import jsontext
from pipeline.core.checks import lone_surrogate, unicode_problem
from pipeline.core.errors import PipelineError, option
from pipeline.store.base import COUNTER_NAMES, CypherError, Outcome

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Seconds a statement a person types may run before the server stops it (a write is then not applied);
# the embedded server's default for any client that asks for no limit (its TIMEOUT_DEFAULT) is the same.
USER_TIMEOUT_S = 60.0
_INT64 = (-(2**63), 2**63 - 1)


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
            params[name] = jsontext.loads(raw)
        except ValueError as exc:
            if getattr(exc, "msg", "") == jsontext.TOO_DEEP:  # JSON, but too deep to read: not text in disguise
                raise PipelineError(f"--param {name}: {jsontext.TOO_DEEP}") from None
            params[name] = raw
    return check_params(params, "--param ")


def check_params(params: Any, prefix: str = "") -> dict[str, Any]:
    """Parameters the store can take exactly, else PipelineError naming the one that is not: a dict of
    plain-identifier names to null, booleans, strings, integers within 64 bits (the store keeps no more:
    a bigger one was silently clamped), finite floats, and lists and maps of them (map keys non-empty,
    without a backtick: the server's parameter header cannot quote one)."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise PipelineError(f"{prefix or 'params'}: expected a mapping of names to values, got {type(params).__name__}")
    for name, value in params.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise PipelineError(f"{prefix}{name!r}: a parameter name must be a plain identifier")
        _check_value(value, f"{prefix}{name}", 0)
    return params


def _check_value(value: Any, where: str, depth: int) -> None:
    if depth > 64:
        raise PipelineError(f"{where}: nested more than 64 levels deep")
    if isinstance(value, str):
        _valid_text(value, where)
        return
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise PipelineError(f"{where}: {str(value)[:30]}... is outside the 64-bit integer range the store keeps")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PipelineError(f"{where}: {value} is not a finite number")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_value(v, f"{where}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not k or "`" in k:
                raise PipelineError(f"{where}: map key {k!r} cannot be sent (empty, not text, or with a backtick)")
            _valid_text(k, f"{where}: map key")
            _check_value(v, f"{where}.{k}", depth + 1)
        return
    raise PipelineError(f"{where}: a {type(value).__name__} cannot be a statement parameter")


def check_statement(statement: Any) -> str:
    """A statement to run: text with something besides comments, else PipelineError."""
    if not isinstance(statement, str):
        raise PipelineError(f"statement: expected Cypher text, got {type(statement).__name__}")
    _valid_text(statement, "statement")
    if not strip_comments(statement).strip():
        raise PipelineError("empty Cypher statement" + (" (only comments)" if statement.strip() else ""))
    return statement


def _valid_text(text: str, where: str) -> None:
    """Text the store's protocol can carry (UTF-8): a lone surrogate, what Python makes of an undecodable
    byte in an argument (``$'\\xff'``), is one line naming where, not an encoder's traceback."""
    at = lone_surrogate(text)
    if at is not None:
        raise PipelineError(f"{where}: {unicode_problem(text, at)}")


def strip_comments(text: str) -> str:
    """``text`` without its ``//`` and ``/* */`` comments (quoted strings and backtick names kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" and c != "`" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def run_statement(
    store: Any, statement: str, params: dict[str, Any] | None = None, timeout_s: float | None = None
) -> list[dict]:
    """Run one statement on an open Store; its rows. Raises PipelineError on a rejected statement (one
    line) or StoreUnavailable."""
    return execute_statement(store, statement, params, timeout_s).rows


def execute_statement(
    store: Any, statement: str, params: dict[str, Any] | None = None, timeout_s: float | None = None
) -> Outcome:
    """:func:`run_statement` with the write counters. ``timeout_s`` (default USER_TIMEOUT_S, at most the
    store's own limit): the server stops the statement after that long, and a stopped write is not
    applied."""
    check_statement(statement)
    params = check_params(params)
    limit = USER_TIMEOUT_S if timeout_s is None else timeout_s
    if not (isinstance(limit, (int, float)) and not isinstance(limit, bool) and 0 < limit <= store.statement_timeout_s):
        raise PipelineError(f"{option('timeout', limit)}: expected seconds in (0, {store.statement_timeout_s:g}]")
    try:
        return store.execute(statement, params, limit)
    except CypherError as exc:
        raise PipelineError(one_line(str(exc))) from None


def counters_line(counters: dict[str, int]) -> str:
    """What a statement changed, e.g. ``nodes deleted: 3, relationships deleted: 5`` (``no changes``)."""
    parts = [f"{name}: {counters[name]}" for name in COUNTER_NAMES if counters.get(name)]
    return ", ".join(parts) if parts else "no changes"


def one_line(message: str) -> str:
    """A store's error on one line: its first line (the query it names follows on the next)."""
    return " ".join(message.splitlines()[0].split()) if message else message


def cell(value: Any) -> str:
    """A value as a table cell: strings as they are, everything else as JSON (lists, maps, null)."""
    return value if isinstance(value, str) else json.dumps(value, default=str)
