"""A data set read once: the tables a loader parses from a data set's text files (:class:`KGData`), kept
as one sealed binary file for every later process, and kept loaded for every later call of this one.

:func:`load_dataset` is every loader's entry: find (or fetch) the files, compute and check their md5s, and
return the tables kept in this process, else read back, else parsed (:func:`loaders.base.parse_dataset`)
and kept. This module imports :mod:`loaders.base`, never the other way.

**On disk.** ``PIPELINE_HOME/parsed/<name>/<key>/tables.bin``, a sealed array file
(:mod:`pipeline.core.sealed_arrays`: every array's CRC-32 checked on its first open after a write, a
verification record for the later ones; a file that fails any check is deleted and the text files are
parsed again). ``key`` is a digest of what the tables are made from: this format's version, the data set's
name and id layout, and the md5 of every source file. The md5s are computed on every load, as the loader
always has (they are checked against the published ones, and recorded in a run's metadata), so a source
file changed in any byte gives another key, and is parsed afresh: nothing here trusts a file's name, size
or time. Parsing PPI5k's files took 1.0 s of a fresh ``pipeline query``; reading the tables back takes
about 20 ms.

**Values computed from the tables** (the data-version key of :func:`pipeline.store.ingest.content_key`:
0.3-0.5 s on PPI5k; the engine's index of an observed graph, :func:`pipeline.formats.engine_index.observed_index`)
are kept beside it, ``<key>/<value name>.bin`` (sealed the same way), when first computed
(:meth:`KGData.derived_arrays`), so a later process reads them instead of computing them again.

**In one process** (a notebook), the loaded :class:`KGData` is kept by the same key, at most
:data:`KEEP_LOADED` data sets: a second ``loaders.load`` of an unchanged data set returns the same
object, with the graphs it has merged (its frames are shared: stages treat them as read-only). Every
call still computes the md5s, so a file changed between two calls is noticed.

``PIPELINE_PARSED_CACHE=off`` keeps nothing on disk (each process parses, as before).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

import loaders.base as base
from loaders.base import DatasetSpec, KGData
from pipeline.core import atomic, config, jsontext, sealed_arrays
from pipeline.core.errors import PipelineError

FORMAT = "soft-queries/parsed-dataset/1"
MAGIC = b"SQKGTAB1"
TABLES = "tables.bin"
KEEP_LOADED = 4  # data sets kept loaded in one process (PPI5k ~25 MB, CN15k ~30 MB with their graphs)
KEEP_ON_DISK = 4  # versions of one data set kept on disk (the newest; an edited file makes a new one)
SPLIT_CODES = ("train", "val", "test")

_LOADED: OrderedDict[str, KGData] = OrderedDict()
_LOCK = threading.Lock()


def root() -> Path | None:
    """Where parsed data sets are kept (PIPELINE_PARSED_CACHE, default PIPELINE_HOME/parsed), or None (off)."""
    return config.parsed_cache_root()


def cache_key(spec: DatasetSpec, checksums: dict[str, str]) -> str:
    """What the tables are made from (module docstring): 32 hex digits."""
    h = hashlib.sha256(f"{FORMAT}\0{spec.name}\0{spec.id_format}\0{spec.id_map_header}\0".encode())
    for f in spec.files:
        h.update(f"{f.role}\0{f.filename}\0{checksums.get(f.filename, '-')}\0".encode())
    return h.hexdigest()[:32]


def loaded(key: str) -> KGData | None:
    """The data set this process loaded under ``key``, if it is still kept."""
    with _LOCK:
        kg = _LOADED.get(key)
        if kg is not None:
            _LOADED.move_to_end(key)
        return kg


def keep_loaded(key: str, kg: KGData) -> None:
    with _LOCK:
        _LOADED[key] = kg
        _LOADED.move_to_end(key)
        while len(_LOADED) > KEEP_LOADED:
            _LOADED.popitem(last=False)


def forget_loaded() -> None:
    """Drop every data set this process keeps loaded (tests; a notebook that wants the memory back)."""
    with _LOCK:
        _LOADED.clear()


def folder(spec: DatasetSpec, key: str) -> Path | None:
    base = root()
    return None if base is None else base / spec.name / key


def load_dataset(spec: DatasetSpec, source: str | Path | None = None, verify: bool = True) -> KGData:
    """Fetch (or find) and parse a data set into validated tables. verify=False skips the md5 check
    (for small hand-written files in the upstream format). The md5 of every file is computed on every
    call (or read from its record while the file's stamp holds); tables parsed before from files with the
    same md5s are reused (kept in this process, else read back from
    their sealed binary file)."""
    folder = base.resolve_source(spec, source)
    checksums: dict[str, str] = {}
    paths: dict[str, Path] = {}
    for f in spec.files:
        p = folder / f.filename
        if not p.exists():
            if f.role == "softlogic":
                continue  # optional: only UKGE+PSL needs it
            raise PipelineError(f"{folder}: missing file {f.filename} of data set {spec.name}")
        checksums[f.filename] = base.verify_md5(p, f.md5 if verify else None, file_md5)
        paths[f.role] = p
    key = cache_key(spec, checksums)
    kg = loaded(key) or read(spec, key, checksums)
    if kg is None:
        kg = base.parse_dataset(spec, paths, checksums)
        write(spec, key, kg)
    keep_loaded(key, kg)
    return kg


# ------------------------------------------------------------------------------------ source files' md5

_MD5S: dict[str, tuple[sealed_arrays.Stamp, str]] = {}  # by absolute path: (the file's stamp, its md5)
MD5_RECORDS = "md5.json"


def file_md5(path: Path) -> str:
    """The md5 of a source file: summed, or read from a record of an earlier sum of the same file while
    its stamp (device, inode, size, mtime, ctime: :mod:`pipeline.core.sealed_arrays`) is unchanged.
    Any write to the file changes its ctime, hence its stamp, hence a new sum; a sum is recorded only once
    the file's times are settled (the verification records' rule), in this process and under the cache
    folder (``md5.json``)."""
    where = Path(path).resolve()
    stamp = sealed_arrays.file_stamp(os.stat(where))
    with _LOCK:
        hit = _MD5S.get(str(where))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    records = _md5_records()
    got = records.get(str(where))
    if isinstance(got, list) and len(got) == 2 and tuple(got[0]) == stamp and isinstance(got[1], str):
        digest = got[1]
    else:
        digest = base.md5sum(where)
        if not sealed_arrays.settled(stamp):
            return digest
        records[str(where)] = [list(stamp), digest]
        _save_md5_records(records)
    with _LOCK:
        _MD5S[str(where)] = (stamp, digest)
    return digest


def _md5_records() -> dict[str, list]:
    base = root()
    if base is None:
        return {}
    try:
        doc = jsontext.loads((base / MD5_RECORDS).read_bytes())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _save_md5_records(records: dict[str, list]) -> None:
    base = root()
    if base is None:
        return
    kept = {p: r for p, r in records.items() if os.path.exists(p)}  # a staged or removed folder's go
    with contextlib.suppress(OSError):
        base.mkdir(parents=True, exist_ok=True)
        atomic.write_text(base / MD5_RECORDS, json.dumps(kept, sort_keys=True))


# ------------------------------------------------------------------------------------------ the tables


def read(spec: DatasetSpec, key: str, checksums: dict[str, str]) -> KGData | None:
    """The tables kept under ``key``, or None (none kept, or a file that fails its checks: deleted)."""
    where = folder(spec, key)
    if where is None:
        return None
    path = where / TABLES
    try:
        opened = sealed_arrays.open_checked(path, MAGIC, {"format": FORMAT, "key": key, "dataset": spec.name})
        kg = _tables(spec, opened.head, opened.arrays, checksums)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        sealed_arrays.discard(path)
        return None
    kg.bind_derived(_derived_reader(where, key), _derived_writer(where, key))
    return kg


def write(spec: DatasetSpec, key: str, kg: KGData) -> None:
    """Keep ``kg``'s tables under ``key`` (best effort: a home that cannot be written keeps parsing), and
    bind its derived values to the same folder. Older versions of the data set beyond
    :data:`KEEP_ON_DISK` are removed."""
    where = folder(spec, key)
    if where is None:
        return
    fields, arrays = _arrays(kg)
    try:
        where.mkdir(parents=True, exist_ok=True)
        sealed_arrays.write_file(where / TABLES, MAGIC, {"format": FORMAT, "key": key, "dataset": spec.name,
                                                          **fields}, arrays)
    except OSError:
        return
    kg.bind_derived(_derived_reader(where, key), _derived_writer(where, key))
    _prune(where.parent, keep=where)


def _prune(parent: Path, keep: Path) -> None:
    try:
        others = sorted((p for p in parent.iterdir() if p.is_dir() and p != keep),
                        key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in others[KEEP_ON_DISK - 1:]:
        shutil.rmtree(old, ignore_errors=True)


def _names(values: list[str]) -> np.ndarray:
    """Names as one UTF-8 blob joined by NUL (a loader never accepts a NUL in a name)."""
    return np.frombuffer("\0".join(values).encode("utf-8"), dtype=np.uint8)


def _unnames(blob: np.ndarray, n: int) -> list[str]:
    if n == 0:
        return []
    got = blob.tobytes().decode("utf-8").split("\0")
    if len(got) != n:
        raise sealed_arrays.Invalid("name count")
    return got


_INT = ("h", "r", "t")


def _arrays(kg: KGData) -> tuple[dict[str, object], list[np.ndarray]]:
    """The header fields and arrays of ``kg``'s tables (the order :func:`_tables` reads them in)."""
    rows, neg, soft = kg.rows, kg.test_negatives, kg.softlogic
    ent, rel = kg.entities["name"].tolist(), kg.relations["name"].tolist()
    arrays = [
        _names(ent), kg.entities["eid"].to_numpy(np.int64),
        _names(rel), kg.relations["rid"].to_numpy(np.int64),
        *(rows[c].to_numpy(np.int64) for c in _INT), rows["conf"].to_numpy(np.float64),
        rows["split"].cat.codes.to_numpy(np.int8), rows["line"].to_numpy(np.int64),
        *(neg[c].to_numpy(np.int64) for c in _INT),
    ]
    if soft is not None:
        arrays += [*(soft[c].to_numpy(np.int64) for c in _INT), soft["conf"].to_numpy(np.float64)]
    fields = {"entities": len(ent), "relations": len(rel), "softlogic": soft is not None,
              "splits": list(rows["split"].cat.categories)}
    return fields, arrays


