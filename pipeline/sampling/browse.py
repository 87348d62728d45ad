"""Write a query set into the store for browsing: (:Query) nodes with [:ANCHOR] edges to their anchors."""

from __future__ import annotations

from pipeline.sampling.atoms import records_to_query
from pipeline.sampling.queryset import QuerySet

BATCH = 30  # the neo4j driver's Bolt to FalkorDB takes at most ~30 rows a batch (design section 4)
TOP = 10  # answers shown on the node; the full lists stay in the Parquet file


def query_rows(qs: QuerySet, set_name: str) -> list[dict]:
    """One UNWIND row per query: keys, text, answer counts, the top answers and the anchors in order."""
    rows = []
    for rec in qs.frame.itertuples(index=False):
        q = records_to_query(list(rec.atoms))
        rows.append(
            {
                "dataset": qs.meta["dataset"],
                "set": set_name,
                "qid": rec.id,
                "type": rec.type,
                "text": rec.text,
                "split": qs.meta["split"],
                "n_easy": len(rec.answers_easy),
                "n_hard": len(rec.answers_hard),
                "top_answers": [int(a) for a in list(rec.answers_hard)[:TOP]],
                "anchors": [{"eid": int(e), "position": i} for i, e in enumerate(q.anchors())],
            }
        )
    return rows


def write_queries(store, qs: QuerySet, set_name: str) -> int:
    """MERGE the set's queries into the store; returns how many were written."""
    from pipeline.store import cypher_text

    rows = query_rows(qs, set_name)
    store.run_batches(cypher_text("sample_write_queries"), rows, BATCH)
    return len(rows)
