"""Query sets on disk: one Parquet file, one row per query (the hand-off to training and evaluation).

Columns (answers are best first: utility descending, ties by entity id, top 100):
  id str · type str · text str (the design's grammar, entity and relation ids as ``#n``) ·
  atoms list<struct{conj int32, head_var str?, head_eid int64?, relation int64, tail_var str?,
  tail_eid int64?, alpha float64, beta float64, negated bool}> (one struct per atom, ``conj`` = index of
  its conjunction in the DNF; exactly one of *_var / *_eid is set) ·
  answers_easy list<int64> · utilities_easy list<float64> (train graph) ·
  answers_hard list<int64> · utilities_hard list<float64> (the split's graph) · seed int64
and optionally alpha_level str (the level drawn for the query: zero | low | normal | high) and, for
imported SQUK queries, answers_published / utilities_published (best first).
File metadata (key ``pipeline``, JSON): format, dataset, split, alpha, beta, source, seed, counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import ArtifactError

FORMAT = "soft-query-set/1"
META_KEY = b"pipeline"

ATOM_TYPE = pa.struct(
    [
        ("conj", pa.int32()),
        ("head_var", pa.string()),
        ("head_eid", pa.int64()),
        ("relation", pa.int64()),
        ("tail_var", pa.string()),
        ("tail_eid", pa.int64()),
        ("alpha", pa.float64()),
        ("beta", pa.float64()),
        ("negated", pa.bool_()),
    ]
)
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("text", pa.string()),
        ("atoms", pa.list_(ATOM_TYPE)),
        ("answers_easy", pa.list_(pa.int64())),
        ("utilities_easy", pa.list_(pa.float64())),
        ("answers_hard", pa.list_(pa.int64())),
        ("utilities_hard", pa.list_(pa.float64())),
        ("seed", pa.int64()),
    ]
)
OPTIONAL = {
    "alpha_level": pa.string(),
    "answers_published": pa.list_(pa.int64()),
    "utilities_published": pa.list_(pa.float64()),
}
REQUIRED_META = ("dataset", "split", "alpha", "beta", "source")


@dataclass
class QuerySet:
    """A loaded query set: ``frame`` holds the columns above, ``meta`` the file metadata."""

    frame: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.frame)

    def queries(self) -> list:
        """The rows as ``pipeline.query.Query`` objects (same order as ``frame``)."""
        from pipeline.sampling.atoms import records_to_query

        return [records_to_query(list(a)) for a in self.frame["atoms"]]


def write_query_set(rows: list[dict[str, Any]], path: str | Path, meta: dict[str, Any]) -> Path:
    """Write rows (dicts with the columns above) atomically to path; returns the path."""
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise ValueError(f"query set metadata lacks {missing}")
    fields = list(SCHEMA)
    extra = [k for k in OPTIONAL if rows and k in rows[0]]
    fields += [pa.field(k, OPTIONAL[k]) for k in extra]
    schema = pa.schema(fields).with_metadata(
        {META_KEY: json.dumps({"format": FORMAT, **meta}, sort_keys=True)}
    )
    columns = {f.name: [r[f.name] for r in rows] for f in fields}
    table = pa.table(columns, schema=schema)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    pq.write_table(table, tmp)
    tmp.replace(path)  # a crashed run never leaves a file that looks complete
    return path


def read_query_set(path: str | Path) -> QuerySet:
    """Read a query set file (or the only ``*.parquet`` of a directory); ArtifactError names what is wrong."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.parquet"))
        if len(files) != 1:
            raise ArtifactError(
                f"{path}: expected exactly one query set (*.parquet), found {len(files)}; name the file"
            )
        path = files[0]
    if not path.exists():
        raise ArtifactError(f"{path}: no such query set")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"{path}: not a readable Parquet query set ({exc})") from exc
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise ArtifactError(
            f"{path}: no '{META_KEY.decode()}' metadata, so not a query set written by this pipeline"
        )
    meta = json.loads(raw)
    if meta.get("format") != FORMAT:
        raise ArtifactError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise ArtifactError(f"{path}: missing column(s) {', '.join(missing)}")
    return QuerySet(table.to_pandas(), meta, path)
