"""What every data set loader shares: the spec (files, md5 sums, expected statistics), fetching from a
local mirror or the upstream URL (download cache under PIPELINE_HOME), validated parsing, and the
in-memory tables (:class:`KGData`) that every later stage reads.

Semantics (design section 1): duplicate (h, r, t) rows merge by the mean of their confidences; rows with
confidence 0 in a test file are sampled negatives, not facts; the observed graphs are nested,
train ⊂ valid = train ∪ val ⊂ test = train ∪ val ∪ test, a triple in several splits taking the mean over
all its rows in the splits included.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core import atomic, config
from pipeline.core.errors import ChecksumError, DataFormatError, PipelineError

SPLITS = ("train", "val", "test")
GRAPHS = {"train": ("train",), "valid": ("train", "val"), "test": ("train", "val", "test")}


@dataclass(frozen=True)
class FileSpec:
    """One upstream file: its role, name in the folder, URL, md5 and line count."""

    role: str  # train | val | test | entities | relations | softlogic
    filename: str
    url: str
    md5: str | None
    lines: int | None = None
    archive: str | None = None  # the file lives inside this zip (downloaded from url)


@dataclass(frozen=True)
class DatasetSpec:
    """A registered data set with the statistics it must show when loaded."""

    name: str
    domain: str
    description: str
    files: tuple[FileSpec, ...]
    n_entities: int
    n_relations: int
    id_format: str  # "ids": integer ids + id-map CSVs; "names": names in the triple files
    id_map_header: bool = False
    facts: dict[str, int] = field(default_factory=dict)  # expected raw positive rows per split

    def file(self, role: str) -> FileSpec | None:
        for f in self.files:
            if f.role == role:
                return f
        return None

    @property
    def source_url(self) -> str:
        f = self.file("train")
        assert f is not None
        return f.url.rsplit("/", 1)[0] + "/"


@dataclass
class KGData:
    """A loaded uncertain KG: the single source every later stage uses.

    entities: eid (int64, == row position), name (str)
    relations: rid (int64, == row position), name (str)
    rows: every positive row as read, h/r/t int64, conf float64, split in SPLITS
    test_negatives: CN15k-style sampled negatives of the test file (h, r, t); not facts
    softlogic: PSL-inferred facts (h, r, t, conf merged by mean) or None
    """

    name: str
    entities: pd.DataFrame
    relations: pd.DataFrame
    rows: pd.DataFrame
    test_negatives: pd.DataFrame
    softlogic: pd.DataFrame | None
    checksums: dict[str, str]
    _graphs: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    # arrays computed from the tables (derived), by name: kept here, and read from / written to the parsed
    # cache when the tables came through it (loaders.parsed)
    _derived: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict, repr=False)
    _read_derived: Callable[[str], tuple[np.ndarray, ...] | None] | None = field(default=None, repr=False)
    _write_derived: Callable[[str, tuple[np.ndarray, ...]], None] | None = field(default=None, repr=False)
    # objects built from this data set and kept while it stays loaded in the process (e.g. the engine's
    # index of a graph, loaders.parsed): never a result that another version of the tables would change
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_entities(self) -> int:
        return len(self.entities)

    @property
    def n_relations(self) -> int:
        return len(self.relations)

    def graph(self, which: str) -> pd.DataFrame:
        """The observed graph train|valid|test: h, r, t (int64), conf (float64) merged by mean over the
        rows of the included splits, sorted by (r, h, t)."""
        if which not in GRAPHS:
            raise PipelineError(f"unknown graph '{which}'; expected one of {', '.join(GRAPHS)}")
        if which not in self._graphs:
            sel = self.rows[self.rows["split"].isin(GRAPHS[which])]
            self._graphs[which] = merge_mean(sel)
        return self._graphs[which]

    def split_facts(self, split: str) -> pd.DataFrame:
        """The distinct facts of one split alone (mean over its own rows), sorted by (r, h, t)."""
        if split not in SPLITS:
            raise PipelineError(f"unknown split '{split}'; expected one of {', '.join(SPLITS)}")
        return merge_mean(self.rows[self.rows["split"] == split])

    def facts_with_splits(self) -> pd.DataFrame:
        """One row per distinct (h, r, t) of the test graph with its confidence in each nested graph:
        columns h, r, t, conf_train, conf_valid, conf_test (NaN where the fact is absent). This is what
        ingest stores on each relationship."""
        out = self.graph("test").rename(columns={"conf": "conf_test"})
        for g in ("train", "valid"):
            other = self.graph(g).rename(columns={"conf": f"conf_{g}"})
            out = out.merge(other, on=["h", "r", "t"], how="left")
        return out[["h", "r", "t", "conf_train", "conf_valid", "conf_test"]]

    def derived_arrays(self, name: str, compute: Callable[[], tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        """Arrays computed from the tables (``name`` says what, and its version): computed once per data
        set version and kept, in this object and, for tables read through the parsed cache, beside them
        for every later process (:mod:`loaders.parsed`). Treat them as read-only."""
        if name not in self._derived:
            got = self._read_derived(name) if self._read_derived is not None else None
            if got is None:
                got = tuple(compute())
                if self._write_derived is not None:
                    self._write_derived(name, got)
            self._derived[name] = got
        return self._derived[name]

    def derived(self, name: str, compute: Callable[[], str]) -> str:
        """A text computed from the tables, e.g. the data-version key, kept as :meth:`derived_arrays` keeps
        arrays."""
        (blob,) = self.derived_arrays(name, lambda: (np.frombuffer(compute().encode("utf-8"), dtype=np.uint8),))
        return blob.tobytes().decode("utf-8")

    def bind_derived(
        self,
        read: Callable[[str], tuple[np.ndarray, ...] | None],
        write: Callable[[str, tuple[np.ndarray, ...]], None],
    ) -> None:
        """Where :meth:`derived_arrays` are kept beyond this object (the parsed cache's folder)."""
        self._read_derived, self._write_derived = read, write

    def entity_names(self) -> list[str]:
        return self.entities["name"].tolist()

    def relation_names(self) -> list[str]:
        return self.relations["name"].tolist()


def merge_mean(rows: pd.DataFrame) -> pd.DataFrame:
    """Merge duplicate (h, r, t) rows by the mean confidence; sorted by (r, h, t), fresh index."""
    if rows.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="int64") for c in "hrt"} | {"conf": pd.Series(dtype="float64")}
        )
    g = rows.groupby(["r", "h", "t"], sort=True, as_index=False)["conf"].mean()
    return g[["h", "r", "t", "conf"]].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------- fetching


