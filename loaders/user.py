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

import csv
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from loaders.base import DatasetSpec, FileSpec, _read_lines, load_dataset, md5sum
from pipeline import atomic, config
from pipeline.errors import DataFormatError, PipelineError
from pipeline.registry import Registry

FORMAT = "soft-queries user data set v1"
SPEC_FILE = "spec.json"
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# recorded file of each split (roles as in DatasetSpec)
RECORDED = {"train": "train.tsv", "val": "valid.tsv", "test": "test.tsv"}
# accepted names of the split files in a --from folder, by role
SPLIT_STEMS = {"train": ("train",), "val": ("valid", "val", "dev"), "test": ("test",)}
SUFFIXES = (".tsv", ".txt", ".csv", ".parquet", ".pq")
FIELDS = ("head", "relation", "tail", "confidence")


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


# ------------------------------------------------------------------------------------------------ reading


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
    return _validate(path, frame)


def _read_text(path: Path, cols: Columns, delimiter: str) -> pd.DataFrame:
    lines = _read_lines(path)
    rows = csv.reader(lines, delimiter=delimiter) if delimiter == "," else (ln.split("\t") for ln in lines)
    idx: dict[str, int] | None = None
    positional = True
    out: dict[str, list] = {f: [] for f in (*FIELDS, "line")}
    for i, cells in enumerate(rows, start=1):
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


def _validate(path: str | Path, frame: pd.DataFrame) -> pd.DataFrame:
    """Names non-empty without tabs/line breaks; confidence a number in [0, 1]."""
    lines = frame["line"].to_numpy()
    for fld in ("head", "relation", "tail"):
        col = frame[fld]
        bad_type = ~col.map(lambda v: isinstance(v, str))
        if bad_type.any():
            j = int(np.argmax(bad_type.to_numpy()))
            raise DataFormatError(path, int(lines[j]), fld, f"not a name: {col.iloc[j]!r}")
        col = col.str.strip()
        bad = (col == "") | col.str.contains(r"[\t\r\n]", regex=True)
        if bad.any():
            j = int(np.argmax(bad.to_numpy()))
            why = "empty" if col.iloc[j] == "" else "contains a tab or line break"
            raise DataFormatError(path, int(lines[j]), fld, f"the name {why}: {frame[fld].iloc[j]!r}")
        frame[fld] = col
    raw = frame["confidence"]
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


# ----------------------------------------------------------------------------------------------- splitting


def parse_fractions(text: str) -> tuple[float, float, float]:
    """``--split 0.8,0.1,0.1`` -> three fractions summing to 1 (train > 0)."""
    try:
        parts = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise PipelineError(f"--split {text!r}: expected three numbers, e.g. 0.8,0.1,0.1") from None
    if len(parts) != 3 or min(parts) < 0 or parts[0] <= 0 or abs(sum(parts) - 1.0) > 1e-6:
        raise PipelineError(f"--split {text!r}: expected three fractions >= 0 summing to 1, train > 0")
    return parts  # type: ignore[return-value]


def split_triples(
    heads: np.ndarray, relations: np.ndarray, tails: np.ndarray, movable: np.ndarray,
    fractions: tuple[float, float, float], seed: int,
) -> np.ndarray:
    """Assign each distinct triple (integer codes) a split 0 = train, 1 = val, 2 = test.

    Triples are visited in a seeded random order; one moves to val (then test) only while its head,
    tail and relation keep at least one other triple in train, so every val/test fact's head, tail and
    relation occurs in train. Greedy, so a very sparse graph may get fewer val/test facts than asked."""
    n = len(heads)
    want_val, want_test = round(fractions[1] * n), round(fractions[2] * n)
    n_ent = int(max(heads.max(initial=-1), tails.max(initial=-1))) + 1
    deg = np.bincount(heads, minlength=n_ent) + np.bincount(tails, minlength=n_ent)
    rel = np.bincount(relations, minlength=int(relations.max(initial=-1)) + 1)
    out = np.zeros(n, dtype=np.int8)
    moved = 0
    for i in np.random.default_rng(seed).permutation(n):
        if moved >= want_val + want_test:
            break
        h, r, t = heads[i], relations[i], tails[i]
        if not movable[i] or rel[r] < 2:
            continue
        if (h == t and deg[h] < 3) or (h != t and (deg[h] < 2 or deg[t] < 2)):
            continue
        deg[h] -= 1
        deg[t] -= 1
        rel[r] -= 1
        out[i] = 1 if moved < want_val else 2
        moved += 1
    return out


