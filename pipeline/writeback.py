"""Writes for browsing in the graph store (design section 3, the last stage of the data flow): the queries
of a query set and, after answering, their top answers.

    (:Query {dataset, set, qid, type, text, split, n_easy, n_hard, top_answers, file})-[:ANCHOR {position}]->(:Entity)
    (:Query)-[:ANSWER {rank, utility, method, truth_utility}]->(:Entity)

``set`` is the query set's identity, ``<file stem>@<content checksum>`` (:func:`set_id`): sampling again
with another seed, or into another folder, makes a new set instead of re-using the old nodes, and answers of
one set never attach to the queries of another. ``method`` is the method's table label (e.g. ``ukge_logi
SRC(D+L)``): re-writing a method's answers of a set first deletes them, so answers are replaced, never
duplicated; other methods' answers stay. Every write is durable before the
function returns (the writes run under the data set's store lock, which saves them when released). The
store never sees torch: rows are plain values read from the Parquet files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.errors import PipelineError
from pipeline.formats.queryset import QuerySet, checksum
from pipeline.store.lock import dataset_lock

TOP = 10  # answers per query in the store; the full ranking stays in the Parquet file
NATIVE_BATCH = 1000
BOLT_BATCH = 30  # FalkorDB's experimental Bolt takes ~30 rows a batch (design section 4)


def set_id(qs: QuerySet) -> str:
    """The identity of a query set in the store: file stem and content checksum."""
    return f"{Path(str(qs.path)).stem}@{checksum(qs.frame)[:12]}"


def _float(x: float) -> float | None:
    # Bolt to FalkorDB takes at most 6 decimals; NaN (no ground truth) is stored as null.
    return None if x is None or math.isnan(x) else round(float(x), 6)


def _batch(store: Any) -> int:
    return BOLT_BATCH if getattr(store, "backend", "") == "neo4j" else NATIVE_BATCH


def _require_entities(store: Any, dataset: str) -> None:
    have = store.run("MATCH (e:Entity {dataset: $dataset}) RETURN count(e) AS n", {"dataset": dataset})
    if not have or int(have[0]["n"]) == 0:
        raise PipelineError(f"the store holds no entities of '{dataset}': run `pipeline ingest {dataset}` first")


def query_rows(qs: QuerySet, top: int = TOP) -> list[dict[str, Any]]:
    """One row per query: qid, type, text, answer counts, the top ground-truth answers, anchors in order."""
    rows = []
    for rec, q in zip(qs.frame.itertuples(index=False), qs.queries(), strict=True):
        rows.append(
            {
                "qid": str(rec.id),
                "type": str(rec.type),
                "text": str(rec.text),
                "n_easy": len(rec.answers_easy),
                "n_hard": len(rec.answers_hard),
                "top_answers": [int(a) for a in list(rec.answers_hard)[:top]],
                "anchors": [{"eid": int(e), "position": i} for i, e in enumerate(q.anchors())],
            }
        )
    return rows


def write_queries(store: Any, qs: QuerySet) -> int:
    """MERGE the set's (:Query) nodes and replace their anchors; durable on return. Returns the count."""
    from pipeline.store import cypher_text

    dataset = qs.meta["dataset"]
    params = {"dataset": dataset, "set": set_id(qs), "split": qs.meta.get("split"), "file": str(qs.path)}
    rows = query_rows(qs)
    with store.lock(dataset_lock(dataset), purpose=f"write the queries of {set_id(qs)}"):
        _require_entities(store, dataset)
        store.run_batches(cypher_text("write_queries"), rows, _batch(store), params)
    return len(rows)


def top_answer_rows(frame: pd.DataFrame, top: int = TOP) -> list[dict[str, Any]]:
    """One row per (query, answer) with rank <= top and a finite utility: qid, eid, rank, utility, truth_utility."""
    keep = frame[(frame["rank"] <= top) & frame["utility"].map(math.isfinite)].sort_values(["query_id", "rank"])
    return [
        {
            "qid": str(r.query_id),
            "eid": int(r.entity),
            "rank": int(r.rank),
            "utility": _float(r.utility),
            "truth_utility": _float(r.truth_utility),
        }
        for r in keep.itertuples(index=False)
    ]


def write_back(store: Any, answers: Any, query_set: QuerySet, top: int = TOP) -> int:
    """Replace the method's answers of this query set in the store (writing the queries too); durable on
    return. Returns the ANSWER edges written.

    answers: pipeline.formats.answers.Answers; query_set: the QuerySet it answers."""
    from pipeline.store import cypher_text

    dataset = answers.meta["dataset"]
    if query_set.meta.get("dataset") != dataset:
        raise PipelineError(f"answers of '{dataset}' but the query set is of '{query_set.meta.get('dataset')}'")
    params = {"dataset": dataset, "set": set_id(query_set), "method": answers.method}
    rows = top_answer_rows(answers.frame, top)
    # one writer of the data set's part of the graph at a time; saved when the lock is released
    with store.lock(dataset_lock(dataset), purpose=f"write back {answers.method} of {set_id(query_set)}"):
        write_queries(store, query_set)
        store.run(cypher_text("writeback_delete"), params)
        store.run_batches(cypher_text("writeback_answers"), rows, _batch(store), params)
    return len(rows)


def read_back(store: Any, dataset: str, set_name: str, qid: str, method: str) -> list[dict[str, Any]]:
    """A query's answers of one method as stored, best first (``set_name``: :func:`set_id`)."""
    from pipeline.store import cypher_text

    return store.run(cypher_text("writeback_read"), {"dataset": dataset, "set": set_name, "qid": qid, "method": method})


def write_back_file(answers_path: str | Path, store_uri: str | None = None, top: int = TOP) -> int:
    """`pipeline answer --write-back`: write an answers file's top answers into the store at store_uri."""
    from pipeline.formats.answers import read_answers
    from pipeline.formats.queryset import read_query_set
    from pipeline.store import open_store

    answers = read_answers(answers_path)
    query_set = read_query_set(answers.meta["query_set"])
    if answers.meta.get("query_set_checksum", checksum(query_set.frame)) != checksum(query_set.frame):
        raise PipelineError(
            f"{answers_path}: answers of another version of {query_set.path} (its queries changed since)"
        )
    with open_store(store_uri) as store:
        return write_back(store, answers, query_set, top)
