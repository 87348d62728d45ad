"""Query sets on disk: one Parquet file, one row per query (the hand-off to training and evaluation).

Columns (answers are best first: utility descending, the top 100 plus the whole tie group at the cut, a
group listed by id):
  id str · type str · text str (the design's grammar, entity and relation ids as ``#n``) ·
  atoms list<struct{conj int32, head_var str?, head_eid int64?, relation int64, tail_var str?,
  tail_eid int64?, alpha float64, beta float64, negated bool}> (one struct per atom, ``conj`` = index of
  its conjunction in the DNF; exactly one of *_var / *_eid is set) ·
  answers_easy list<int64> · utilities_easy list<float64> (train graph) ·
  answers_hard list<int64> · utilities_hard list<float64> (the split's graph) · seed int64
and optionally alpha_level str (the level drawn for the query: zero | low | normal | high; under the
squk alpha mode the atoms' levels in atom order, e.g. low,high), named_text str
(the text with names, quoted where a name needs it; sampled sets) and, for
imported SQUK queries, answers_published / utilities_published (best first), and answers_paper
list<int64> (the truth the paper protocol reads, best first: the list the SQUK generator would have written
for a sampled valid or test query, :mod:`pipeline.squk.generator_order`; the published list for an imported
one).
File metadata (key ``pipeline``, JSON, sealed; :mod:`pipeline.formats.meta`): format, dataset, split, alpha,
beta, source, seed, counts, provenance. Atoms are flat records (``query_to_records`` / ``records_to_query``),
variables stored by name without the ``?``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.formats import meta as metafile
from pipeline.softquery.model import Atom, Conjunction, Const, Query, Var

FORMAT = "soft-query-set/1"

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
    # the text with entity and relation names (``co_attends("Evelyn Jefferson", ?y, 0.3)``), for people and
    # notebooks; ``text`` (ids) stays the one the stages parse
    "named_text": pa.string(),
    "answers_published": pa.list_(pa.int64()),
    "utilities_published": pa.list_(pa.float64()),
    # the truth the paper protocol reads, best first: the list the SQUK generator writes (sampled valid and
    # test sets: pipeline.squk.generator_order) or the published file's own (imported sets)
    "answers_paper": pa.list_(pa.int64()),
}
REQUIRED_META = ("dataset", "split", "alpha", "beta", "source")


@dataclass
class QuerySet:
    """A query set: ``frame`` (one row per query: id, type, text (ids), named_text (names), atoms, the
    answers and utilities on the train graph (answers_easy, utilities_easy) and on the split's graph
    (answers_hard, utilities_hard), best first, seed; :mod:`pipeline.formats.queryset` says more),
    ``meta`` (data set, split, alpha, beta, seed, ...), its file's ``path`` and, when it was just sampled,
    ``summary`` (what ``pipeline sample --json`` prints).

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.QuerySet)][:4]
    ['frame', 'meta', 'path', 'summary']
    """

    frame: pd.DataFrame = field(repr=False)
    meta: dict[str, Any] = field(default_factory=dict, repr=False)
    path: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict, repr=False)
    # the parsed queries of `frame` (that very object: a frame replaced is parsed again); calibration
    # answers one valid set many times (every delta of every epoch)
    _parsed: tuple[pd.DataFrame, list] | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.frame)

    def queries(self) -> list:
        """The rows as ``pipeline.softquery.Query`` objects (same order as ``frame``; immutable, parsed once)."""
        if self._parsed is None or self._parsed[0] is not self.frame:
            self._parsed = (self.frame, [records_to_query(list(a)) for a in self.frame["atoms"]])
        return list(self._parsed[1])


def write_query_set(rows: list[dict[str, Any]], path: str | Path, meta: dict[str, Any]) -> Path:
    """Write rows (dicts with the columns above) atomically to path; returns the path."""
    fields = list(SCHEMA)
    extra = [k for k in OPTIONAL if rows and k in rows[0]]
    fields += [pa.field(k, OPTIONAL[k]) for k in extra]
    schema = pa.schema(fields).with_metadata({metafile.META_KEY: metafile.encode(FORMAT, meta, REQUIRED_META)})
    columns = {f.name: [r[f.name] for r in rows] for f in fields}
    return metafile.write_parquet(pa.table(columns, schema=schema), Path(path))


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
    table, meta = metafile.read_parquet(path, FORMAT, "query set", REQUIRED_META,
                                       "write it again (`pipeline sample`, or `pipeline import-squk` for a published set)")
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise ArtifactError(f"{path}: missing column(s) {', '.join(missing)}")
    qs = QuerySet(table.to_pandas(), meta, path)
    # every query checked on read, as a typed one is (alpha, beta, terms): a beta of 1e39 written by any
    # writer is refused here, not answered as inf (the parsed queries are kept for the reader)
    parsed = []
    for qid, atoms in zip(qs.frame["id"], qs.frame["atoms"], strict=True):
        try:
            parsed.append(records_to_query(list(atoms)))
        except ArtifactError as exc:
            raise ArtifactError(f"{path}: query {qid}: {exc}") from None
    qs._parsed = (qs.frame, parsed)
    return qs


# The answer-list columns, hashed as raw little-endian arrays (lengths, then values): JSON-encoding their
# cells one by one took ~1 s of every fresh `pipeline answer` once truths hold whole tie groups.
_ARRAY_COLUMNS = {"answers_easy": "<i8", "answers_hard": "<i8", "utilities_easy": "<f8", "utilities_hard": "<f8"}


def checksum(frame: pd.DataFrame) -> str:
    """The content of a query set, every column (ids, texts, atom records with their entity ids, answers,
    utilities, seeds): caches and stage keys depend on the queries, never on a file name, and a query whose
    ``head_eid`` changed while its text did not is another query."""
    h = hashlib.sha256()
    for col in sorted(frame.columns):
        h.update(f"{col}\n".encode())
        dtype = _ARRAY_COLUMNS.get(col)
        if dtype is not None:
            cells = [np.asarray(v, dtype=dtype) for v in frame[col]]
            h.update(np.asarray([len(c) for c in cells], dtype="<i8").tobytes())
            h.update(np.concatenate(cells).tobytes() if cells else b"")
            continue
        for value in frame[col]:
            h.update(json.dumps(_plain(value), sort_keys=True, default=str).encode())
            h.update(b"\n")
    return h.hexdigest()[:16]


def _plain(value: Any) -> Any:
    """A cell as plain JSON values (numpy arrays and scalars, missing values as None)."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


