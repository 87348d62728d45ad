"""The neural adjacency export format (design section 2): a folder of Arrow IPC files, one per relation, and
a manifest; the one module that writes manifests and reads exports (:mod:`pipeline.stages.export` scores them).

    manifest.json        format, dataset, model, model_hash, threshold, n_entities, n_relations, per-relation
                         files (nnz, bytes), provenance; sealed with a digest
    rel-0000.arrow ...   head int32, tail int32, score float32, sorted by (head, tail); the schema metadata
                         repeats format, dataset, model_hash, threshold, n_entities, relation, so a file
                         separated from its manifest still says what it is

Reading cross-checks the manifest against every file's own metadata and against the data set, so an edited
manifest (another threshold, another entity count) is refused instead of recorded as the truth.

A distributed export (an executor other than local, :mod:`pipeline.executors`) first writes **shards**:
one Arrow IPC file per (relation, head range), ``rel-0003-h000001118-000002236.arrow``, holding that range's
record batches exactly as the single-process export writes them, on a local folder or any pyarrow/fsspec
filesystem URI (s3://, gs://, file://, mock://). A shard's schema metadata names its export (model hash,
threshold, top-k) and its range, so a re-run reuses what is there and refuses a shard of another export;
the driver then concatenates the shards in head order into the relation files above.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch

from pipeline.core import atomic, checksums, jsontext
from pipeline.core.errors import ArtifactError, option
from pipeline.core.kg import GraphTensors
from pipeline.core.provenance import is_sealed, seal

if TYPE_CHECKING:
    import pyarrow.fs as pafs

FORMAT = "soft-queries/neural-adjacency/1"
MANIFEST = "manifest.json"
SCHEMA = pa.schema([("head", pa.int32()), ("tail", pa.int32()), ("score", pa.float32())])


def relation_file(r: int) -> str:
    return f"rel-{r:04d}.arrow"


# what a shard's metadata must repeat for a re-run to reuse it
SHARD_KEYS = ("format", "dataset", "model_hash", "threshold", "top_k", "n_entities", "relation", "head_start", "head_stop")


def shard_file(r: int, start: int, stop: int) -> str:
    """The shard of relation r, heads start..stop-1 (zero-padded so names sort in head order)."""
    return f"rel-{r:04d}-h{start:09d}-{stop:09d}.arrow"


def shard_filesystem(location: str | Path) -> tuple[pafs.FileSystem, str]:
    """(filesystem, base path) of a shard location: a local folder, a URI pyarrow knows (file://, s3://,
    gs://, hdfs://, mock://) or, failing that, one fsspec knows (wrapped for pyarrow)."""
    import pyarrow.fs as pafs  # here: a distributed export alone needs it (its import costs a query)

    text = str(location)
    if "://" not in text:
        return pafs.LocalFileSystem(), str(Path(text).resolve())
    try:
        return pafs.FileSystem.from_uri(text)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        try:
            import fsspec

            fs, path = fsspec.core.url_to_fs(text)
        except (ImportError, ValueError) as exc2:
            raise ArtifactError(f"{option('shards', text)}: no filesystem for this URI ({exc}; fsspec: {exc2})") from None
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def write_shard(
    fs: pafs.FileSystem, path: str, meta: dict[str, str], batches: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> int:
    """Write one shard (head int32, tail int32, score float32 batches, in order) under a temporary name,
    then move it into place, so a killed writer never leaves a shard that looks complete. Returns its bytes."""
    schema = SCHEMA.with_metadata(meta)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    with fs.open_output_stream(tmp) as sink, pa.ipc.new_file(sink, schema) as writer:
        for h, t, s in batches:
            writer.write_batch(pa.record_batch([pa.array(h), pa.array(t), pa.array(s)], schema=schema))
    fs.move(tmp, path)
    return int(fs.get_file_info(path).size)


def read_shard(
    fs: pafs.FileSystem, path: str, expect: dict[str, str]
) -> tuple[list[pa.RecordBatch], dict[str, str]] | None:
    """A shard's (record batches, schema metadata) when it is complete and belongs to the export ``expect`` describes (its
    SHARD_KEYS); None when it is missing or unreadable (a partial write: score it again). ArtifactError
    when it is a readable shard of another export: it is not ours to overwrite."""
    try:
        with fs.open_input_file(path) as src:
            reader = pa.ipc.open_file(src)
            meta = {k.decode(): v.decode() for k, v in (reader.schema.metadata or {}).items()}
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    except (FileNotFoundError, pa.ArrowInvalid, pa.ArrowIOError, OSError):
        return None
    differ = [k for k in SHARD_KEYS if meta.get(k) != expect.get(k)]
    if differ:
        k = differ[0]
        raise ArtifactError(
            f"shard {path}: belongs to another export ({k} {meta.get(k)!r}, this export's {expect.get(k)!r}); "
            f"remove it or choose another {option('shards')}"
        )
    return batches, meta


EXPORT_AGAIN = "export the run again (`pipeline export RUN_DIR --out` this folder, with --overwrite)"


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """The manifest, sealed (written last: its presence marks the export complete), with the digest
    of every relation file it lists (:mod:`pipeline.core.checksums`; checked by :func:`load_adjacency`)."""
    for rel in manifest.get("relations", []):
        rel.setdefault(checksums.MANIFEST_KEY, checksums.file_digest(folder / rel["file"]))
    atomic.write_text(folder / MANIFEST, json.dumps(seal(manifest), indent=2, sort_keys=True) + "\n")


def _run_hint(folder: Path) -> str:
    """Where a trained run is given for an export: how to make its export (in the caller's words)."""
    from pipeline.core.errors import front_end

    if not ((folder / "config.json").is_file() and (folder / "model.pt").is_file()):
        return ""
    how = "pl.export(run)" if front_end() == "python" else f"`pipeline export {folder}`"
    return f"; it is a trained run: {how} writes its export, then answer over that"


def read_manifest(folder: Path) -> dict[str, Any]:
    """The checked manifest of an export folder; ArtifactError when missing, unreadable, foreign or edited."""
    try:
        manifest = jsontext.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        raise ArtifactError(f"{folder}: not a neural adjacency export (no {MANIFEST}){_run_hint(Path(folder))}") from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{folder / MANIFEST}: unreadable ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        fmt = manifest.get("format") if isinstance(manifest, dict) else None
        raise ArtifactError(f"{folder / MANIFEST}: format {fmt!r}, expected {FORMAT!r}")
    if "digest" not in manifest:
        raise checksums.missing(folder / MANIFEST, "the digest of the manifest", EXPORT_AGAIN)
    if not is_sealed(manifest):
        raise ArtifactError(
            f"{folder / MANIFEST}: edited after the export was written (digest mismatch); export again instead"
        )
    missing = [k for k in ("dataset", "model_hash", "threshold", "n_entities", "n_relations", "relations") if k not in manifest]
    if missing:
        raise ArtifactError(f"{folder / MANIFEST}: lacks {', '.join(missing)}")
    _check_totals(folder, manifest)
    return manifest


def _check_totals(folder: Path, manifest: dict[str, Any]) -> None:
    """The manifest's totals against its relations' entries. The digest is no key (anyone can compute it
    again): an edit that reseals the manifest is caught only where the manifest disagrees with itself or
    with the files (each relation's rows and size are checked against its file when it is read)."""
    rels = manifest["relations"]
    if not isinstance(rels, list) or not all(isinstance(r, dict) for r in rels):
        raise ArtifactError(f"{folder / MANIFEST}: 'relations' is not a list of entries")
    for key in ("nnz", "bytes"):
        if key not in manifest:
            continue
        values = [r.get(key) for r in rels]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            raise ArtifactError(f"{folder / MANIFEST}: a relation's '{key}' is not a count; {EXPORT_AGAIN}")
        if manifest[key] != sum(values):
            raise ArtifactError(f"{folder / MANIFEST}: its '{key}' ({manifest[key]}) is not the sum over its relations "
                                f"({sum(values)}): edited after the export was written; {EXPORT_AGAIN}")


def reusable(out: Path, model_hash: str, threshold: float, top_k: int | None = None) -> dict[str, Any] | None:
    """The manifest of a complete export of this exact model, threshold and top-k cap at `out`, else None."""
    try:
        manifest = read_manifest(out)
    except ArtifactError:
        return None
    if manifest.get("model_hash") != model_hash:
        return None
    if float(manifest.get("threshold", -1)) != float(threshold) or manifest.get("top_k") != top_k:
        return None
    for rel in manifest.get("relations", []):
        p = out / rel["file"]
        if not p.exists() or p.stat().st_size != rel["bytes"]:
            return None
        try:  # the schema alone (the file's footer): cheap, and it holds what the manifest claims
            with pa.memory_map(str(p), "r") as src:
                meta = {k.decode(): v.decode() for k, v in (pa.ipc.open_file(src).schema.metadata or {}).items()}
        except (pa.ArrowInvalid, OSError):
            return None
        if meta.get("model_hash") != model_hash or float(meta.get("threshold", -1)) != float(threshold):
            return None
        # a damaged file is exported again, not reported as a cached export (hashing is cheap beside scoring)
        if checksums.MANIFEST_KEY in rel and checksums.file_digest(p) != rel[checksums.MANIFEST_KEY]:
            return None
    return manifest


def read_relation_file(
    path: Path, manifest: dict[str, Any] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """One relation's (head, tail, score) arrays and its schema metadata; ArtifactError on a truncated,
    foreign or inconsistent file."""
    try:
        with pa.memory_map(str(path), "r") as src:
            reader = pa.ipc.open_file(src)
            schema = reader.schema
            table = reader.read_all()
    except FileNotFoundError:
        raise ArtifactError(f"{path}: missing from the export") from None
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise ArtifactError(f"{path}: not a readable Arrow IPC file (truncated or foreign?): {exc}") from None
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    if meta.get("format") != FORMAT:
        raise ArtifactError(f"{path}: not a neural adjacency file (schema metadata has no format '{FORMAT}')")
    if not schema.remove_metadata().equals(SCHEMA):
        raise ArtifactError(
            f"{path}: columns {schema.remove_metadata()} instead of head int32, tail int32, score float32"
        )
    if manifest is not None:
        for key in ("dataset", "model_hash", "threshold", "n_entities"):
            if key not in meta:
                continue
            same = (
                float(meta[key]) == float(manifest[key]) if key == "threshold" else meta[key] == str(manifest[key])
            )
            if not same:
                raise ArtifactError(
                    f"{path}: {key} {meta[key]!r} differs from the manifest's {manifest[key]!r} "
                    "(an edited manifest or a file of another export)"
                )
    # copies in the file's own dtypes (int32 ids): nothing keeps pointing into the closed memory map
    h = table.column("head").to_numpy().astype(np.int32)
    t = table.column("tail").to_numpy().astype(np.int32)
    s = table.column("score").to_numpy().astype(np.float32)
    return h, t, s, meta


def checked_manifest(
    folder: str | Path, dataset: str | None = None, n_entities: int | None = None, n_relations: int | None = None
) -> dict[str, Any]:
    """An export's manifest, checked against the data set it should belong to (name and sizes) before any
    relation file is read: ArtifactError on a mismatch. :func:`load_adjacency` starts with it; a caller that
    leaves the files to another process (an executor's actors) calls it alone."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if dataset is not None and manifest["dataset"] != dataset:
        raise ArtifactError(f"{folder}: an export of data set '{manifest['dataset']}', not '{dataset}'")
    for what, have, want in (("entities", manifest["n_entities"], n_entities), ("relations", manifest["n_relations"], n_relations)):
        if want is not None and int(have) != want:
            raise ArtifactError(f"{folder}: an export of {have} {what}, but {manifest['dataset']} has {want}")
    return manifest


def load_adjacency(
    path: str | Path,
    dataset: str | None = None,
    device: str | torch.device = "cpu",
    n_entities: int | None = None,
    n_relations: int | None = None,
    verify: bool = True,
) -> tuple[GraphTensors, dict[str, Any]]:
    """An export directory as the engine's input graph, plus its manifest.

    Returns (GraphTensors with conf = predicted confidence >= threshold, head/rel/tail int32 (half the
    memory of int64; every id < 2^31), manifest dict). With `dataset`,
    an export of another data set raises ArtifactError; so do a missing manifest, and a truncated,
    foreign, unsorted or out-of-range relation file; with ``n_entities``/``n_relations`` (the data set's
    sizes) so does an export whose sizes differ. Each relation file's digest is checked against
    the manifest's (CorruptArtifactError naming the file; ``verify=False`` skips it, for measuring).
    """
    folder = Path(path)
    manifest = checked_manifest(folder, dataset, n_entities, n_relations)
    n, n_rel, thr = int(manifest["n_entities"]), int(manifest["n_relations"]), float(manifest["threshold"])
    rel_ids = [int(rel["relation"]) for rel in manifest["relations"]]
    if sorted(rel_ids) != list(range(n_rel)):
        raise ArtifactError(f"{folder / MANIFEST}: relations {rel_ids} are not exactly 0..{n_rel - 1}")
    counts = np.zeros(n_rel, np.int64)
    for rel in manifest["relations"]:
        counts[int(rel["relation"])] = int(rel["nnz"])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    # Ids as int32 (entity and relation ids < 2^31; offsets stay int64): 16 bytes per fact instead of 28,
    # and the engine's rows by head are these very arrays (pipeline.engine.Adjacency.from_graph). Each file
    # is read into its slice of arrays allocated once: no list of parts plus a concatenated copy.
    ids = np.int32 if n <= 1 << 31 and n_rel <= 1 << 31 else np.int64
    total = int(offsets[-1])
    head, tail = np.empty(total, ids), np.empty(total, ids)
    rel_col, conf = np.empty(total, ids), np.empty(total, np.float32)
    for rel in manifest["relations"]:
        file = folder / rel["file"]
        if verify:  # a file the manifest lists without its digest is refused as a damaged one
            if checksums.MANIFEST_KEY not in rel:
                raise checksums.missing(file, f"its checksum (the manifest's '{checksums.MANIFEST_KEY}' entry)",
                                        EXPORT_AGAIN)
            checksums.check_file(file, str(rel[checksums.MANIFEST_KEY]))
        h, t, s, meta = read_relation_file(file, manifest)
        if "bytes" in rel and (size := file.stat().st_size) != rel["bytes"]:
            raise ArtifactError(f"{file}: {size} bytes, the manifest says {rel['bytes']}; {EXPORT_AGAIN}")
        r = int(rel["relation"])
        if meta.get("relation") != str(r) or len(h) != rel["nnz"]:
            raise ArtifactError(
                f"{file}: relation/size differ from the manifest (relation {meta.get('relation')}, {len(h)} rows)"
            )
        if len(h):
            if h.min() < 0 or t.min() < 0 or h.max() >= n or t.max() >= n:
                raise ArtifactError(f"{file}: entity id out of range 0..{n - 1}")
            key = h.astype(np.int64) * n + t
            if np.any(np.diff(key) <= 0):
                raise ArtifactError(f"{file}: rows not sorted by (head, tail) or repeated")
            del key
            if s.min() < np.float32(thr) or s.max() > 1.0:
                raise ArtifactError(f"{file}: scores outside [{thr}, 1]")
        # each file is sorted by (head, tail) and checked above; placed at its relation's offset, the graph
        # is sorted by (relation, head, tail) without a re-sort
        lo, hi = int(offsets[r]), int(offsets[r + 1])
        head[lo:hi], tail[lo:hi], conf[lo:hi] = h, t, s
        rel_col[lo:hi] = r

    def as_t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, device=device)

    graph = GraphTensors(
        manifest["dataset"], n, n_rel, as_t(head), as_t(rel_col), as_t(tail), as_t(conf), as_t(offsets)
    )
    return graph, manifest
