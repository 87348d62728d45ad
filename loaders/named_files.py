"""Reading a user's named fact files: TSV, CSV or Parquet with head, relation, tail, confidence as NAMES
(header optional for TSV/CSV, other header names mapped by ``--columns``), validated so that the first bad
field raises one DataFormatError with file, line and field."""

from __future__ import annotations

import csv
import io
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


def _header_index(cells: list[str], cols: Columns) -> dict[str, int] | None:
    """Positions of the four fields when ``cells`` is a header naming them all, else None."""
    lowered = [c.strip().lower() for c in cells]
    idx = {}
    for fld, want in zip(FIELDS, cols.names(), strict=True):
        if want.lower() not in lowered:
            return None
        idx[fld] = lowered.index(want.lower())
    return idx


def _missing(cells: list[str], cols: Columns) -> str | None:
    """The first field a header-looking first line lacks (for the 'missing column' error)."""
    lowered = [c.strip().lower() for c in cells]
    for fld, want in zip(FIELDS, cols.names(), strict=True):
        if want.lower() not in lowered:
            return fld
    return None


def read_table(path: str | Path, columns: Columns | None = None) -> pd.DataFrame:
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
    return validate_rows(path, frame)


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
            idx = _header_index(cells, cols)
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
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise DataFormatError(path, None, None, f"not a readable Parquet file: {exc}") from None
    have = {c.lower(): c for c in table.column_names}
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


def validate_rows(path: str | Path, frame: pd.DataFrame) -> pd.DataFrame:
    """Names non-empty without tabs/line breaks; confidence a number in [0, 1]."""
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
        col = col.str.strip()
        bad = (col == "") | col.str.contains(LINE_BREAKS, regex=True)
        if bad.any():
            j = int(np.argmax(bad.to_numpy()))
            why = "empty" if col.iloc[j] == "" else "contains a tab, a line break or a NUL"
            raise DataFormatError(path, int(lines[j]), fld, f"the name {why}: {frame[fld].iloc[j]!r}")
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


