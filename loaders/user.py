"""User data sets: a person's own uncertain KG, given as files (TSV, CSV or Parquet with head, relation,
tail, confidence as NAMES) or pulled from a graph store, recorded under ``PIPELINE_HOME/datasets/NAME/``.

A record holds ``train.tsv``, ``valid.tsv``, ``test.tsv`` in O*NET's named-triple layout
(``head \\t relation \\t tail \\t confidence``) and ``spec.json`` (source, source checksums, split settings,
counts, md5 of the recorded files). ``loaders.load(NAME)`` reads it through the same ``load_dataset`` as
every benchmark (md5-checked, same validation, same semantics), so no later stage knows the difference.

Policies (stated once, here and in README):

- duplicate (h, r, t) rows are kept in the recorded files and merged by the MEAN confidence wherever a
  graph is built (design section 1, as for the benchmarks); a one-file split keeps every row of a triple
  in one split;
- a confidence-0 row in a test file is a sampled negative (as for the benchmarks); a one-file split
  never moves a confidence-0 triple out of train, so it is never reinterpreted;
- every relation and entity of valid/test must occur in train (the models cannot embed what they never
  saw); a one-file split guarantees it, given files are checked;
- a record is built in a hidden temporary folder and renamed into place only once everything is valid
  (and loaded into the store, see ``pipeline ingest``): a failed ingest leaves no record.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from loaders.base import DatasetSpec, FileSpec, md5sum
from loaders.named_files import Columns, Spellings, column_lookup, find_split_files, read_table, validate_rows
from loaders.parsed import load_dataset
from loaders.split import check_seen, parse_fractions, split_rows
from pipeline.core import atomic, config, jsontext
from pipeline.core.errors import DataFormatError, PipelineError
from pipeline.core.registry import Registry

FORMAT = "soft-queries user data set v1"
SPEC_FILE = "spec.json"
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# recorded file of each split (roles as in DatasetSpec)
RECORDED = {"train": "train.tsv", "val": "valid.tsv", "test": "test.tsv"}


@dataclass(frozen=True)
class UserDatasetSpec(DatasetSpec):
    """A recorded user data set: a DatasetSpec (named triples, md5 of the recorded files) plus where it
    came from."""

    folder: str = ""
    source: str = ""  # the --from path or the --from-store URI
    checksum: str = ""  # sha256 over the source content (files, or the rows pulled from a store)
    kind: str = "user"

    @property
    def source_url(self) -> str:
        return self.source


# ----------------------------------------------------------------------------------------------- recording


def datasets_root() -> Path:
    return config.home() / "datasets"


def check_name(name: str, reserved: Registry) -> str:
    """A user data set name: lowercase letters, digits, '_' and '-', never a name of ``reserved`` (the
    benchmarks)."""
    if not NAME_RE.fullmatch(name):
        raise PipelineError(
            f"data set name {name!r}: use lowercase letters, digits, '_' and '-' (at most 64, e.g. my_kg)"
        )
    if name in reserved:
        raise PipelineError(
            f"'{name}' is a registered benchmark data set ({reserved.canonical(name)}); a user data set "
            "cannot shadow it, choose another name"
        )
    return name


def sha256_files(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0")
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def sha256_rows(rows: pd.DataFrame) -> str:
    """Content checksum of pulled rows, independent of the order the store returned them in."""
    canon = rows.sort_values(["relation", "head", "tail", "conf"], kind="stable")
    text = "\n".join(
        f"{a}\t{b}\t{c}\t{d!r}" for a, b, c, d in canon[["head", "relation", "tail", "conf"]].itertuples(False)
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Staged:
    """A user data set built in a hidden temporary folder; :meth:`commit` renames it into place.
    Used as a context manager: leaving without commit removes everything it wrote."""

    spec: UserDatasetSpec
    tmp: Path | None
    target: Path
    unchanged: bool = False
    report: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # lines to show about the input (names merged by spacing)

    def load(self):
        """The KGData of the staged files (the benchmark loader, md5 checked)."""
        return load_dataset(self.spec, source=self.tmp or self.target)

    def commit(self) -> UserDatasetSpec:
        if self.tmp is None:
            return self.spec
        old = None
        if self.target.exists():
            # swap: the old record moves aside (a name atomic.remove_stale leaves alone: it would take
            # our staged folder), the new one in
            old = Path(tempfile.mkdtemp(dir=self.target.parent, prefix=f".old.{self.target.name}."))
            os.replace(self.target, old / "old")
        os.replace(self.tmp, self.target)
        self.tmp = None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.spec

    def __enter__(self) -> Staged:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _fmt_conf(x: float) -> str:
    return repr(float(x))


def _write_tsv(path: Path, tab: pd.DataFrame) -> None:
    lines = [
        f"{h}\t{r}\t{t}\t{_fmt_conf(c)}\n"
        for h, r, t, c in tab[["head", "relation", "tail", "conf"]].itertuples(index=False)
    ]
    path.write_text("".join(lines), encoding="utf-8")


def stage(
    name: str,
    tables: dict[str, pd.DataFrame],
    source: str,
    checksum: str,
    settings: dict[str, Any],
    source_files: dict[str, str],
    notes: list[str] | None = None,
) -> Staged:
    """Build the record of ``name`` from validated split tables in a temporary folder (or notice that
    the recorded one has the same source checksum and settings: ``unchanged``)."""
    target = datasets_root() / name
    existing = read_record(name)
    if existing is not None and existing["checksum"] == checksum and existing["settings"] == settings:
        spec = spec_from_record(existing, target)
        try:
            for f in spec.files:
                if md5sum(target / f.filename) != f.md5:
                    break
            else:
                # the record's rows were written key-sorted (test, train, val): report them in split order
                counts = dict(existing["counts"])
                rows = dict(counts.get("rows") or {})
                counts["rows"] = {r: rows[r] for r in [*RECORDED, *sorted(set(rows) - set(RECORDED))] if r in rows}
                return Staged(spec, None, target, unchanged=True, report=counts, notes=list(notes or []))
        except OSError:
            pass  # a recorded file went missing: rebuild
    tmp = atomic.temp_dir(target)
    try:
        files = []
        for role, fname in RECORDED.items():
            _write_tsv(tmp / fname, tables[role])
            files.append({"role": role, "filename": fname, "md5": md5sum(tmp / fname), "lines": len(tables[role])})
        all_rows = pd.concat([tables[r] for r in RECORDED], ignore_index=True)
        distinct = all_rows.drop_duplicates(["head", "relation", "tail"])
        counts = {
            "entities": len(set(all_rows["head"]) | set(all_rows["tail"])),
            "relations": int(all_rows["relation"].nunique()),
            "rows": {r: len(tables[r]) for r in RECORDED},
            "duplicate_rows": int(len(all_rows) - len(distinct)),
        }
        record = {
            "format": FORMAT,
            "name": name,
            "source": source,
            "source_files": source_files,
            "checksum": checksum,
            "settings": settings,
            "counts": counts,
            "files": files,
        }
        atomic.write_json(tmp / SPEC_FILE, record)  # written last: a folder without it is no record
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Staged(spec_from_record(record, target), tmp, target, report=counts, notes=list(notes or []))


def read_record(name: str) -> dict[str, Any] | None:
    """The spec.json of a recorded user data set, or None when there is none."""
    path = datasets_root() / name / SPEC_FILE
    if not path.is_file():
        return None
    try:
        record = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataFormatError(path, None, None, f"unreadable user data set record: {exc}") from None
    if not isinstance(record, dict):
        raise DataFormatError(path, None, None, f"not a user data set record (a JSON {type(record).__name__})")
    if record.get("format") != FORMAT:
        raise DataFormatError(path, None, "format", f"not a user data set record ({record.get('format')!r})")
    return record


def spec_from_record(record: dict[str, Any], folder: Path) -> UserDatasetSpec:
    """The spec a record describes; DataFormatError naming the record's file and field when a field is
    missing or of the wrong type (a damaged spec.json)."""
    where = Path(folder) / SPEC_FILE
    field = "counts"
    try:
        counts = record["counts"]
        facts = {str(k): int(v) for k, v in dict(counts["rows"]).items()}
        n_entities, n_relations = int(counts["entities"]), int(counts["relations"])
        field = "files"
        stamp = f"file://{folder}/"
        files = tuple(
            FileSpec(str(f["role"]), str(f["filename"]), stamp + str(f["filename"]), str(f["md5"]), int(f["lines"]))
            for f in record["files"]
        )
        field = "name"
        name, source, checksum = (_text(record, k) for k in ("name", "source", "checksum"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataFormatError(where, None, field, f"damaged user data set record ({type(exc).__name__}: {exc}); "
                              f"record it again with `pipeline ingest {Path(folder).name} --from ...`") from None
    if name != Path(folder).name:
        raise DataFormatError(where, None, "name", f"names data set {name!r}, not {Path(folder).name!r}")
    return UserDatasetSpec(
        name=name,
        domain="user",
        description=f"user data set from {source}",
        files=files,
        n_entities=n_entities,
        n_relations=n_relations,
        id_format="names",
        facts=facts,
        folder=str(folder),
        source=source,
        checksum=checksum,
    )


def _text(record: dict[str, Any], key: str) -> str:
    value = record[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is {type(value).__name__}, not text")
    return value


def user_spec(name: str) -> UserDatasetSpec | None:
    """The recorded user data set ``name`` or None."""
    if not NAME_RE.fullmatch(name):
        return None
    record = read_record(name)
    return spec_from_record(record, datasets_root() / name) if record is not None else None


def user_specs() -> list[UserDatasetSpec]:
    """Every recorded user data set, by name; broken records are left out (see :func:`damaged_records`)."""
    return [s for s in _scan() if isinstance(s, UserDatasetSpec)]


def damaged_records() -> list[tuple[str, str]]:
    """(name, why) of every recorded user data set whose record cannot be read: `pipeline ls datasets`
    marks them and goes on with the others."""
    return [s for s in _scan() if isinstance(s, tuple)]


def _scan() -> list[UserDatasetSpec | tuple[str, str]]:
    root = datasets_root()
    if not root.is_dir():
        return []
    out: list[UserDatasetSpec | tuple[str, str]] = []
    for d in sorted(root.iterdir()):
        if d.name.startswith(".") or not (d / SPEC_FILE).is_file():
            continue
        try:
            spec = user_spec(d.name)
        except DataFormatError as exc:
            out.append((d.name, str(exc)))
            continue
        if spec is not None:
            out.append(spec)
    return out


# -------------------------------------------------------------------------------------------- entry points


def stage_from_path(
    name: str,
    path: str | Path,
    reserved: Registry,
    split: str = "0.8,0.1,0.1",
    seed: int = 0,
    columns: str | None = None,
) -> Staged:
    """Read, validate and stage a user data set from a folder (train/valid/test files) or one file
    (split deterministically by ``split`` and ``seed``)."""
    from pipeline.core.checks import check_seed

    check_name(name, reserved)
    check_seed(seed, "--seed")
    if not isinstance(path, (str, Path)):
        raise PipelineError(f"--from {path!r}: expected a file or folder")
    path = Path(path).expanduser().resolve()
    cols = Columns.parse(columns)
    if path.exists() and not (path.is_dir() or path.is_file()):
        raise PipelineError(f"--from {path}: not a regular file or folder (a FIFO, a device?): give a file or folder")
    spellings = Spellings()
    if path.is_dir():
        files = find_split_files(path)
        tables = {role: read_table(p, cols, spellings) for role, p in files.items()}
        check_seen(tables, files)
        settings: dict[str, Any] = {"layout": "folder", "columns": list(cols.names())}
        ordered = [files[r] for r in RECORDED]
    elif path.is_file():
        fractions = parse_fractions(split)  # before the file is read: a bad --split costs nothing
        rows = read_table(path, cols, spellings)
        tables = split_rows(rows, fractions, seed)
        settings = {"layout": "one file", "split": list(fractions), "seed": seed, "columns": list(cols.names())}
        ordered = [path]
    else:
        raise PipelineError(f"--from {path}: no such file or folder")
    source_files = {str(p): md5sum(p) for p in ordered}
    return stage(name, tables, str(path), sha256_files(ordered), settings, source_files, _notes(spellings))


def stage_from_rows(
    name: str, rows: pd.DataFrame, source: str, reserved: Registry, split: str = "0.8,0.1,0.1", seed: int = 0,
    settings: dict[str, Any] | None = None,
) -> Staged:
    """Stage a user data set from named rows pulled elsewhere (a graph store): validated like a file
    named by ``source``, then split like one file."""
    from pipeline.core.checks import check_seed

    check_name(name, reserved)
    check_seed(seed, "--seed")
    parse_fractions(split)
    if rows.empty:
        raise DataFormatError(source, None, None, "empty: no facts")
    frame = rows.assign(confidence=rows["conf"], line=np.arange(1, len(rows) + 1))
    spellings = Spellings(lambda line: f"row {line}")
    valid = validate_rows(source, frame[["head", "relation", "tail", "confidence", "line"]].copy(), spellings)
    fractions = parse_fractions(split)
    tables = split_rows(valid, fractions, seed)
    full = {"layout": "store", "split": list(fractions), "seed": seed, **(settings or {})}
    return stage(name, tables, source, sha256_rows(valid), full, {}, _notes(spellings))


SPLIT_VALUES = {"train": "train", "valid": "val", "val": "val", "dev": "val", "test": "test"}


def frame_columns(frame: pd.DataFrame, columns: str | None, label: str) -> pd.DataFrame:
    """A DataFrame's four fact columns (and its ``split`` column when it has one) under the file reader's
    names, found case-insensitively (``columns`` maps other names, as ``--columns`` does); ``line`` is the
    1-based row number, so an error names the row as a file's names its line."""
    from pipeline.core.errors import option

    cols = Columns.parse(columns)
    have = column_lookup([str(c) for c in frame.columns], label, "frame", [*cols.names(), "split"])
    out: dict[str, Any] = {}
    for fld, want in zip(("head", "relation", "tail", "confidence"), cols.names(), strict=True):
        if want.lower() not in have:
            raise DataFormatError(label, None, fld, f"missing column {want!r}; the frame has {list(frame.columns)} "
                                                     f"(map others with {option('columns', 'h,r,t,c')})")
        # kept as Python objects: pandas' own string columns refuse a lone surrogate with a UnicodeEncodeError
        # before validate_rows can name its row
        out[fld] = pd.Series(frame.iloc[:, have[want.lower()]].to_numpy(), dtype=object)
    if "split" in have:
        out["split"] = pd.Series(frame.iloc[:, have["split"]].to_numpy(), dtype=object)
    out["line"] = np.arange(1, len(frame) + 1, dtype=np.int64)
    return pd.DataFrame(out)


