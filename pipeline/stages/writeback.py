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

All or nothing as readers see it: a write-back puts everything in under a new *generation* (a property of
its ANSWER and EXPLAINED_BY edges and (:Witness) nodes; new (:Query) nodes are ``pending``) that no reader
follows, then one statement commits it, pointing ``(:WriteBack {dataset, set, method, generation, answers,
witnesses, at})`` at it; readers (cypher/writeback_read, browse_*, stored_queries_*) follow that pointer
only. Other generations are leftovers of a killed write-back or the replaced one, deleted around the
commit. Answers written before generations existed (no pointer) are not shown; write them back again.

When the answers file has a witnesses file beside it (``answer --explain K``), the witnesses of the top
answers go in too, as a small subgraph per (query, method, answer)::

    (:Query)-[:EXPLAINED_BY {method, rank}]->(:Witness {qid, method, rank, answer, utility, branch,
                                                       assignment, query})-[:FOR]->(:Entity)
    (:Witness)-[:USES {position}]->(:Atom {relation, head, tail, head_eid, tail_eid, negated, confidence,
                                          source, alpha, beta, value, branch, text})
    (:Atom)-[:HEAD]->(:Entity)    (:Atom)-[:TAIL]->(:Entity)

An atom is a node, not a relationship between its two entities: a relationship there would sit beside the
KG's own fact edges (of the relation's own type) and could be mistaken for an observed fact; an (:Atom)
node carries its source (observed | predicted | missing) and is removed with its witness. Re-writing a
method's answers of a set removes all its witnesses first, so another K leaves no old witness behind.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.core.errors import ArtifactError, PipelineError, StoreUnavailable
from pipeline.formats import answers as col
from pipeline.formats.queryset import QuerySet, checksum
from pipeline.softquery import Vocabulary, to_text
from pipeline.store.lock import dataset_lock

TOP = 10  # answers per query in the store; the full ranking stays in the Parquet file


def set_id(qs: QuerySet) -> str:
    """The identity of a query set in the store: file stem and content checksum, or, for a set read from
    the store's own (:Query) nodes (pipeline.stages.stored_queries), the set name they carry."""
    if qs.meta.get("store_set"):
        return str(qs.meta["store_set"])
    return f"{Path(str(qs.path)).stem}@{checksum(qs.frame)[:12]}"


def store_vocabulary(store: Any, dataset: str) -> Vocabulary | None:
    """The data set's entity and relation names as ingested into the store (index = id); None when the
    store holds no complete copy of them (ids with gaps, or no relation names)."""
    from pipeline.store import cypher_text

    ents = store.run(cypher_text("vocabulary_entities"), {"dataset": dataset})
    rels = store.run(cypher_text("vocabulary_relations"), {"dataset": dataset})
    complete = [r["eid"] for r in ents] == list(range(len(ents))) and [r["rid"] for r in rels] == list(range(len(rels)))
    if not (complete and ents and rels):
        return None
    return Vocabulary.from_names([str(r["name"]) for r in ents], [str(r["name"]) for r in rels])


def _float(x: float) -> float | None:
    # Bolt to FalkorDB takes at most 6 decimals; NaN (no ground truth) is stored as null.
    return None if x is None or math.isnan(x) else round(float(x), 6)


def _require_entities(store: Any, dataset: str) -> None:
    from pipeline.store import cypher_text

    have = store.run(cypher_text("dataset_entity_count"), {"dataset": dataset})
    if not have or int(have[0]["n"]) == 0:
        raise PipelineError(f"the store holds no entities of '{dataset}': run `pipeline ingest {dataset}` first")


def query_rows(qs: QuerySet, top: int = TOP, vocab: Vocabulary | None = None) -> list[dict[str, Any]]:
    """One row per query: qid, type, text (ids), query (text with names when vocab is given), answer
    counts, the top ground-truth answers, anchors in order."""
    rows = []
    for rec, q in zip(qs.frame.itertuples(index=False), qs.queries(), strict=True):
        rows.append(
            {
                "qid": str(rec.id),
                "type": str(rec.type),
                "text": str(rec.text),
                "query": to_text(q, vocab) if vocab is not None else None,
                "n_easy": len(rec.answers_easy),
                "n_hard": len(rec.answers_hard),
                "top_answers": [int(a) for a in list(rec.answers_hard)[:top]],
                "anchors": [{"eid": int(e), "position": i} for i, e in enumerate(q.anchors())],
            }
        )
    return rows


