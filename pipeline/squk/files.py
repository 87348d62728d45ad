"""Import of the published SQUK query files (soft queries on uncertain KGs) into our query sets.

File names: ``{split}_type{NNNN}[_{equal|random}][_{zero|low|normal|high}]_soft_efo1_qaa.json``; type
numbers 0..11 are, in order, 1p 2p 2i 2in 2il 2m 2u 3in ip im inp up. Each file is one JSON object
``{formula: [[grounding, {"f1_answers": [...]}, {"f1_values": [...]}], ...]}``:

* the formula, e.g. ``(r1(s1,e1))&((r2(s2,e1))&(r3(e1,f1)))``: ``&``, ``|``, ``!(...)``; ``sK`` anchors,
  ``eK`` existentials, ``f1`` the free variable; older files write alpha and beta inside the atom,
  ``r1(s1,f1,0%,1.0)`` (alpha as a percentile level of the relation, or a number);
* the grounding maps ``rK`` to a relation id, ``sK`` to an entity id, and ``aK`` / ``bK`` to the alpha and
  beta of atom ``rK``;
* the answers are the top 100 in ascending order of value, values rounded to 4 decimals.

A formula becomes the design's query text (``#rel(#head, ?e1, alpha, beta)``, ``f1`` -> ``?y``), which the
query parser normalises to DNF. Malformed input raises DataFormatError naming the file, query and field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core import jsontext
from pipeline.core.errors import DataFormatError, PipelineError
from pipeline.softquery import QUERY_TYPES, Query, parse, type_of
from pipeline.softquery.printer import format_number

# SQUK numbers the 12 types in the order of the design (and of QUERY_TYPES)
SQUK_TYPES = tuple(QUERY_TYPES)
FILE_RE = re.compile(
    r"^(?P<split>train|valid|test)_type(?P<num>\d{4})(?:_(?P<beta>equal|random))?"
    r"(?:_(?P<alpha>zero|low|normal|high))?_soft_efo1_qaa\.json$"
)
ATOM_RE = re.compile(r"r(\d+)\(([^()]*)\)")
TERM_RE = re.compile(r"^([sef])(\d+)$")
LEVEL_OF_PERCENT = {0.0: "zero", 25.0: "low", 50.0: "normal", 75.0: "high"}


@dataclass(frozen=True)
class SqukFile:
    """What a SQUK file name says."""

    path: Path
    split: str
    type: str
    beta: str | None
    alpha: str | None


@dataclass(frozen=True)
class SqukQuery:
    """One published query: its text in our grammar and its published answers, best first."""

    type: str
    formula: str
    text: str
    query: Query
    answers: list[int]
    values: list[float]


def parse_file_name(path: str | Path) -> SqukFile:
    path = Path(path)
    m = FILE_RE.match(path.name)
    if m is None:
        raise DataFormatError(
            path,
            None,
            "file name",
            "expected {split}_type{NNNN}[_{equal|random}][_{zero|low|normal|high}]_soft_efo1_qaa.json",
        )
    num = int(m["num"])
    if num >= len(SQUK_TYPES):
        raise DataFormatError(
            path, None, "file name", f"type number {num} is not one of 0..{len(SQUK_TYPES) - 1}"
        )
    return SqukFile(path, m["split"], SQUK_TYPES[num], m["beta"], m["alpha"])


def _number(text: str, path: Path, field: str) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise DataFormatError(path, None, field, f"not a number: {str(text)[:30]!r}") from None
    if not np.isfinite(v):
        raise DataFormatError(path, None, field, f"not a finite number: {text!r}")
    return v


def _alpha(token: object, rel: int, table: np.ndarray | None, path: Path, field: str) -> float:
    """An alpha given as a number, or as a percentile level ``25%`` of the relation (needs the alpha table)."""
    from pipeline.sampling.requirements import alpha_for

    text = str(token).strip()
    if text.endswith("%"):
        pct = _number(text[:-1], path, field)
        level = LEVEL_OF_PERCENT.get(pct)
        if level is None:
            raise DataFormatError(
                path, None, field, f"alpha percentile {text} is not one of 0%, 25%, 50%, 75%"
            )
        if level == "zero":
            return 0.0
        if table is None:
            raise DataFormatError(path, None, field, f"alpha {text} needs the data set's alpha levels")
        if not 0 <= rel < table.shape[0]:
            raise DataFormatError(path, None, field, f"relation {rel} out of range")
        return alpha_for(table, [rel], level)[0]
    v = _number(text, path, field)
    if not 0.0 <= v <= 1.0:
        raise DataFormatError(path, None, field, f"alpha {v} outside [0, 1]")
    return v


def formula_to_text(
    formula: str,
    grounding: dict,
    path: Path,
    where: str,
    defaults: tuple[float | None, float | None] = (None, None),
    alpha_table: np.ndarray | None = None,
    n_entities: int | None = None,
    n_relations: int | None = None,
) -> str:
    """The design-grammar text of one grounded SQUK formula. defaults = (alpha, beta) used where neither
    the grounding nor the formula gives one (what the file name's zero / equal imply)."""
    out: list[str] = []
    pos = 0
    seen_free = False
    while pos < len(formula):
        ch = formula[pos]
        if ch.isspace():
            pos += 1
            continue
        if ch in "()&|!":
            out.append({"&": " & ", "|": " | "}.get(ch, ch))
            pos += 1
            continue
        m = ATOM_RE.match(formula, pos)
        if m is None:
            raise DataFormatError(
                path, None, f"{where} formula", f"unexpected {formula[pos : pos + 12]!r} at column {pos + 1}"
            )
        k = m.group(1)
        args = [a.strip() for a in m.group(2).split(",")]
        if len(args) not in (2, 4):
            raise DataFormatError(path, None, f"{where} r{k}", f"expected 2 or 4 arguments, got {len(args)}")
        rel = _ground_id(grounding, f"r{k}", path, where, n_relations)
        terms = []
        for a in args[:2]:
            tm = TERM_RE.match(a)
            if tm is None:
                raise DataFormatError(path, None, f"{where} r{k}", f"term {a!r} is not sK, eK or f1")
            if tm.group(1) == "s":
                terms.append(f"#{_ground_id(grounding, a, path, where, n_entities)}")
            elif tm.group(1) == "e":
                terms.append(f"?e{tm.group(2)}")
            else:
                terms.append("?y")
                seen_free = True
        if len(args) == 4:
            alpha_tok, beta_tok = args[2], args[3]
        else:
            alpha_tok, beta_tok = grounding.get(f"a{k}", defaults[0]), grounding.get(f"b{k}", defaults[1])
        if alpha_tok is None or beta_tok is None:
            missing = f"a{k}" if alpha_tok is None else f"b{k}"
            raise DataFormatError(
                path, None, f"{where} {missing}", "missing from the grounding and the formula"
            )
        alpha = _alpha(alpha_tok, rel, alpha_table, path, f"{where} a{k}")
        beta = _number(beta_tok, path, f"{where} b{k}")
        if beta < 0:
            raise DataFormatError(path, None, f"{where} b{k}", f"beta {beta} is negative")
        out.append(f"#{rel}({terms[0]}, {terms[1]}, {format_number(alpha)}, {format_number(beta)})")
        pos = m.end()
    if not seen_free:
        raise DataFormatError(path, None, f"{where} formula", "no free variable f1")
    return "".join(out)


def _ground_id(grounding: dict, key: str, path: Path, where: str, bound: int | None) -> int:
    if key not in grounding:
        raise DataFormatError(path, None, f"{where} {key}", "missing from the grounding")
    v = grounding[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
        raise DataFormatError(path, None, f"{where} {key}", f"not an integer id: {v!r}")
    v = int(v)
    if v < 0 or (bound is not None and v >= bound):
        raise DataFormatError(path, None, f"{where} {key}", f"id {v} out of range 0..{(bound or 1) - 1}")
    return v


def read_squk_file(
    path: str | Path,
    alpha_table: np.ndarray | None = None,
    n_entities: int | None = None,
    n_relations: int | None = None,
) -> tuple[SqukFile, list[SqukQuery]]:
    """All queries of one SQUK file, answers reordered best first (value descending, ties by entity id)."""
    info = parse_file_name(path)
    path = info.path
    try:
        doc = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(path, None, None, f"cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, exc.lineno, None, f"not JSON: {exc.msg} (column {exc.colno})") from exc
    if not isinstance(doc, dict):
        raise DataFormatError(path, None, None, "expected a JSON object {formula: [...]}")
    defaults = (0.0 if info.alpha == "zero" else None, 1.0 if info.beta == "equal" else None)
    queries: list[SqukQuery] = []
    for formula, instances in doc.items():
        if not isinstance(instances, list):
            raise DataFormatError(
                path, None, f"formula {formula!r}", "expected a list of [grounding, answers, values]"
            )
        for i, inst in enumerate(instances):
            where = f"query {i} of {formula!r}:"
            grounding, answers, values = _unpack(inst, path, where)
            text = formula_to_text(
                formula, grounding, path, where.rstrip(":"), defaults, alpha_table, n_entities, n_relations
            )
            try:
                query = parse(text)
            except PipelineError as exc:  # e.g. a negation over a whole conjunction
                raise DataFormatError(
                    path, None, f"{where} formula", f"{formula!r} is not a soft query: {exc}"
                ) from None
            shape = type_of(query)
            if shape != info.type:  # the formula decides what the query is; a file named otherwise is refused
                num = SQUK_TYPES.index(info.type)
                held = f"type {shape} (type{SQUK_TYPES.index(shape):04d})" if shape else "none of the 12 types"
                raise DataFormatError(path, None, f"{where} formula", f"{formula!r} is a query of {held}, but the "
                                      f"file name says type{num:04d} ({info.type}); file it under its own type")
            ids, vals = _best_first(answers, values, path, where, n_entities)
            queries.append(SqukQuery(info.type, formula, text, query, ids, vals))
    return info, queries


def _unpack(inst: object, path: Path, where: str) -> tuple[dict, list, list]:
    if not (isinstance(inst, list) and len(inst) == 3 and all(isinstance(x, dict) for x in inst)):
        raise DataFormatError(
            path, None, where, "expected [grounding, {'f1_answers': [...]}, {'f1_values': [...]}]"
        )
    grounding, a, v = inst
    if "f1_answers" not in a or "f1_values" not in v:
        raise DataFormatError(path, None, where, "missing 'f1_answers' or 'f1_values'")
    answers, values = a["f1_answers"], v["f1_values"]
    if not isinstance(answers, list) or not isinstance(values, list):
        raise DataFormatError(path, None, where, "answers and values must be lists")
    if len(answers) != len(values):
        raise DataFormatError(path, None, where, f"{len(answers)} answers but {len(values)} values")
    return grounding, answers, values


def _best_first(
    answers: list, values: list, path: Path, where: str, n_entities: int | None
) -> tuple[list[int], list[float]]:
    ids = [_ground_id({"answer": a}, "answer", path, where, n_entities) for a in answers]
    vals = [_number(v, path, f"{where} f1_values") for v in values]
    if len(set(ids)) != len(ids):
        raise DataFormatError(path, None, f"{where} f1_answers", "an entity is listed twice")
    order = sorted(range(len(ids)), key=lambda j: (-vals[j], ids[j]))
    return [ids[j] for j in order], [vals[j] for j in order]