def md5sum(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_md5(path: Path, expected: str | None, md5: Callable[[Path], str] = md5sum) -> str:
    """md5 of path (by ``md5``); raises ChecksumError naming the file when it differs from expected."""
    got = md5(path)
    if expected is not None and got != expected:
        raise ChecksumError(
            f"{path}: md5 {got} does not match the published {expected} (corrupt or other version)"
        )
    return got


def _download(url: str, dest: Path) -> None:
    """Download url to dest atomically (a partial download never looks complete), with a progress bar."""
    from pipeline.core.progress import output

    def fetch(tmp: Path) -> None:
        with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with output(True).bar(total=total, unit="B", unit_scale=True, desc=f"download {dest.name}", leave=False) as bar:
                for block in iter(lambda: resp.read(1 << 16), b""):
                    out.write(block)
                    bar.update(len(block))

    try:
        atomic.write_with(dest, fetch)
    except OSError as exc:
        raise PipelineError(
            f"cannot download {url}: {exc}. Point --source (or PIPELINE_DATA) at a local mirror instead."
        ) from exc


def mirror_folder(mirror: Path, name: str) -> Path:
    """The folder of data set ``name`` in the local mirror ``mirror`` (PIPELINE_DATA). A mirror holds one
    folder per data set; one without this data set's folder is refused in one line (what it holds, a
    folder differing only by case): a mirror is chosen to read the files from there, and a download in
    its place would go unnoticed (or hang on a machine without a network)."""
    folder = mirror / name
    if folder.is_dir():
        return folder
    raw = os.environ.get("PIPELINE_DATA", str(mirror))
    if folder.exists():
        raise PipelineError(f"PIPELINE_DATA={raw}: {folder} is not a folder (a local mirror holds one folder per "
                            f"data set); {config.MIRROR_FIX}")
    held = sorted(p.name for p in mirror.iterdir() if p.is_dir() and not p.name.startswith("."))
    case = [h for h in held if h.lower() == name.lower()]
    hint = f" (did you mean {case[0]}/? folder names are matched exactly)" if case else ""
    holds = f"it holds {', '.join(h + '/' for h in held)}" if held else "it holds no folder"
    raise PipelineError(
        f"PIPELINE_DATA={raw} has no folder {name}/{hint} ({holds}; a local mirror holds one folder per data "
        f"set): put the data set's files there, name their folder with --source, or unset PIPELINE_DATA to "
        "download them from their upstream URLs"
    )


def resolve_source(spec: DatasetSpec, source: str | Path | None) -> Path:
    """The folder holding the data set's files: --source, PIPELINE_DATA/<name> (a mirror without that
    folder is refused, see :func:`mirror_folder`), or the download cache (files fetched from their upstream
    URL on first use, only where PIPELINE_DATA is not set)."""
    if source is not None:
        folder = Path(source).expanduser()
        if not folder.is_dir():
            raise PipelineError(f"--source {folder}: not a directory")
        return folder
    mirror = config.data_mirror()
    if mirror is not None:
        return mirror_folder(mirror, spec.name)
    cache = config.home() / "downloads" / spec.name
    for f in spec.files:
        target = cache / f.filename
        if target.exists():
            continue
        if f.archive is not None:
            archive = cache / f.archive
            if not archive.exists():
                _download(f.url, archive)
            with zipfile.ZipFile(archive) as zf:
                member = next(
                    (m for m in zf.namelist() if m.endswith("/" + f.filename) or m == f.filename), None
                )
                if member is None:
                    raise PipelineError(f"{archive}: no member {f.filename}")
                with zf.open(member) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        else:
            _download(f.url, target)
            try:
                verify_md5(target, f.md5)
            except ChecksumError:
                target.unlink(missing_ok=True)  # never keep a bad file in the cache
                raise
    return cache


# ------------------------------------------------------------------------------------------------ parsing


def read_text(path: Path) -> str:
    """A data file's text: UTF-8, a byte-order mark at its start dropped (a spreadsheet's "UTF-8 with BOM"
    export would otherwise glue ``\ufeff`` to the first name, making ``\ufeffann`` and ``ann`` two
    entities). DataFormatError with the line on bytes that are not UTF-8."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise DataFormatError(path, line, None, "not valid UTF-8") from exc
    except OSError as exc:
        raise DataFormatError(path, None, None, f"cannot read: {exc.strerror}") from exc


def _read_lines(path: Path) -> list[str]:
    return read_text(path).splitlines()  # handles CRLF


def check_name(path: Path, line: int, field: str, name: str) -> str:
    """A name read from a data file; DataFormatError when it holds a NUL (which a graph store cannot
    take: FalkorDB reports a syntax error mid-ingest)."""
    if "\x00" in name:
        raise DataFormatError(path, line, field, f"the name contains a NUL character: {name[:60]!r}")
    return name


def parse_id_map(path: Path, header: bool, expected_rows: int | None = None) -> pd.DataFrame:
    """An id map CSV `name,id` (CRLF, optional header) -> DataFrame(id, name) sorted by id, ids 0..n-1.
    Names may contain commas: the id is the last field."""
    lines = _read_lines(path)
    start = 1 if header else 0
    names, ids = [], []
    for i, line in enumerate(lines[start:], start=start + 1):
        if not line.strip():
            continue
        name, sep, idtext = line.rpartition(",")
        if not sep:
            raise DataFormatError(path, i, "id", f"expected 'name,id', got {line[:60]!r}")
        try:
            ids.append(int(idtext))
        except ValueError:
            raise DataFormatError(path, i, "id", f"not an integer: {idtext[:30]!r}") from None
        name = name.strip('"') if name.startswith('"') and name.endswith('"') else name
        names.append(check_name(path, i, "name", name))
    arr = np.asarray(ids, dtype=np.int64)
    order = np.argsort(arr, kind="stable")
    arr = arr[order]
    if len(arr) and not np.array_equal(arr, np.arange(len(arr))):
        bad = int(np.nonzero(arr != np.arange(len(arr)))[0][0])
        raise DataFormatError(
            path, None, "id", f"ids must be exactly 0..{len(arr) - 1}; id {bad} is missing or repeated"
        )
    return pd.DataFrame({"id": arr, "name": [names[j] for j in order]})


def parse_triples(
    path: Path,
    n_entities: int | None,
    n_relations: int | None,
    entity_index: dict[str, int] | None = None,
    relation_index: dict[str, int] | None = None,
) -> pd.DataFrame:
    """A triple file `head \\t relation \\t tail \\t confidence` -> DataFrame h, r, t (int64), conf (float64),
    line (1-based). With entity_index/relation_index the columns are names, mapped through them (O*NET).
    Every field is validated; the first bad one raises DataFormatError with file, line and field."""
    lines = _read_lines(path)
    n = len(lines)
    h = np.empty(n, dtype=np.int64)
    r = np.empty(n, dtype=np.int64)
    t = np.empty(n, dtype=np.int64)
    c = np.empty(n, dtype=np.float64)
    keep = np.ones(n, dtype=bool)
    by_name = entity_index is not None
    for i, line in enumerate(lines):
        if not line.strip():
            keep[i] = False
            continue
        parts = line.split("\t")
        if len(parts) != 4:
            raise DataFormatError(path, i + 1, None, f"expected 4 tab-separated fields, got {len(parts)}")
        try:
            conf = float(parts[3])
        except ValueError:
            raise DataFormatError(path, i + 1, "confidence", f"not a number: {parts[3][:30]!r}") from None
        if not (0.0 <= conf <= 1.0):  # also rejects NaN
            raise DataFormatError(path, i + 1, "confidence", f"{parts[3]} is outside [0, 1]")
        c[i] = conf
        if by_name:
            for j, fld in ((0, "head"), (1, "relation"), (2, "tail")):
                check_name(path, i + 1, fld, parts[j])
            h[i] = entity_index.setdefault(parts[0], len(entity_index))
            r[i] = relation_index.setdefault(parts[1], len(relation_index))  # type: ignore[union-attr]
            t[i] = entity_index.setdefault(parts[2], len(entity_index))
            continue
        for arr, j, fld, bound in (
            (h, 0, "head", n_entities),
            (r, 1, "relation", n_relations),
            (t, 2, "tail", n_entities),
        ):
            try:
                v = int(parts[j])
            except ValueError:
                raise DataFormatError(path, i + 1, fld, f"not an integer id: {parts[j][:30]!r}") from None
            if v < 0 or (bound is not None and v >= bound):
                raise DataFormatError(path, i + 1, fld, f"id {v} out of range 0..{(bound or 1) - 1}")
            arr[i] = v
    line_no = np.arange(1, n + 1, dtype=np.int64)
    return pd.DataFrame({"h": h[keep], "r": r[keep], "t": t[keep], "conf": c[keep], "line": line_no[keep]})


def parse_dataset(spec: DatasetSpec, paths: dict[str, Path], checksums: dict[str, str]) -> KGData:
    """The validated tables of a data set's files (``paths`` by role, their md5 ``checksums``)."""
    if spec.id_format == "ids":
        ents = parse_id_map(paths["entities"], spec.id_map_header)
        rels = parse_id_map(paths["relations"], spec.id_map_header)
        ne, nr = len(ents), len(rels)
        tables = {s: parse_triples(paths[s], ne, nr) for s in SPLITS}
        soft = parse_triples(paths["softlogic"], ne, nr) if "softlogic" in paths else None
        entities = pd.DataFrame({"eid": ents["id"], "name": ents["name"]})
        relations = pd.DataFrame({"rid": rels["id"], "name": rels["name"]})
    else:
        eidx: dict[str, int] = {}
        ridx: dict[str, int] = {}
        tables = {s: parse_triples(paths[s], None, None, eidx, ridx) for s in SPLITS}
        soft = None
        entities = pd.DataFrame({"eid": np.arange(len(eidx), dtype=np.int64), "name": list(eidx)})
        relations = pd.DataFrame({"rid": np.arange(len(ridx), dtype=np.int64), "name": list(ridx)})

    parts = []
    negatives = pd.DataFrame({c: pd.Series(dtype="int64") for c in "hrt"})
    for s in SPLITS:
        tab = tables[s]
        if s == "test":
            neg = tab["conf"] == 0.0
            negatives = tab.loc[neg, ["h", "r", "t"]].reset_index(drop=True)
            tab = tab[~neg]
        parts.append(tab.assign(split=s))
    rows = pd.concat(parts, ignore_index=True)
    rows["split"] = pd.Categorical(rows["split"], categories=list(SPLITS))
    return KGData(
        name=spec.name,
        entities=entities,
        relations=relations,
        rows=rows[["h", "r", "t", "conf", "split", "line"]],
        test_negatives=negatives,
        softlogic=merge_mean(soft) if soft is not None else None,
        checksums=checksums,
    )