def write_queries(store: Any, qs: QuerySet, generation: str | None = None) -> int:
    """MERGE the set's (:Query) nodes and replace their anchors; durable on return. Returns the count.
    New nodes stay pending (invisible to readers) until the set's commit: here, unless ``generation`` is
    given, in which case the caller's write-back commits them with its answers (writeback_commit)."""
    from pipeline.store import cypher_text

    dataset = qs.meta["dataset"]
    params = {"dataset": dataset, "set": set_id(qs), "split": qs.meta.get("split"), "file": str(qs.path),
              "generation": generation or new_generation()}
    with store.lock(dataset_lock(dataset), purpose=f"write the queries of {set_id(qs)}"):
        _require_entities(store, dataset)
        version = dataset_version(store, dataset)
        fix = f"Sample the queries again from the stored '{dataset}' (`pipeline sample {dataset} ...`)"
        check_version(qs.meta.get("dataset_version"), version, f"the query set {qs.path}", dataset, fix)
        check_set_version(store, dataset, set_id(qs), version, fix + ", or delete the old set's nodes")
        params["version"] = version or qs.meta.get("dataset_version")
        rows = query_rows(qs, vocab=store_vocabulary(store, dataset))
        store.run_batches(cypher_text("write_queries"), rows, store.write_batch, params)
        if generation is None:
            store.run(cypher_text("write_queries_commit"), {"dataset": dataset, "set": set_id(qs)})
    return len(rows)


def new_generation() -> str:
    """A fresh write-back generation id (what the (:WriteBack) pointer names once committed)."""
    return uuid.uuid4().hex[:16]


class StaleDataset(PipelineError):
    """Work made from one version of a data set (its content key) met another version in the store."""


def dataset_version(store: Any, dataset: str) -> str | None:
    """The version of ``dataset`` in the store: its load marker's content key (None: no marker)."""
    from pipeline.store import cypher_text

    rows = store.run(cypher_text("dataset_version"), {"dataset": dataset})
    return rows[0]["version"] if len(rows) == 1 else None


def check_version(made_from: str | None, store_version: str | None, what: str, dataset: str, fix: str) -> None:
    """Refuse (StaleDataset, one line) work made from another version of the data set than the store's;
    unknown versions (older files, a store without marker) are let through."""
    if made_from and store_version and made_from != store_version:
        raise StaleDataset(
            f"{what} was made from another version of '{dataset}' (content key {made_from[:12]}; the store "
            f"now holds {store_version[:12]}, re-ingested since): its entity ids name other entities now. {fix}"
        )


def check_set_version(store: Any, dataset: str, set_name: str, version: str | None, fix: str) -> None:
    from pipeline.store import cypher_text

    rows = store.run(cypher_text("stored_queries_versions"), {"dataset": dataset, "set": set_name})
    for r in rows:
        check_version(r["version"], version, f"the set '{set_name}' in the store", dataset, fix)


def committed_generation(store: Any, dataset: str, set_name: str, method: str) -> str | None:
    """The generation readers see for one method's write-back of a set (None: never committed)."""
    from pipeline.store import cypher_text

    rows = store.run(cypher_text("writeback_generation"), {"dataset": dataset, "set": set_name, "method": method})
    return rows[0]["generation"] if rows else None


def top_answer_rows(frame: pd.DataFrame, top: int = TOP) -> list[dict[str, Any]]:
    """One row per (query, answer) with rank <= top and a finite utility: qid, eid, rank, utility, truth_utility."""
    keep = frame[(frame[col.RANK] <= top) & frame[col.UTILITY].map(math.isfinite)].sort_values([col.QUERY_ID, col.RANK])
    return [
        {"qid": str(q), "eid": int(e), "rank": int(k), "utility": _float(u), "truth_utility": _float(t)}
        for q, e, k, u, t in zip(
            keep[col.QUERY_ID], keep[col.ENTITY], keep[col.RANK], keep[col.UTILITY], keep[col.TRUTH_UTILITY], strict=True
        )
    ]


