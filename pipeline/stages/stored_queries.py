"""Query graphs pulled from the graph store (`pipeline answer --from-store`): the (:Query) nodes of a set,
sampled (`pipeline sample` writes them) or typed by a person with only a ``text`` property, become a query
set file that the ordinary answering stage reads; answers (and witnesses) then go back to the same nodes.

A text that does not parse gets its error on the node (property ``error``) and in the report, and the other
queries go on. Typed nodes without a set join the set ``typed`` with ids ``t0, t1, ...``. The texts are
parsed against the names stored with the data set; the query set file names its set (``store_set``), so the
write-back addresses the nodes it came from, never a new set. No ground truth is computed here: the
file's truth columns are empty (a sampled set's own file holds its truth).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core import config
from pipeline.core.errors import PipelineError
from pipeline.formats.queryset import QuerySet, query_to_records, read_query_set, write_query_set
from pipeline.softquery import Vocabulary, parse, to_text
from pipeline.softquery.types import type_of
from pipeline.stages.writeback import check_set_version, dataset_version, store_vocabulary
from pipeline.store.lock import dataset_lock

if TYPE_CHECKING:
    from pipeline.methods.options import MethodOptions
    from pipeline.stages.options import AnswerOptions

TYPED_SET = "typed"  # the set of queries a person created in the store with only a text
CUSTOM_TYPE = "custom"  # a typed query whose shape is none of the 12 types


@dataclass(frozen=True)
class StoredQueries:
    """A set read from the store: its query set file (None when no text parsed) and the texts that did not
    parse, as (qid, text, one-line error)."""

    dataset: str
    set_name: str
    path: Path | None
    errors: list[tuple[str, str, str]] = field(default_factory=list)
    adopted: int = 0

    def query_set(self) -> QuerySet | None:
        return read_query_set(self.path) if self.path is not None else None


def one_line(message: str) -> str:
    """A parse error on one line: the caret lines of a syntax error are folded into the column number."""
    return message.splitlines()[0] if message else message


def queries_file(dataset: str, set_name: str, out_dir: str | Path | None = None) -> Path:
    """Where the set's query set file goes: OUT (default PIPELINE_HOME/from-store/DATASET)/<set>.parquet."""
    safe = re.sub(r"[^A-Za-z0-9_.@-]", "_", set_name)
    return Path(out_dir or config.home() / "from-store" / dataset) / f"{safe}.parquet"


def parse_rows(nodes: list[dict[str, Any]], vocab: Vocabulary, typed: bool) -> tuple[list[dict], list[dict]]:
    """(query set rows, node updates) of the stored nodes: a parsed text gives a row and its anchors, a
    failed one an update with its error and no row. Pure: no store, no files."""
    rows, updates = [], []
    for node in nodes:
        qid, text = str(node["qid"]), node.get("text")
        try:
            if not isinstance(text, str) or not text.strip():
                raise PipelineError("no text property (a query node needs text: 'relation(head, ?y)')")
            q = parse(text, vocab)
        except PipelineError as exc:
            updates.append({"qid": qid, "error": one_line(str(exc)), "query": None, "type": None, "anchors": []})
            continue
        qtype = (type_of(q) or CUSTOM_TYPE) if typed or not node.get("type") else str(node["type"])
        anchors = [{"eid": int(e), "position": i} for i, e in enumerate(q.anchors())]
        updates.append({"qid": qid, "error": None, "query": to_text(q, vocab), "type": qtype if typed else None,
                        "anchors": anchors})
        rows.append({"id": qid, "type": qtype, "text": to_text(q), "atoms": query_to_records(q),
                     "answers_easy": [], "utilities_easy": [], "answers_hard": [], "utilities_hard": [], "seed": 0})
    return rows, updates


