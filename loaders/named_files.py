"""Reading a user's named fact files: TSV, CSV or Parquet with head, relation, tail, confidence as NAMES
(header optional for TSV/CSV, other header names mapped by ``--columns``), validated so that the first bad
field raises one DataFormatError with file, line and field."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from loaders.base import read_text
from pipeline.core.checks import as_real, lone_surrogate, number_kind, unicode_problem
from pipeline.core.errors import DataFormatError, PipelineError, printable

# accepted names of the split files in a --from folder, by role
SPLIT_STEMS = {"train": ("train",), "val": ("valid", "val", "dev"), "test": ("test",)}
SUFFIXES = (".tsv", ".txt", ".csv", ".parquet", ".pq")
FIELDS = ("head", "relation", "tail", "confidence")
# a tab or anything str.splitlines breaks on would split a recorded TSV line; a NUL is refused by the
# graph store (FalkorDB: a syntax error mid-ingest)
LINE_BREAKS = "[\t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029\x00]"
# other control characters: an escape sequence (``\x1b]0;...\x07``) acts on the terminal that shows the name,
# a bidirectional override (U+202A..U+202E, U+2066..U+2069) makes it read as another name
CONTROLS = "[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"

@dataclass(frozen=True)
class Columns:
    """The header names of the head, relation, tail and confidence columns (``--columns h,r,t,c``)."""

    head: str = "head"
    relation: str = "relation"
    tail: str = "tail"
    confidence: str = "confidence"

    @classmethod
    def parse(cls, text: str | None) -> Columns:
        if not text:
            return cls()
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 4 or not all(parts):
            raise PipelineError(f"--columns {text!r}: expected four header names, head,relation,tail,confidence")
        return cls(*parts)

    def names(self) -> tuple[str, str, str, str]:
        return (self.head, self.relation, self.tail, self.confidence)

    @property
    def is_default(self) -> bool:
        return self == Columns()


def column_lookup(names: list[str], where: object, what: str, wanted: Iterable[str],
                  line: int | None = None) -> dict[str, int]:
    """{lowercased column name: position} of a header, a Parquet schema or a DataFrame's columns
    (``what``: "header", "file", "frame"); a wanted name held by two columns (``head`` twice, or ``head``
    and ``Head``) is one DataFormatError naming both positions: which of them holds the facts would be a
    guess (pandas' ``frame["head"]`` is then a frame, not a column)."""
    lowered = [str(n).strip().lower() for n in names]
    for want in {w.lower() for w in wanted}:
        at = [i for i, n in enumerate(lowered) if n == want]
        if len(at) > 1:
            shown = " and ".join(f"{names[i]!r} (column {i + 1})" for i in at[:3])
            raise DataFormatError(where, line, want, f"the {what} has {len(at)} columns named {shown}; "
                                                     "keep one, or rename the others")
    out: dict[str, int] = {}
    for i, n in enumerate(lowered):
        out.setdefault(n, i)
    return out


def _header_index(cells: list[str], cols: Columns, path: Path, line: int) -> dict[str, int] | None:
    """Positions of the four fields when ``cells`` is a header naming them all, else None."""
    lowered = [c.strip().lower() for c in cells]
    if not all(want.lower() in lowered for want in cols.names()):
        return None
    have = column_lookup(cells, path, "header", cols.names(), line)
    return {fld: have[want.lower()] for fld, want in zip(FIELDS, cols.names(), strict=True)}


def _missing(cells: list[str], cols: Columns) -> str | None:
    """The first field a header-looking first line lacks (for the 'missing column' error)."""
    lowered = [c.strip().lower() for c in cells]
    for fld, want in zip(FIELDS, cols.names(), strict=True):
        if want.lower() not in lowered:
            return fld
    return None


def read_table(path: str | Path, columns: Columns | None = None, spellings: Spellings | None = None) -> pd.DataFrame:
    """One TSV/CSV/Parquet file of named facts -> DataFrame head, relation, tail (str), conf (float64),
    line (1-based line of a text file, row number of a Parquet file). A TSV/CSV header is optional (a
    first line naming all four columns); without one the first four fields are head, relation, tail,
    confidence. The first bad field raises DataFormatError with file, line and field."""
    path = Path(path)
    cols = columns or Columns()
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        frame = _read_parquet(path, cols)
    elif suffix in (".tsv", ".txt", ".csv", ""):
        frame = _read_text(path, cols, "," if suffix == ".csv" else "\t")
    else:
        raise DataFormatError(path, None, None, f"unknown file type {suffix!r}; expected .tsv, .csv or .parquet")
    if frame.empty:
        raise DataFormatError(path, None, None, "empty: no facts")
    return validate_rows(path, frame, spellings)


def _records(path: Path, delimiter: str) -> Any:
    """(first line, cells) of each record. A CSV record may span lines (a quoted name holding a line
    break): the reader is given the text with its line breaks, so such a name keeps its break and is
    refused by :func:`validate_rows` at the record's first line, instead of being stored with the break
    silently removed."""
    text = read_text(path)
    if delimiter != ",":
        yield from enumerate((ln.split("\t") for ln in text.splitlines()), start=1)
        return
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    start = 1
    try:
        for cells in reader:
            yield start, cells
            start = reader.line_num + 1
    except csv.Error as exc:  # e.g. an unterminated quote at the end of the file
        raise DataFormatError(path, start, None, f"not valid CSV: {exc}") from None


def _read_text(path: Path, cols: Columns, delimiter: str) -> pd.DataFrame:
    idx: dict[str, int] | None = None
    positional = True
    out: dict[str, list] = {f: [] for f in (*FIELDS, "line")}
    for i, cells in _records(path, delimiter):
        if not cells or not any(c.strip() for c in cells):
            continue
        if idx is None:
            idx = _header_index(cells, cols, path, i)
            if idx is not None:
                positional = False
                continue
            named = {c.strip().lower() for c in cells} & {n.lower() for n in cols.names()}
            if not cols.is_default or named:
                # a header lacking a column, or --columns naming a column the file does not have
                fld = _missing(cells, cols) or "head"
                raise DataFormatError(
                    path, i, fld, f"missing column {cols.names()[FIELDS.index(fld)]!r}; the first line is "
                    f"{cells[:8]!r} (a header must name {', '.join(cols.names())}; map others with --columns)"
                )
            idx = {f: j for j, f in enumerate(FIELDS)}
        need = max(idx.values()) + 1
        if (positional and len(cells) != 4) or len(cells) < need:
            sep = "comma" if delimiter == "," else "tab"
            raise DataFormatError(
                path, i, None, f"expected {4 if positional else need} {sep}-separated fields, got {len(cells)}"
            )
        for f in FIELDS:
            out[f].append(cells[idx[f]])
        out["line"].append(i)
    return pd.DataFrame(out)


def _read_parquet(path: Path, cols: Columns) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:
        # the one file as it is (pq.read_table goes through the dataset reader, which fails on a column
        # name held twice before its columns can be named)
        table = pq.ParquetFile(path).read()
    except Exception as exc:  # pyarrow raises several types for a broken file
        why = " ".join(str(exc).split("\n")[0].split())[:300]
        raise DataFormatError(path, None, None, f"not a readable Parquet file: {why}") from None
    have = column_lookup(table.column_names, path, "file", cols.names())
    out: dict[str, Any] = {}
    for fld, want in zip(FIELDS, cols.names(), strict=True):
        if want.lower() not in have:
            raise DataFormatError(
                path, None, fld, f"missing column {want!r}; the file has {table.column_names} (map with --columns)"
            )
        out[fld] = table.column(have[want.lower()]).to_pandas()
    frame = pd.DataFrame(out)
    frame["line"] = np.arange(1, len(frame) + 1, dtype=np.int64)
    return frame


class Spellings:
    """The spellings of the names of one data set's inputs (its files, a frame, pulled rows), to say where
    names that differ only by surrounding whitespace (``'bob'`` and ``' bob'``: a CSV written with ``, ``)
    are taken as one name: surrounding whitespace is removed from every name, so they are one entity (or
    relation), and :meth:`note` says so in a line rather than merging them without a word. ``locate``
    names a row by its 1-based line (a frame's row by its index label)."""

    def __init__(self, locate: Any = None) -> None:
        self.locate = locate or (lambda line: f"line {line}")
        self._exact: dict[str, set[str]] = {"entity": set(), "relation": set()}
        self._spaced: dict[str, dict[str, dict[str, str]]] = {"entity": {}, "relation": {}}

    def add(self, where: object, fld: str, raw: pd.Series, stripped: pd.Series, lines: np.ndarray) -> None:
        """One column's names as given (``raw``) and as kept (``stripped``), with the lines of its rows."""
        kind = "relation" if fld == "relation" else "entity"
        changed = (raw != stripped).to_numpy()
        self._exact[kind].update(stripped[~changed].unique())
        if changed.any():
            spaced = pd.DataFrame({"raw": raw[changed].to_numpy(), "name": stripped[changed].to_numpy(),
                                   "line": lines[changed]}).drop_duplicates("raw")
            for r, n, line in spaced.itertuples(index=False):
                self._spaced[kind].setdefault(n, {}).setdefault(r, f"{where}, {self.locate(int(line))}, field '{fld}'")

    def merged(self) -> list[tuple[str, str, dict[str, str]]]:
        """(kind, name, {spelling: where}) of every name given in more than one spelling."""
        return [(kind, name, raws) for kind, by in self._spaced.items() for name, raws in by.items()
                if len(raws) > 1 or name in self._exact[kind]]

    def note(self) -> str | None:
        """The line to show when names were merged, else None."""
        merged = self.merged()
        if not merged:
            return None
        kind, name, raws = merged[0]
        spelling, where = next(iter(raws.items()))
        more = f"; {len(merged) - 1:,} more name(s) like it" if len(merged) > 1 else ""
        return (f"names that differ only by surrounding spaces are taken as one {kind}: '{printable(spelling, 40)}' "
                f"({where}) is '{printable(name, 40)}'{more}; remove the spaces to silence this, or make the names "
                "differ")


def validate_rows(path: str | Path, frame: pd.DataFrame, spellings: Spellings | None = None) -> pd.DataFrame:
    """Names non-empty without tabs/line breaks or other control characters, surrounding whitespace removed
    (``spellings``: where names merged that way are noted); confidence a number in [0, 1]."""
    lines = frame["line"].to_numpy()
    for fld in ("head", "relation", "tail"):
        col = frame[fld]
        bad_type = ~col.map(lambda v: isinstance(v, str))
        if bad_type.any():
            j = int(np.argmax(bad_type.to_numpy()))
            raise DataFormatError(path, int(lines[j]), fld, f"not a name: {col.iloc[j]!r}")
        broken = col.map(lambda v: lone_surrogate(v) is not None).to_numpy()
        if broken.any():  # no file can hold it (the data set's files, the store's strings)
            j = int(np.argmax(broken))
            name = col.iloc[j]
            raise DataFormatError(path, int(lines[j]), fld, f"the name '{printable(name, 40)}' is "
                                  + unicode_problem(name, lone_surrogate(name) or 0))
        raw, col = col, col.str.strip()
        bad = (col == "") | col.str.contains(LINE_BREAKS, regex=True)
        if bad.any():
            j = int(np.argmax(bad.to_numpy()))
            why = "empty" if col.iloc[j] == "" else "contains a tab, a line break or a NUL"
            raise DataFormatError(path, int(lines[j]), fld, f"the name {why}: {frame[fld].iloc[j]!r}")
        bad = col.str.contains(CONTROLS, regex=True)
        if bad.any():
            j = int(np.argmax(bad.to_numpy()))
            name = col.iloc[j]
            code = ord(next(c for c in name if re.fullmatch(CONTROLS, c)))
            char = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
            raise DataFormatError(path, int(lines[j]), fld, f"the name '{printable(name, 40)}' holds the control "
                                  f"character {char} (a terminal escape, or a direction override); a name is "
                                  "printable text")
        if spellings is not None:
            spellings.add(path, fld, raw, col, lines)
        frame[fld] = col
    raw = frame["confidence"]
    # a bool or a complex number is not a confidence (True would be 1.0; 0.5+0.7j its real part, silently)
    odd = raw.map(lambda v: as_real(v) is None and not isinstance(v, str)).to_numpy()
    if odd.any():
        j = int(np.argmax(odd))
        raise DataFormatError(path, int(lines[j]), "confidence",
                              f"not a number: {str(raw.iloc[j])[:30]!r} ({number_kind(raw.iloc[j])})")
    conf = pd.to_numeric(raw.map(lambda v: v.strip() if isinstance(v, str) else v), errors="coerce")
    conf = conf.astype("float64")
    nan = conf.isna().to_numpy()
    if nan.any():
        j = int(np.argmax(nan))
        raise DataFormatError(path, int(lines[j]), "confidence", f"not a number: {str(raw.iloc[j])[:30]!r}")
    out = ((conf < 0.0) | (conf > 1.0)).to_numpy()
    if out.any():
        j = int(np.argmax(out))
        raise DataFormatError(path, int(lines[j]), "confidence", f"{raw.iloc[j]} is outside [0, 1]")
    return pd.DataFrame(
        {
            "head": frame["head"].astype(str),
            "relation": frame["relation"].astype(str),
            "tail": frame["tail"].astype(str),
            "conf": conf.to_numpy(),
            "line": lines.astype(np.int64),
        }
    )


def find_split_files(folder: Path) -> dict[str, Path]:
    """The train/valid/test files of a --from folder (any of SUFFIXES; ``val``/``dev`` accepted)."""
    found: dict[str, Path] = {}
    for role, stems in SPLIT_STEMS.items():
        hits = [folder / f"{s}{x}" for s in stems for x in SUFFIXES if (folder / f"{s}{x}").is_file()]
        if not hits:
            raise PipelineError(
                f"--from {folder}: no {stems[0]} file (expected {stems[0]}.tsv, .csv or .parquet beside "
                "train/valid/test)"
            )
        if len(hits) > 1:
            raise PipelineError(f"--from {folder}: several {stems[0]} files ({', '.join(h.name for h in hits)})")
        found[role] = hits[0]
    return found