def split_rows(rows: pd.DataFrame, fractions: tuple[float, float, float], seed: int) -> dict[str, pd.DataFrame]:
    """Split named rows (head, relation, tail, conf, line) by distinct triple; all rows of a triple go
    together, confidence-0 triples stay in train."""
    ent_codes, _ = pd.factorize(pd.concat([rows["head"], rows["tail"]], ignore_index=True), sort=True)
    h, t = ent_codes[: len(rows)], ent_codes[len(rows):]
    r, _ = pd.factorize(rows["relation"], sort=True)
    keys = pd.DataFrame({"h": h, "r": r, "t": t, "conf": rows["conf"].to_numpy()})
    triples = keys.groupby(["h", "r", "t"], sort=True, as_index=False)["conf"].mean()
    which = split_triples(
        triples["h"].to_numpy(), triples["r"].to_numpy(), triples["t"].to_numpy(),
        (triples["conf"] > 0).to_numpy(), fractions, seed,
    )
    triples["split"] = which
    split = keys.merge(triples[["h", "r", "t", "split"]], on=["h", "r", "t"], how="left")["split"].to_numpy()
    return {role: rows[split == k].reset_index(drop=True) for k, role in enumerate(("train", "val", "test"))}


def check_seen(tables: dict[str, pd.DataFrame], files: dict[str, Path]) -> None:
    """Every relation, head and tail of val/test occurs in train; else DataFormatError at the first row."""
    train = tables["train"]
    ents = set(train["head"]) | set(train["tail"])
    rels = set(train["relation"])
    for role in ("val", "test"):
        tab = tables[role]
        for fld, known in (("relation", rels), ("head", ents), ("tail", ents)):
            bad = ~tab[fld].isin(known).to_numpy()
            if bad.any():
                j = int(np.argmax(bad))
                kind = "relation" if fld == "relation" else "entity"
                raise DataFormatError(
                    files[role], int(tab["line"].iloc[j]), fld,
                    f"{kind} {tab[fld].iloc[j]!r} does not occur in train (every {kind} of valid/test must)",
                )


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
                return Staged(spec, None, target, unchanged=True, report=existing["counts"])
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
    return Staged(spec_from_record(record, target), tmp, target, report=counts)


def read_record(name: str) -> dict[str, Any] | None:
    """The spec.json of a recorded user data set, or None when there is none."""
    path = datasets_root() / name / SPEC_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataFormatError(path, None, None, f"unreadable user data set record: {exc}") from None
    if record.get("format") != FORMAT:
        raise DataFormatError(path, None, "format", f"not a user data set record ({record.get('format')!r})")
    return record


def spec_from_record(record: dict[str, Any], folder: Path) -> UserDatasetSpec:
    counts = record["counts"]
    stamp = f"file://{folder}/"
    files = tuple(FileSpec(f["role"], f["filename"], stamp + f["filename"], f["md5"], f["lines"]) for f in record["files"])
    return UserDatasetSpec(
        name=record["name"],
        domain="user",
        description=f"user data set from {record['source']}",
        files=files,
        n_entities=int(counts["entities"]),
        n_relations=int(counts["relations"]),
        id_format="names",
        facts=dict(counts["rows"]),
        folder=str(folder),
        source=record["source"],
        checksum=record["checksum"],
    )


def user_spec(name: str) -> UserDatasetSpec | None:
    """The recorded user data set ``name`` or None."""
    if not NAME_RE.fullmatch(name):
        return None
    record = read_record(name)
    return spec_from_record(record, datasets_root() / name) if record is not None else None


def user_specs() -> list[UserDatasetSpec]:
    """Every recorded user data set, by name; broken records are left out of listings."""
    root = datasets_root()
    if not root.is_dir():
        return []
    out = []
    for d in sorted(root.iterdir()):
        if d.name.startswith(".") or not (d / SPEC_FILE).is_file():
            continue
        try:
            spec = user_spec(d.name)
        except DataFormatError:
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
    check_name(name, reserved)
    path = Path(path).expanduser().resolve()
    cols = Columns.parse(columns)
    if path.is_dir():
        files = find_split_files(path)
        tables = {role: read_table(p, cols) for role, p in files.items()}
        check_seen(tables, files)
        settings: dict[str, Any] = {"layout": "folder", "columns": list(cols.names())}
        ordered = [files[r] for r in RECORDED]
    elif path.is_file():
        rows = read_table(path, cols)
        fractions = parse_fractions(split)
        tables = split_rows(rows, fractions, seed)
        settings = {"layout": "one file", "split": list(fractions), "seed": seed, "columns": list(cols.names())}
        ordered = [path]
    else:
        raise PipelineError(f"--from {path}: no such file or folder")
    source_files = {str(p): md5sum(p) for p in ordered}
    return stage(name, tables, str(path), sha256_files(ordered), settings, source_files)


def stage_from_rows(
    name: str, rows: pd.DataFrame, source: str, reserved: Registry, split: str = "0.8,0.1,0.1", seed: int = 0,
    settings: dict[str, Any] | None = None,
) -> Staged:
    """Stage a user data set from named rows pulled elsewhere (a graph store): validated like a file
    named by ``source``, then split like one file."""
    check_name(name, reserved)
    if rows.empty:
        raise DataFormatError(source, None, None, "empty: no facts")
    frame = rows.assign(confidence=rows["conf"], line=np.arange(1, len(rows) + 1))
    valid = _validate(source, frame[["head", "relation", "tail", "confidence", "line"]].copy())
    fractions = parse_fractions(split)
    tables = split_rows(valid, fractions, seed)
    full = {"layout": "store", "split": list(fractions), "seed": seed, **(settings or {})}
    return stage(name, tables, source, sha256_rows(valid), full, {})
