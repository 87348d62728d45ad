"""The JSON metadata that Parquet artifacts (query sets, answers) carry under the schema key ``pipeline``:
encoded with its format name and sealed; decoded with every check a reader needs, each failure one
ArtifactError naming the file (never a JSONDecodeError or KeyError traceback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.core import atomic, checksums, jsontext
from pipeline.core.errors import ArtifactError
from pipeline.core.provenance import is_sealed, provenance, seal

META_KEY = b"pipeline"


def encode(fmt: str, meta: dict[str, Any], required: tuple[str, ...]) -> bytes:
    """The sealed metadata bytes of a file of format ``fmt``; ValueError when a required key is missing
    (a programming error, not a user's)."""
    missing = [k for k in required if k not in meta]
    if missing:
        raise ValueError(f"{fmt} metadata lacks {missing}")
    stamped = {**meta, "format": fmt}
    stamped.setdefault("provenance", provenance())  # every artifact says what made it
    return json.dumps(seal(stamped), sort_keys=True).encode()


def decode(raw: bytes | None, path: Path, fmt: str, kind: str, required: tuple[str, ...],
           remedy: str = "re-create the file instead of editing it") -> dict[str, Any]:
    """The metadata of ``path`` checked: present, valid JSON, of format ``fmt``, with the required keys,
    sealed and unedited (a missing digest is refused as a wrong one)."""
    article = "an" if kind[:1] in "aeiou" else "a"
    if raw is None:
        raise ArtifactError(f"{path}: no '{META_KEY.decode()}' metadata, so not {article} {kind} written by this pipeline")
    try:
        meta = jsontext.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: its '{META_KEY.decode()}' metadata is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise ArtifactError(f"{path}: its '{META_KEY.decode()}' metadata is not a JSON object")
    if meta.get("format") != fmt:
        raise ArtifactError(f"{path}: format {meta.get('format')!r}, expected {fmt!r} (not {article} {kind})")
    missing = [k for k in required if k not in meta]
    if missing:
        raise ArtifactError(f"{path}: its metadata lacks {', '.join(repr(k) for k in missing)}")
    if "digest" not in meta:
        raise checksums.missing(path, "the digest of its metadata", remedy)
    if not is_sealed(meta):
        raise ArtifactError(f"{path}: its metadata was edited after it was written (digest mismatch); {remedy}")
    return meta


def write_parquet(table: pa.Table, path: Path) -> Path:
    """Write a table atomically, with the checksum of the whole file in its footer
    (:func:`pipeline.core.checksums.seal_file`, filled in before the file is renamed into place)."""
    import pyarrow.parquet as pq  # here: `pipeline query` imports this module and writes no Parquet

    sealed = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), checksums.META_KEY: checksums.PLACEHOLDER}
    )

    def write(tmp: Path) -> None:
        pq.write_table(sealed, tmp)
        checksums.seal_file(tmp)

    return atomic.write_with(path, write)


def read_parquet(path: Path, fmt: str, kind: str, required: tuple[str, ...],
                 remedy: str = "re-create it") -> tuple[pa.Table, dict[str, Any]]:
    """A Parquet artifact and its checked metadata; ArtifactError when missing, unreadable, foreign, or
    without its checksum (``remedy``: the command that writes it again, for the message)."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise ArtifactError(f"{path}: no such {kind}")
    # the checksum first: a damaged file is reported as damaged, whatever the Parquet reader makes of it
    if not checksums.has_seal(path):  # none: not Parquet, not this pipeline's, or its checksum removed
        try:
            schema = pq.read_schema(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ArtifactError(f"{path}: not a readable Parquet {kind} ({exc})") from None
        if META_KEY not in (schema.metadata or {}):
            decode(None, path, fmt, kind, required)  # "not written by this pipeline"
    checksums.verify_sealed_file(path, remedy)
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"{path}: not a readable Parquet {kind} ({exc})") from None
    return table, decode((table.schema.metadata or {}).get(META_KEY), path, fmt, kind, required, remedy)


def peek_format(path: Path) -> str | None:
    """The format a Parquet file's metadata names, read without its rows: None when it is Parquet without
    ``pipeline`` metadata (another tool's file), "" when it cannot be read as Parquet (truncated,
    overwritten) or its metadata is unreadable: a damaged artifact, which a reader reports rather than
    skips."""
    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(path).metadata or {}).get(META_KEY)
    except (pa.ArrowInvalid, OSError):
        return ""
    if raw is None:
        return None
    try:
        meta = jsontext.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""
    return str(meta.get("format", "")) if isinstance(meta, dict) else ""


def read_json(path: str | Path, label: str = "") -> Any:
    """A JSON document; ArtifactError naming the file (and the option it came from) when it is missing or
    not valid JSON."""
    path = Path(path)
    if label.startswith("--"):  # an option: spelled as the caller's front end spells it (--config F / config='F')
        from pipeline.core.errors import option

        where = option(label[2:].replace("-", "_"), str(path))
    else:
        where = f"{label} {path}" if label else str(path)
    try:
        return jsontext.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{where}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{where}: not valid JSON ({exc})") from None


def read_json_object(path: str | Path, label: str = "") -> dict[str, Any]:
    """A JSON object kept by the project beside its work (a ledger, a results table), or {} where there is
    none yet; ArtifactError naming the file when it is damaged (not JSON, or not an object)."""
    path = Path(path)
    if not path.exists():
        return {}
    doc = read_json(path, label)
    if not isinstance(doc, dict):
        raise ArtifactError(f"{f'{label} ' if label else ''}{path}: expected a JSON object, got a JSON "
                            f"{type(doc).__name__}; move it aside to start it afresh")
    return doc