def witness_rows(frame: pd.DataFrame, top: int = TOP) -> list[dict[str, Any]]:
    """One row per explained answer of rank <= top (pipeline.formats.witnesses frame), its atoms nested:
    {qid, rank, eid, answer, utility, branch, assignment, query, atoms: [{position, relation, head, tail,
    head_eid, tail_eid, negated, confidence, source, alpha, beta, value, text}]}. value None = the atom fails."""
    from itertools import groupby

    keep = frame[frame["rank"] <= top].sort_values(["query_id", "rank", "atom"], kind="stable")
    rows = []
    # plain records, grouped in Python: a pandas groupby per witness costs ~10 ms each (minutes for 10k)
    for (qid, rank), group in groupby(keep.to_dict("records"), key=lambda a: (a["query_id"], a["rank"])):
        atoms_of = list(group)
        first = atoms_of[0]
        witness = json.loads(first["witness"])
        atoms = []
        for a in atoms_of:
            value = None if a["value"] is None or math.isnan(a["value"]) else _float(a["value"])
            fact = f"{a['relation']}({a['head']}, {a['tail']})"
            shown = "fails" if value is None else f"{value:.4g}"
            atoms.append(
                {
                    "position": int(a["atom"]), "relation": str(a["relation"]), "head": str(a["head"]),
                    "tail": str(a["tail"]), "head_eid": int(a["head_eid"]), "tail_eid": int(a["tail_eid"]),
                    "negated": bool(a["negated"]), "confidence": _float(a["confidence"]), "source": str(a["source"]),
                    "alpha": _float(a["alpha"]), "beta": _float(a["beta"]), "value": value,
                    # what a person reads on the node: the fact, its confidence and source, its contribution
                    "text": f"{'NOT ' if a['negated'] else ''}{fact} c={a['confidence']:.4g} {a['source']} -> {shown}",
                }
            )
        rows.append(
            {
                "qid": str(qid), "rank": int(rank), "eid": int(first["entity"]), "answer": str(first["entity_name"]),
                "utility": _float(first["utility"]), "branch": int(first["branch"]),
                "assignment": ", ".join(f"{v} = {n}" for v, n in sorted(witness.items())),
                "query": str(first["query"]), "atoms": atoms,
            }
        )
    return rows


def check_witnesses(witnesses: pd.DataFrame, answers: pd.DataFrame, where: str) -> None:
    """Witnesses must explain these answers: each (query, rank) names the file's entity and utility
    (to 1e-6); a witnesses file left from another answers run is refused, never written back."""
    explained = witnesses.drop_duplicates(["query_id", "rank"])[["query_id", "rank", "entity", "entity_name", "utility"]]
    both = explained.merge(answers[[col.QUERY_ID, col.RANK, col.ENTITY, col.UTILITY]], on=["query_id", "rank"], how="left",
                           suffixes=("", "_file"))
    missing = both[both["entity_file"].isna()]
    if len(missing):
        r = missing.iloc[0]
        raise ArtifactError(f"{where}: query {r['query_id']} has no answer of rank {r['rank']} in the answers file")
    bad = both[(both["entity"] != both["entity_file"]) | ((both["utility"] - both["utility_file"]).abs() > 1e-6)]
    if len(bad):
        r = bad.iloc[0]
        raise ArtifactError(
            f"{where}: the witness of {r['query_id']} rank {r['rank']} ({r['entity_name']}, {r['utility']:g}) is not "
            f"the answers file's; it was written by another run: run `pipeline answer ... --explain K` again"
        )


def write_back(
    store: Any,
    answers: Any,
    query_set: QuerySet,
    top: int = TOP,
    witnesses: pd.DataFrame | list[dict[str, Any]] | None = None,
    query_nodes: bool = True,
) -> int:
    """Replace the method's answers of this query set in the store (writing the queries too), and its
    witnesses (none when ``witnesses`` is None); durable on return. Returns the ANSWER edges written.

    answers: pipeline.formats.answers.Answers; query_set: the QuerySet it answers; witnesses: the frame of
    its witnesses file (pipeline.formats.witnesses), or its :func:`witness_rows`. query_nodes=False leaves the (:Query) nodes as they
    are (queries a person typed into the store keep their own text)."""
    from pipeline.store import cypher_text

    dataset = answers.meta["dataset"]
    if query_set.meta.get("dataset") != dataset:
        raise PipelineError(f"answers of '{dataset}' but the query set is of '{query_set.meta.get('dataset')}'")
    params = {"dataset": dataset, "set": set_id(query_set), "method": answers.label}
    rows = top_answer_rows(answers.frame, top)
    explained = witnesses if isinstance(witnesses, list) else witness_rows(witnesses, top) if witnesses is not None else []
    # one writer of the data set's part of the graph at a time. All or nothing as readers see it (FalkorDB
    # has no rollback): everything goes in under a new generation that no reader follows, then ONE
    # statement (writeback_commit) shows the new query nodes and points the set's method at it; a kill at
    # any moment before leaves the previous write-back, after it the new one. Leftovers of an earlier,
    # killed write-back are removed first, the replaced generation last.
    generation = new_generation()
    what = f"the write-back of {answers.label} for {params['set']}"
    committed = False
    try:
        with store.lock(dataset_lock(dataset), purpose=f"write back {answers.label} of {set_id(query_set)}"):
            version = dataset_version(store, dataset)
            fix = (f"Sample a new set from the stored '{dataset}' (`pipeline sample {dataset} ...`) and answer it, "
                   "or ingest the version it was made from")
            check_version(query_set.meta.get("dataset_version"), version, f"the query set {query_set.path}", dataset, fix)
            check_set_version(store, dataset, params["set"], version, fix)
            _remove_other_generations(store, params, committed_generation(store, dataset, params["set"], answers.label))
            if query_nodes:
                write_queries(store, query_set, generation)
            step = {**params, "generation": generation}
            # batch sizes are the store's own (its backend declares them: `pipeline ls stores`)
            store.run_batches(cypher_text("writeback_answers"), rows, store.write_batch, step)
            store.run_batches(cypher_text("writeback_witnesses"), explained, store.witness_batch, step)
            try:
                store.run(cypher_text("writeback_commit"), {**step, "answers": len(rows), "witnesses": len(explained),
                                                            "at": int(time.time() * 1000), "version": version})
            except StoreUnavailable as exc:
                raise _commit_fate(store, dataset, params, generation, what, exc) from None
            committed = True
            _remove_other_generations(store, params, generation)
    except StoreUnavailable as exc:
        if not committed:
            raise
        # (the write-back is in and durable: what was cut short is tidying up, which the next one redoes)
        raise StoreUnavailable(
            f"{what} is committed (what readers see, durable); the store was lost after that, while the answers "
            f"it replaced were being removed and its lock released (the next write-back finishes that): {exc}"
        ) from None
    return len(rows)


