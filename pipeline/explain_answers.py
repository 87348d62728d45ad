"""`pipeline answer ... --explain K`: names in the answers file and the top-K witnesses beside it.

After an SRC answers file is written: its rows gain the query text with names and each entity's name
(optional columns of pipeline.formats.answers; the file is rewritten atomically with the same metadata),
and the witnesses of every query's top-K answers (by the engine, over the same calibrated adjacency and
the same lowered alphas as the answers) go to ``<stem>.witnesses.parquet`` (pipeline.formats.witnesses).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipeline.calibration import lower_alphas
from pipeline.engine.explain import explain
from pipeline.explanations import PREDICTED, witness_record
from pipeline.formats.answers import read_answers, write_answers
from pipeline.formats.queryset import QuerySet
from pipeline.formats.witnesses import rows_of, witnesses_path, write_witnesses
from pipeline.query import Vocabulary, to_text


def explain_answers_file(path: str | Path, qs: QuerySet, method: Any, k: int, progress: bool = True) -> str:
    """Add names to the answers file at path and write the top-k witnesses of each query; returns the
    witnesses file's path. method: the SRC method that wrote the file (adjacency, delta)."""
    from loaders import load

    vocab = Vocabulary.from_kg(load(method.dataset))
    ans = read_answers(path)
    queries = dict(zip(qs.frame["id"].astype(str), qs.queries(), strict=True))
    texts = {qid: to_text(q, vocab) for qid, q in queries.items()}
    frame = ans.frame
    frame["query"] = frame["query_id"].map(texts)
    frame["entity_name"] = [vocab.entities[int(e)] for e in frame["entity"]]
    write_answers(frame, path, ans.meta)
    rows: list[dict[str, Any]] = []
    # answers only (finite u > 0), best first: rows_of numbers the witnesses by this order
    top = frame[(frame["rank"] <= k) & (frame["utility"] > 0)].sort_values(["query_id", "rank"], kind="stable")
    by_query = {qid: g["entity"].tolist() for qid, g in top.groupby("query_id", sort=False)}
    for qid, ents in tqdm(by_query.items(), desc="explain", unit="query", disable=not progress, leave=False):
        q = lower_alphas(queries[qid], float(getattr(method, "delta", 0.0)))
        ws = explain(q, method.adjacency, [int(e) for e in ents])
        ends = [[(u.head, u.tail) for u in w.atoms] for w in ws]
        rows += rows_of(qid, texts[qid], [witness_record(w, q, vocab, PREDICTED) for w in ws], ends)
    meta = {"dataset": method.dataset, "method": method.label, "answers": str(path), "k": int(k)}
    return str(write_witnesses(rows, witnesses_path(path), meta))
