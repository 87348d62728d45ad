"""What a statement a person types (``pipeline cypher``, ``pl.cypher``) may ask of the store's memory,
checked before it is sent: every ``range(start, end[, step])`` whose bounds are known from the text (numbers,
parameters, arithmetic on them, names a ``WITH ... AS name`` bound to such a value) must hold at most
:func:`max_range_values` values.

Why before: FalkorDB builds a range as one list, in one allocation (``range(1, 10000000000)`` asked for
22,561,046,540 bytes at once), and its per-statement memory limit (QUERY_MEM_CAPACITY) counts an allocation
only after it succeeded; past the server's memory cap the allocation fails and Redis aborts the whole
server. A range the text does not bound (``range(1, n.size)``) goes as it is: the server's own limits and
the store's recovery (the next command starts it again, and says why it ended) cover what is left.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pipeline.core.errors import PipelineError
from pipeline.store.statement import strip_comments

# bytes FalkorDB keeps per list value (an SIValue)
VALUE_BYTES = 16
_CLAUSE = re.compile(
    r"\b(?:MATCH|OPTIONAL|UNWIND|WITH|RETURN|WHERE|CREATE|MERGE|SET|DELETE|DETACH|REMOVE|CALL|ORDER|SKIP|LIMIT|"
    r"FOREACH|UNION|ON)\b",
    re.IGNORECASE,
)
_WITH = re.compile(r"\bWITH\b", re.IGNORECASE)
_RANGE = re.compile(r"\brange\s*\(", re.IGNORECASE)
_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<num>0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)|(?P<param>\$[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*/%^(),]))"
)


def max_range_values(memory_bytes: int) -> int:
    """The most values one range may hold in a statement under a statement memory limit of ``memory_bytes``."""
    return max(1, memory_bytes // VALUE_BYTES)


def check_ranges(statement: str, params: dict[str, Any] | None, memory_bytes: int, limit_name: str) -> None:
    """Refuse (PipelineError, one line) a statement with a ``range()`` of known size over the limit; see
    the module's text. ``limit_name`` says where the limit comes from in the message."""
    plain = strip_comments(statement)
    text = _mask_strings(plain)  # the same length: a position in one is the same place in the other
    bound = _bindings(text, plain, params or {})
    most = max_range_values(memory_bytes)
    for m in _RANGE.finditer(text):
        spans = _arguments(text, m.end())
        if spans is None or not 2 <= len(spans) <= 3:
            continue
        args = [plain[a:b] for a, b in spans]
        values = [_evaluate(a, params or {}, bound) for a in args]
        if any(v is None for v in values):
            continue
        n = _size(*values)
        if n is not None and n > most:
            shown = ", ".join(" ".join(a.split()) for a in args)
            raise PipelineError(
                f"range({shown}) would hold {n:,} values at once: more than one statement may hold in the store's "
                f"memory ({most:,} values, {limit_name}); nothing was run. Make the range smaller, or page "
                "through it (SKIP/LIMIT, or several statements)"
            )


def _size(start: float, end: float, step: float = 1) -> int | None:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end, step)) or step == 0:
        return None
    if (step > 0 and end < start) or (step < 0 and end > start):
        return 0
    return (end - start) // step + 1