def _commit_fate(store: Any, dataset: str, params: dict[str, Any], generation: str, what: str,
                 lost: StoreUnavailable) -> StoreUnavailable:
    """The error of a write-back whose commit statement lost the store: committed or not, asked of the store
    again (the embedded one is started again for that)."""
    try:
        store.recover()  # (the embedded server, started again from its append-only file, can be asked)
        now = committed_generation(store, dataset, params["set"], params["method"])
    except PipelineError:
        return StoreUnavailable(f"the store was lost during the commit of {what}; whether it was committed is not "
                                f"known (the store cannot be asked now): write it back again later: {lost}")
    if now == generation:
        return StoreUnavailable(f"{what} is committed (what readers see); the store was lost right after: {lost}")
    return StoreUnavailable(f"the store was lost during the commit of {what}: it was not committed, the previous "
                            f"answers stay; write it back again: {lost}")


def _remove_other_generations(store: Any, params: dict[str, Any], keep: str | None) -> None:
    """Delete one method's answers and witnesses of a set that are not of generation ``keep``."""
    from pipeline.store import cypher_text

    for name in ("writeback_delete", "writeback_witnesses_delete", "writeback_witnesses_delete_nodes"):
        store.run(cypher_text(name), {**params, "keep": keep})


def read_back(store: Any, dataset: str, set_name: str, qid: str, method: str) -> list[dict[str, Any]]:
    """A query's answers of one method as stored, best first (``set_name``: :func:`set_id`)."""
    from pipeline.store import cypher_text

    return store.run(cypher_text("writeback_read"), {"dataset": dataset, "set": set_name, "qid": qid, "method": method})


def write_back_file(answers_path: str | Path, store_uri: str | None = None, top: int = TOP) -> dict[str, int]:
    """`pipeline answer --write-back`: write an answers file's top answers into the store at store_uri,
    and the witnesses of the top ones when a witnesses file lies beside it. Returns {answers, witnesses,
    atoms}: the ANSWER edges, (:Witness) and (:Atom) nodes written."""
    from pipeline.formats.answers import read_answers
    from pipeline.formats.queryset import read_query_set
    from pipeline.formats.witnesses import read_witnesses, witnesses_path

    answers = read_answers(answers_path)
    query_set = read_query_set(answers.meta["query_set"])
    if answers.meta.get("query_set_checksum", checksum(query_set.frame)) != checksum(query_set.frame):
        raise PipelineError(
            f"{answers_path}: answers of another version of {query_set.path} (its queries changed since)"
        )
    wpath = witnesses_path(answers_path)
    witnesses = None
    if wpath.exists():
        witnesses, _ = read_witnesses(wpath)
        check_witnesses(witnesses, answers.frame, str(wpath))
    # a set read from the store's nodes (answer --from-store) keeps its nodes as the person wrote them
    return write_back_to(store_uri, answers, query_set, top, witnesses, query_nodes=not query_set.meta.get("store_set"))


def write_back_to(
    store_uri: str | None, answers: Any, query_set: QuerySet, top: int = TOP, witnesses: pd.DataFrame | None = None,
    query_nodes: bool = True,
) -> dict[str, int]:
    """:func:`write_back` on the store at store_uri; returns {answers, witnesses, atoms} written."""
    from pipeline.store import open_store

    explained = witness_rows(witnesses, top) if witnesses is not None else []
    with open_store(store_uri) as store:
        n = write_back(store, answers, query_set, top, explained, query_nodes)
    return {"answers": n, "witnesses": len(explained), "atoms": sum(len(w["atoms"]) for w in explained)}