# ------------------------------------------------------------------------------------------ atom records


def query_to_records(query: Query) -> list[dict[str, Any]]:
    out = []
    for ci, conj in enumerate(query.conjunctions):
        for a in conj.atoms:
            rec: dict[str, Any] = {
                "conj": ci,
                "relation": int(a.relation),
                "alpha": float(a.alpha),
                "beta": float(a.beta),
                "negated": bool(a.negated),
            }
            for side, term in (("head", a.head), ("tail", a.tail)):
                rec[f"{side}_var"] = term.name if isinstance(term, Var) else None
                rec[f"{side}_eid"] = int(term.eid) if isinstance(term, Const) else None
            out.append(rec)
    return out


def records_to_query(records: list[dict[str, Any]]) -> Query:
    """Inverse of :func:`query_to_records`; ArtifactError on a record that is not one atom."""
    conjs: dict[int, list[Atom]] = {}
    for rec in records:
        try:
            terms = []
            for side in ("head", "tail"):
                var, eid = rec.get(f"{side}_var"), rec.get(f"{side}_eid")
                if (var is None) == (eid is None or eid != eid):  # exactly one of the two (NaN = missing)
                    raise ArtifactError(f"atom record {rec}: needs exactly one of {side}_var, {side}_eid")
                terms.append(Var(str(var)) if var is not None else Const(int(eid)))
            atom = Atom(
                terms[0],
                int(rec["relation"]),
                terms[1],
                float(rec["alpha"]),
                float(rec["beta"]),
                bool(rec["negated"]),
            )
        except (KeyError, TypeError, ValueError, PipelineError) as exc:
            raise ArtifactError(f"malformed atom record {rec}: {exc}") from exc
        conjs.setdefault(int(rec["conj"]), []).append(atom)
    if not conjs:
        raise ArtifactError("a query with no atoms")
    return Query(tuple(Conjunction(tuple(conjs[k])) for k in sorted(conjs)))