def _mask_strings(text: str) -> str:
    """``text`` with the inside of its quoted strings and backtick names blanked (kept the same length)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" and c != "`" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _arguments(text: str, start: int) -> list[tuple[int, int]] | None:
    """The spans of the top-level comma-separated arguments of the call whose '(' ends just before
    ``start`` (in ``text`` with its strings masked)."""
    depth, args, cur = 0, [], start
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append((cur, i))
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append((cur, i))
            cur = i + 1
    return None


def _bindings(text: str, plain: str, params: dict[str, Any]) -> dict[str, Any]:
    """Names bound by ``WITH <expression> AS name`` to a value known from the text, in order (``text``:
    ``plain`` with its strings masked)."""
    bound: dict[str, Any] = {}
    for m in _WITH.finditer(text):
        end = _CLAUSE.search(text, m.end())
        stop = end.start() if end else len(text)
        for a, b in _arguments(text[:stop] + ")", m.end()) or []:
            parts = re.split(r"\s+AS\s+", plain[a:b].strip(), flags=re.IGNORECASE)
            name = parts[-1].strip()
            if len(parts) == 2 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                value = _evaluate(parts[0], params, bound)
                if value is None:
                    bound.pop(name, None)
                else:
                    bound[name] = value
    return bound


def _evaluate(expr: str, params: dict[str, Any], bound: dict[str, Any]) -> int | float | None:
    """The number an expression of numbers, parameters, bound names, + - * / % ^, parentheses and
    toInteger/toFloat/abs stands for; None when it is anything else."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            return None
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(expr) and expr[pos].isspace():
            pos += 1
    try:
        value, rest = _sum(tokens, params, bound)
    except (_Unknown, ArithmeticError, ValueError, OverflowError, IndexError):
        return None
    return value if not rest and isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _Unknown(Exception):
    """An expression the evaluator does not know."""


def _sum(t: list, p: dict, b: dict) -> tuple[Any, list]:
    value, t = _product(t, p, b)
    while t and t[0] in (("op", "+"), ("op", "-")):
        op, (rhs, t) = t[0][1], _product(t[1:], p, b)
        value = value + rhs if op == "+" else value - rhs
    return value, t


def _product(t: list, p: dict, b: dict) -> tuple[Any, list]:
    value, t = _power(t, p, b)
    while t and t[0][0] == "op" and t[0][1] in "*/%":
        op, (rhs, t) = t[0][1], _power(t[1:], p, b)
        if op == "*":
            value = value * rhs
        elif isinstance(value, int) and isinstance(rhs, int):
            value = int(value / rhs) if op == "/" else int(math.fmod(value, rhs))  # Cypher truncates
        else:
            value = value / rhs if op == "/" else math.fmod(value, rhs)
    return value, t


def _power(t: list, p: dict, b: dict) -> tuple[Any, list]:
    value, t = _unary(t, p, b)
    if t and t[0] == ("op", "^"):
        rhs, t = _power(t[1:], p, b)
        value = float(value) ** float(rhs)  # Cypher's ^ is a float
    return value, t


def _unary(t: list, p: dict, b: dict) -> tuple[Any, list]:
    if not t:
        raise _Unknown
    kind, tok = t[0]
    if (kind, tok) == ("op", "-"):
        value, rest = _unary(t[1:], p, b)
        return -value, rest
    if (kind, tok) == ("op", "+"):
        return _unary(t[1:], p, b)
    if (kind, tok) == ("op", "("):
        value, rest = _sum(t[1:], p, b)
        if not rest or rest[0] != ("op", ")"):
            raise _Unknown
        return value, rest[1:]
    if kind == "num":
        if tok[:2].lower() == "0x":
            return int(tok, 16), t[1:]
        return (float(tok) if any(c in tok for c in ".eE") else int(tok)), t[1:]
    if kind == "param":
        value = p.get(tok[1:])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Unknown
        return value, t[1:]
    if kind == "name" and len(t) > 3 and t[1] == ("op", "(") and t[2][0] == "str" and t[3] == ("op", ")"):
        text = t[2][1][1:-1].strip()  # toInteger('10000000000'): a number written as text
        if tok.lower() == "tointeger" and re.fullmatch(r"[+-]?\d+", text):
            return int(text), t[4:]
        if tok.lower() == "tofloat" and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
            return float(text), t[4:]
        raise _Unknown
    if kind == "name" and len(t) > 1 and t[1] == ("op", "(") and tok.lower() in ("tointeger", "tofloat", "abs"):
        value, rest = _sum(t[2:], p, b)
        if not rest or rest[0] != ("op", ")"):
            raise _Unknown
        fn = tok.lower()
        value = int(value) if fn == "tointeger" else float(value) if fn == "tofloat" else abs(value)
        return value, rest[1:]
    if kind == "name" and tok in b:
        return b[tok], t[1:]
    raise _Unknown