def row_error(label: str, frame: pd.DataFrame, position: int | None, field: str | None, detail: str) -> DataFormatError:
    """The error of the frame's row at 1-based ``position``, named as pandas names it: by its index label
    (``index 1`` is ``frame.loc[1]``, the second row of a default index), or, where labels repeat (a
    ``pd.concat`` of frames), by its position (``iloc 30``) with the label beside."""
    if position is None:
        return DataFormatError(label, None, field, detail)
    name = frame.index[position - 1]
    shown = name if isinstance(name, (int, np.integer)) else repr(name)
    if frame.index.is_unique:
        return DataFormatError(label, shown, field, detail, unit="index")  # type: ignore[arg-type]
    return DataFormatError(label, f"{position - 1} (index {shown}, not unique)", field, detail,  # type: ignore[arg-type]
                           unit="iloc")


def stage_from_frame(
    name: str,
    frame: pd.DataFrame,
    reserved: Registry,
    split: str = "0.8,0.1,0.1",
    seed: int = 0,
    columns: str | None = None,
) -> Staged:
    """Validate and stage a user data set from a pandas DataFrame of named facts (head, relation, tail,
    confidence; optionally ``split``: train|valid|test per row, which then decides the split, each
    relation and entity of valid/test occurring in train), through the same validation and record as a
    file. Errors name the row by its index label (or position, where labels repeat) and the column."""
    check_name(name, reserved)
    label = f"DataFrame for '{name}'"
    if not isinstance(frame, pd.DataFrame):
        raise PipelineError(f"{label}: expected a pandas DataFrame, not {type(frame).__name__}")
    if frame.empty:
        raise DataFormatError(label, None, None, "empty: no facts")
    raw = frame_columns(frame, columns, label)
    def at_row(exc: DataFormatError) -> DataFormatError:  # a row of the frame, not a line of a file
        return row_error(label, frame, exc.line, exc.field, exc.detail)

    spellings = Spellings(lambda position: f"index {_row_label(frame, position)}")
    try:
        valid = validate_rows(label, raw[["head", "relation", "tail", "confidence", "line"]].copy(), spellings)
    except DataFormatError as exc:
        raise at_row(exc) from None
    cols = Columns.parse(columns)
    if "split" in raw:
        roles = raw["split"].map(lambda v: SPLIT_VALUES.get(str(v).strip().lower()) if isinstance(v, str) else None)
        bad = roles.isna().to_numpy()
        if bad.any():
            j = int(np.argmax(bad))
            raise row_error(label, frame, j + 1, "split", f"{raw['split'].iloc[j]!r} is not train, valid or test")
        tables = {role: valid[(roles == role).to_numpy()].reset_index(drop=True) for role in RECORDED}
        if tables["train"].empty:
            raise DataFormatError(label, None, "split", "no row of the train split")
        try:
            check_seen(tables, {role: label for role in RECORDED})
        except DataFormatError as exc:
            raise at_row(exc) from None
        settings: dict[str, Any] = {"layout": "frame", "split": "column", "columns": list(cols.names())}
        checksum = sha256_rows(valid.assign(relation=valid["relation"] + "\x1f" + roles.to_numpy()))
    else:
        fractions = parse_fractions(split)
        tables = split_rows(valid, fractions, seed)
        settings = {"layout": "frame", "split": list(fractions), "seed": seed, "columns": list(cols.names())}
        checksum = sha256_rows(valid)
    return stage(name, tables, "a pandas DataFrame", checksum, settings, {}, _notes(spellings))


def _notes(spellings: Spellings) -> list[str]:
    note = spellings.note()
    return [] if note is None else [note]


def _row_label(frame: pd.DataFrame, position: int) -> str:
    """How a 1-based row position of ``frame`` is named: its index label (pandas' ``frame.loc``)."""
    name = frame.index[position - 1]
    return str(name) if isinstance(name, (int, np.integer)) else repr(name)