def read_stored_queries(
    store: Any, dataset: str, set_name: str = TYPED_SET, out_dir: str | Path | None = None
) -> StoredQueries:
    """Read (adopting typed nodes into ``typed`` first), parse, mark errors on the nodes, and write the
    parseable queries as a query set file. PipelineError when the set has no (:Query) node."""
    from pipeline.store import cypher_text

    params = {"dataset": dataset, "set": set_name}
    adopted = 0
    with store.lock(dataset_lock(dataset), purpose=f"read the queries of {set_name} from the store"):
        version = dataset_version(store, dataset)
        if set_name != TYPED_SET:
            # a sampled set's texts name entities by id: against another version they mean other queries
            # (typed texts name entities and are parsed again against the stored names: no such risk)
            check_set_version(store, dataset, set_name, version,
                               f"Sample a new set from the stored '{dataset}' (`pipeline sample {dataset} ...`), or "
                               f"ingest the version the set was made from")
        params["version"] = version
        if set_name == TYPED_SET:
            taken = [str(r["qid"]) for r in store.run(cypher_text("stored_queries_read"), params)]
            numbers = [int(m.group(1)) for q in taken if (m := re.fullmatch(r"t(\d+)", q))]
            rows = store.run(cypher_text("stored_queries_adopt"), {**params, "offset": max(numbers, default=-1) + 1})
            adopted = int(rows[0]["adopted"]) if rows else 0
        nodes = store.run(cypher_text("stored_queries_read"), params)
        if not nodes:
            sets = store.run(cypher_text("stored_queries_sets"), {"dataset": dataset})
            have = ", ".join(f"{r['set']} ({r['queries']})" for r in sets) or "none"
            raise PipelineError(f"the store holds no (:Query) nodes of '{dataset}' in set '{set_name}'; sets: {have}")
        vocab = store_vocabulary(store, dataset)
        if vocab is None:
            raise PipelineError(f"the store holds no complete copy of '{dataset}' names: run `pipeline ingest {dataset}`")
        rows, updates = parse_rows(nodes, vocab, typed=set_name == TYPED_SET)
        store.run_batches(cypher_text("stored_queries_update"), updates, 1000, params)
    errors = [(u["qid"], str(n.get("text")), u["error"]) for u, n in zip(updates, nodes, strict=True) if u["error"]]
    if not rows:
        return StoredQueries(dataset, set_name, None, errors, adopted)
    splits = {n.get("split") for n in nodes} - {None}
    meta = {
        "dataset": dataset, "split": splits.pop() if len(splits) == 1 else None, "alpha": "stored",
        "beta": "stored", "source": "store", "store_set": set_name,
        # the store's version the ids were read in: an export of another version is refused when answering
        **({"dataset_version": version} if version else {}),
    }
    path = write_query_set(rows, queries_file(dataset, set_name, out_dir), meta)
    return StoredQueries(dataset, set_name, path, errors, adopted)


def answer_from_store(set_name: str, method: MethodOptions, options: AnswerOptions) -> dict[str, Any]:
    """`pipeline answer --from-store`: answer a set of (:Query) nodes through the answering stage
    (:func:`pipeline.stages.answer.answer_queries`, with ``method`` and ``options``; a method that answers queries
    of any shape, over an export) and, with options.write_back, write the answers (and the top-``explain``
    witnesses) to the same nodes. Returns the answer report plus {set, queries_file, errors: [{qid, text,
    error}]}; report["path"] is None when no text parsed."""
    from pipeline.formats.adjacency import read_manifest
    from pipeline.stages.answer import answer_queries, check_method_options, method_class
    from pipeline.store import open_store

    check_method_options(method_class(method), method, options.explain, any_shape=True)
    dataset = str(read_manifest(Path(str(method.adjacency)))["dataset"])
    with open_store(options.store) as store:
        stored = read_stored_queries(store, dataset, set_name, options.out)
    errors = [{"qid": q, "text": t, "error": e} for q, t, e in stored.errors]
    base = {"set": set_name, "dataset": dataset, "queries_file": str(stored.path) if stored.path else None,
            "adopted": stored.adopted, "errors": errors}
    if stored.path is None:
        return {**base, "path": None, "method": None, "seconds": 0.0, "throughput": {}}
    # the query set file names its store set, so the write-back addresses the nodes it came from
    return {**answer_queries(stored.path, method, options), **base}
