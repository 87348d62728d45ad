"""Witnesses files: the top-K explained answers of an answers file, written beside it
(``<answers stem>.witnesses.parquet``).

One row per (query, answer, atom) of the winning branch, names not ids where a person reads:
  query_id str · query str (text with names) · rank int64 (1 = best) · entity int64 · entity_name str ·
  utility float64 · branch int32 (conjunction that won, from 0) · witness str (JSON {"?x": name, ...}) ·
  atom int32 (position in the branch) · relation str · head str · tail str · head_eid int64 ·
  tail_eid int64 (the entities' ids, for the write-back's links) · negated bool ·
  confidence float64 · source str (observed | predicted | missing) · alpha float64 · beta float64 ·
  value float64 (NaN = the atom fails)
File metadata (key ``pipeline``, JSON, sealed): format, dataset, method, answers (the file explained), k.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from pipeline.formats import meta as metafile

FORMAT = "soft-query-witnesses/1"
REQUIRED_META = ("dataset", "method", "answers", "k")

SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("query", pa.string()),
        ("rank", pa.int64()),
        ("entity", pa.int64()),
        ("entity_name", pa.string()),
        ("utility", pa.float64()),
        ("branch", pa.int32()),
        ("witness", pa.string()),
        ("atom", pa.int32()),
        ("relation", pa.string()),
        ("head", pa.string()),
        ("tail", pa.string()),
        ("head_eid", pa.int64()),
        ("tail_eid", pa.int64()),
        ("negated", pa.bool_()),
        ("confidence", pa.float64()),
        ("source", pa.string()),
        ("alpha", pa.float64()),
        ("beta", pa.float64()),
        ("value", pa.float64()),
    ]
)


def witnesses_path(answers_path: str | Path) -> Path:
    p = Path(answers_path)
    return p.with_name(p.stem + ".witnesses.parquet")


def rows_of(
    query_id: str, query_text: str, records: list[dict[str, Any]], ends: list[list[tuple[int, int]]]
) -> list[dict[str, Any]]:
    """Flatten the witness records (pipeline.explanations.witness_record) of one query's ranked answers;
    ends[i][j] = (head id, tail id) of record i's atom j."""
    rows = []
    for rank, (rec, rec_ends) in enumerate(zip(records, ends, strict=True), start=1):
        witness = json.dumps({v: x["name"] for v, x in rec["witness"].items()}, sort_keys=True)
        for i, (a, (head_eid, tail_eid)) in enumerate(zip(rec["atoms"], rec_ends, strict=True)):
            rows.append(
                {
                    "query_id": query_id, "query": query_text, "rank": rank, "entity": rec["eid"],
                    "entity_name": rec["name"], "utility": rec["utility"], "branch": rec.get("branch", 0),
                    "witness": witness, "atom": i, "relation": a["relation"], "head": a["head"],
                    "tail": a["tail"], "head_eid": int(head_eid), "tail_eid": int(tail_eid), "negated": bool(a.get("negated", False)), "confidence": a["confidence"],
                    "source": a["source"], "alpha": a["alpha"], "beta": a["beta"],
                    "value": float("nan") if a["value"] is None else a["value"],
                }
            )
    return rows


def write_witnesses(rows: list[dict[str, Any]], path: str | Path, meta: dict[str, Any]) -> Path:
    """Write witness rows atomically."""
    frame = pd.DataFrame(rows, columns=[f.name for f in SCHEMA])
    schema = SCHEMA.with_metadata({metafile.META_KEY: metafile.encode(FORMAT, meta, REQUIRED_META)})
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    return metafile.write_parquet(table, Path(path))


def read_witnesses(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    table, meta = metafile.read_parquet(Path(path), FORMAT, "witnesses file", REQUIRED_META,
                                        "answer again with --explain to write it")
    return table.to_pandas(), meta