def _tables(spec: DatasetSpec, head: dict, a: tuple[np.ndarray, ...], checksums: dict[str, str]) -> KGData:
    """:class:`KGData` from the arrays of :func:`_arrays` (copied out of the map: the frames own their
    memory, the file can go)."""
    if head.get("splits") != list(SPLIT_CODES) or len(a) != (17 if head.get("softlogic") else 13):
        raise sealed_arrays.Invalid("layout")
    n_ent, n_rel = int(head["entities"]), int(head["relations"])
    entities = pd.DataFrame({"eid": a[1].copy(), "name": _unnames(a[0], n_ent)})
    relations = pd.DataFrame({"rid": a[3].copy(), "name": _unnames(a[2], n_rel)})
    if len(entities) != n_ent or len(relations) != n_rel:
        raise sealed_arrays.Invalid("sizes")
    split = pd.Categorical.from_codes(a[8].astype(np.int8), categories=list(SPLIT_CODES))
    rows = pd.DataFrame({"h": a[4].copy(), "r": a[5].copy(), "t": a[6].copy(), "conf": a[7].copy(),
                         "split": split, "line": a[9].copy()})
    negatives = pd.DataFrame({"h": a[10].copy(), "r": a[11].copy(), "t": a[12].copy()})
    soft = None
    if head["softlogic"]:
        soft = pd.DataFrame({"h": a[13].copy(), "r": a[14].copy(), "t": a[15].copy(), "conf": a[16].copy()})
    return KGData(name=spec.name, entities=entities, relations=relations, rows=rows, test_negatives=negatives,
                  softlogic=soft, checksums=dict(checksums))


# ------------------------------------------------------------------------------------- derived values

DERIVED_MAGIC = b"SQKGVAL1"


def _derived_file(where: Path, name: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return where / f"{safe}.bin"


def _derived_reader(where: Path, key: str) -> Callable[[str], tuple[np.ndarray, ...] | None]:
    def read_value(name: str) -> tuple[np.ndarray, ...] | None:
        path = _derived_file(where, name)
        try:
            opened = sealed_arrays.open_checked(path, DERIVED_MAGIC, {"format": FORMAT, "key": key, "name": name})
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            sealed_arrays.discard(path)
            return None
        return opened.arrays

    return read_value


def _derived_writer(where: Path, key: str) -> Callable[[str, tuple[np.ndarray, ...]], None]:
    def write_value(name: str, arrays: tuple[np.ndarray, ...]) -> None:
        with contextlib.suppress(OSError):
            sealed_arrays.write_file(_derived_file(where, name), DERIVED_MAGIC,
                                     {"format": FORMAT, "key": key, "name": name}, list(arrays))

    return write_value
