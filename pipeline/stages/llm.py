"""The two commands' work, at the I/O edge: `pipeline llm-items` (query set + graphs -> items JSONL) and
`pipeline llm-eval` (items -> a model's answers -> accuracy tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.errors import ArtifactError
from pipeline.llm import eval as llm_eval
from pipeline.llm.items import build_items, parse_counts, read_items, src_choice, write_items

SPLIT_GRAPH = {"train": "train", "valid": "valid", "test": "test"}


def _utility_fn(graph: Any, batch_size: int = 128):
    """queries -> (B, n_entities) float64 numpy utilities of the exact engine on graph (batched)."""
    import torch

    from pipeline.engine import as_adjacency, search_batch

    adj = as_adjacency(graph)

    def run(queries: list) -> np.ndarray:
        parts = []
        with torch.no_grad():
            for s in range(0, len(queries), batch_size):
                parts.append(search_batch(queries[s : s + batch_size], adj).double().cpu().numpy())
        return np.concatenate(parts) if parts else np.zeros((0, adj.n_entities))

    return run


def build_items_file(
    dataset: str,
    queries_paths: str | Path | list[str | Path],
    out: str | Path,
    margin: float,
    per_type: str | None,
    seed: int,
    adjacency: str | Path | None = None,
    source: str | None = None,
    kg: Any = None,
) -> dict[str, Any]:
    """Build and write the items from one or more query sets (taken in order, the per-type counts shared;
    with several files an item id is prefixed by its file's position, '1:test-1p-00004'); with an adjacency export, SRC's pick is
    added to every item."""
    from collections import Counter

    from loaders import load
    from pipeline.core.checks import check_seed
    from pipeline.core.errors import option
    from pipeline.core.kg import observed_graph
    from pipeline.formats.queryset import read_query_set
    from pipeline.llm.items import check_margin
    from pipeline.softquery.vocab import Vocabulary

    counts = parse_counts(per_type)  # a bad --per-type, --margin or --seed fails before anything is loaded
    check_margin(margin)
    check_seed(seed, option("seed"))
    paths = [queries_paths] if isinstance(queries_paths, str | Path) else list(queries_paths)
    sets = [read_query_set(p) for p in paths]
    kg = kg if kg is not None else load(dataset, source=source)
    vocab = Vocabulary.from_kg(kg)
    graphs: dict[str, Any] = {}
    items: list[dict[str, Any]] = []
    kept: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    for k, (path, qs) in enumerate(zip(paths, sets, strict=True)):
        if qs.meta.get("dataset") != kg.name:
            raise ArtifactError(f"{path}: a query set of {qs.meta.get('dataset')!r}, not of {kg.name!r}")
        which = SPLIT_GRAPH.get(str(qs.meta.get("split", "test")), "test")
        if which not in graphs:
            graphs[which] = _utility_fn(observed_graph(kg, which))
        left = None if counts is None else {t: n - kept[t] for t, n in counts.items()}
        part, report = build_items(qs, vocab, graphs[which], margin, seed, left, kg.name)
        if len(paths) > 1:
            for it in part:
                it["id"] = f"{k}:{it['id']}"  # file names may repeat (one name per split/alpha/beta)
        items += part
        kept.update(report.kept)
        dropped.update(report.dropped)
    if adjacency is not None:
        from pipeline.formats.adjacency import load_adjacency
        from pipeline.softquery import parse

        tensors, _meta = load_adjacency(adjacency, kg.name, "cpu", kg.n_entities, kg.n_relations)
        src_choice(items, _utility_fn(tensors), [parse(it["query_ids"], vocab) for it in items])
    path = write_items(items, out)
    from pipeline.softquery.types import ordered_types

    kept_sorted = {t: kept[t] for t in ordered_types(set(kept))}
    return {
        "file": str(path),
        "kept": kept_sorted,
        "dropped": dict(dropped),
        "items": len(items),
        "src": adjacency is not None,
    }


def evaluate_items_file(
    items_path: str | Path,
    endpoint: str | None = None,
    model: str | None = None,
    concurrency: int = 4,
    responses: str | Path | None = None,
    progress: bool = True,
    **client_options: Any,
) -> dict[str, Any]:
    """Ask the model (if an endpoint is given) and tabulate: {tables: {method: accuracy table}, responses,
    unclear: [ids of replies without a clear letter], failed: [ids of requests that failed]}."""
    from pipeline.core import limits
    from pipeline.llm.client import ChatClient, ask_all

    if endpoint is not None:
        limits.check_count("concurrency", concurrency, "io")  # before the items are read
    items = read_items(items_path)
    tables: dict[str, Any] = {}
    datasets = sorted({str(it["dataset"]) for it in items if it.get("dataset")})
    doc: dict[str, Any] = {"items": len(items), "datasets": datasets, "tables": tables}
    if endpoint is not None:
        client = ChatClient(endpoint, model or "", **client_options)
        slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in client.model)
        path = Path(responses) if responses else Path(items_path).with_suffix(f".{slug}.responses.jsonl")
        records = ask_all(items, client, path, concurrency, progress)
        tables[client.model] = llm_eval.accuracy_table(items, llm_eval.model_picks(records))
        doc["responses"] = str(path)
        doc["unclear"] = [r["id"] for r in records if r["status"] == "ok" and r["letter"] is None]
        doc["failed"] = [r["id"] for r in records if r["status"] != "ok"]
    src = llm_eval.src_picks(items)
    if src:
        tables["SRC"] = llm_eval.accuracy_table(items, src)
    return doc


def record_in_docs(docs: str | Path, items_path: str | Path, doc: dict[str, Any], command: str) -> Path:
    """Record ``evaluate_items_file``'s tables in ``docs/results_llm.json`` (the results page's LLM
    comparison, :func:`pipeline.stages.docs_data.record_llm`): keyed by the items' data set, with the items
    file's name and digest (tables of other items replace the record, tables of the same items join it) and
    each table's command, machine and date. Items of several data sets are refused: one record names one."""
    import hashlib

    from pipeline.stages.docs_data import provenance, record_llm

    if len(doc["datasets"]) != 1:
        found = f"{len(doc['datasets'])} data sets ({', '.join(doc['datasets'])})" if doc["datasets"] else "no data set"
        raise ArtifactError(f"{items_path}: items of {found}; the results page records the items of one data set "
                            "(`pipeline llm-items DATASET` names it in every item)")
    digest = hashlib.sha256(Path(items_path).read_bytes()).hexdigest()
    made = provenance(command)
    record = {
        "items": doc["items"],
        "items_file": Path(items_path).name,
        "items_digest": digest,
        "tables": {name: {"accuracy": table, **made} for name, table in doc["tables"].items()},
    }
    return record_llm(docs, doc["datasets"][0], record)
