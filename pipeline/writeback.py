"""Answers written back to the graph store for browsing (design section 3, last stage of the data flow):

    (:Query {dataset, set, qid, type, text})-[:ANCHOR {position}]->(:Entity)
    (:Query)-[:ANSWER {rank, utility, method, truth_utility}]->(:Entity)

for the top answers of each query (finite utility, rank <= top). ``set`` is the query set's file stem, the
name the sampling stage gives its browsable (:Query) nodes, so both meet on one node. ``method`` is the
backbone and the SRC variant (e.g. ``ukge_logi SRC(D+L)``). Re-running first deletes that method's answers
of that set, so answers are replaced, never duplicated; other methods' answers stay. The store never sees
torch: this module reads the answers Parquet and sends plain rows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.errors import PipelineError

TOP = 10  # answers per query in the store; the full ranking stays in the Parquet file
NATIVE_BATCH = 1000
BOLT_BATCH = 30  # FalkorDB's experimental Bolt takes ~30 rows a batch (design section 4)


def _float(x: float) -> float | None:
    # Bolt to FalkorDB takes at most 6 decimals; NaN (no ground truth) is stored as null.
    return None if x is None or math.isnan(x) else round(float(x), 6)


def answer_rows(frame: pd.DataFrame, top: int = TOP) -> list[dict[str, Any]]:
    """One row per (query, answer) with rank <= top and a finite utility: qid, eid, rank, utility, truth_utility."""
    keep = frame[(frame["rank"] <= top) & frame["utility"].map(math.isfinite)].sort_values(
        ["query_id", "rank"]
    )
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


def query_rows(query_set: Any) -> list[dict[str, Any]]:
    """One row per query of a QuerySet: qid, type, text and its anchors in order."""
    rows = []
    for qid, qtype, text, q in zip(
        query_set.frame["id"],
        query_set.frame["type"],
        query_set.frame["text"],
        query_set.queries(),
        strict=True,
    ):
        rows.append(
            {
                "qid": str(qid),
                "type": str(qtype),
                "text": str(text),
                "anchors": [{"eid": int(e), "position": i} for i, e in enumerate(q.anchors())],
            }
        )
    return rows


def write_back(store: Any, answers: Any, query_set: Any, top: int = TOP) -> int:
    """Replace the method's answers of this query set in the store; returns the ANSWER edges written.

    answers: pipeline.answer.Answers; query_set: pipeline.sampling.QuerySet it answers."""
    from pipeline.store import cypher_text

    dataset = answers.meta["dataset"]
    if query_set.meta.get("dataset") != dataset:
        raise PipelineError(
            f"answers of '{dataset}' but the query set is of '{query_set.meta.get('dataset')}'"
        )
    set_name = Path(answers.meta["query_set"]).stem
    params = {"dataset": dataset, "set": set_name, "method": answers.method}
    have = store.run("MATCH (e:Entity {dataset: $dataset}) RETURN count(e) AS n", {"dataset": dataset})
    if not have or int(have[0]["n"]) == 0:
        raise PipelineError(
            f"the store holds no entities of '{dataset}': run `pipeline ingest {dataset}` first"
        )
    batch = BOLT_BATCH if getattr(store, "backend", "") == "neo4j" else NATIVE_BATCH
    store.run(cypher_text("writeback_delete"), params)
    store.run_batches(
        cypher_text("writeback_queries"), query_rows(query_set), batch, {"dataset": dataset, "set": set_name}
    )
    rows = answer_rows(answers.frame, top)
    store.run_batches(cypher_text("writeback_answers"), rows, batch, params)
    return len(rows)


def read_back(store: Any, dataset: str, set_name: str, qid: str, method: str) -> list[dict[str, Any]]:
    """A query's answers of one method as stored, best first."""
    from pipeline.store import cypher_text

    return store.run(
        cypher_text("writeback_read"), {"dataset": dataset, "set": set_name, "qid": qid, "method": method}
    )


def write_back_file(answers_path: str | Path, store_uri: str | None = None, top: int = TOP) -> int:
    """`pipeline answer --write-back`: write an answers file's top answers into the store at store_uri."""
    from pipeline.answer import read_answers
    from pipeline.sampling import read_query_set
    from pipeline.store import open_store

    answers = read_answers(answers_path)
    query_set = read_query_set(answers.meta["query_set"])
    with open_store(store_uri) as store:
        return write_back(store, answers, query_set, top)
