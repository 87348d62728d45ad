"""Answers browsed where the graph lives: answers and witnesses written back to the store, pages drawn."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Goal, Result, Table, benchmark

PER_QUERY = """
MATCH (q:Query {dataset: $dataset, set: $set})
OPTIONAL MATCH (q)-[a:ANSWER {method: $method}]->(:Entity)
WITH q, count(a) AS answers
OPTIONAL MATCH (q)-[:EXPLAINED_BY]->(w:Witness {method: $method})
WITH q, answers, count(w) AS witnesses
OPTIONAL MATCH (q)-[:EXPLAINED_BY]->(:Witness {method: $method})-[:USES]->(t:Atom)
RETURN q.qid AS qid, q.type AS type, answers, witnesses, count(t) AS atoms
"""


@benchmark(
    "browse",
    title="Browsing in the store",
    goals=[
        Goal(
            "page_s",
            "one pipeline browse page, read and drawn, after the process's first (the slowest type)",
            "<=",
            0.5,
            "s",
        )
    ],
    quick={"explain": 3},
)
def browse(
    *,
    set_name: str,
    adjacency: Path,
    explain: int = 10,
    store: str | None = None,
    out: Path | None = None,
    pages_per_type: int = 1,
) -> Result:
    """The stages of ``pipeline answer --from-store --write-back --explain K`` on the set ``--set-name`` of
    (:Query) nodes in the store, over the export ``--adjacency``, each timed once on the wall clock (one torch
    thread): the set read, parsed and marked; SRC's answers; the witnesses of each query's top K; the
    write-back of both. Then per type what the store holds per query (counted back with Cypher) and one
    ``pipeline browse`` page per type read from the store and rendered with neo4j-viz (median seconds; the
    process's first page also imports neo4j-viz and reads its template)."""
    import torch

    from pipeline.formats.adjacency import read_manifest
    from pipeline.formats.answers import read_answers
    from pipeline.formats.witnesses import read_witnesses
    from pipeline.methods import MethodOptions
    from pipeline.softquery import QUERY_TYPES
    from pipeline.stages.answer import AnswerOptions, answer_queries
    from pipeline.stages.browse import read_page_graph, render_html
    from pipeline.stages.stored_queries import read_stored_queries
    from pipeline.stages.writeback import write_back_to
    from pipeline.store import open_store

    torch.set_num_threads(1)
    folder = Path(out or tempfile.mkdtemp(prefix="bench-browse-"))
    dataset = str(read_manifest(Path(adjacency))["dataset"])
    t_all = time.perf_counter()
    t = time.perf_counter()
    with open_store(store) as st:
        stored = read_stored_queries(st, dataset, set_name, folder)
    read_s = time.perf_counter() - t
    assert stored.path is not None, "no query of the set parsed"
    t = time.perf_counter()
    report = answer_queries(
        stored.path,
        MethodOptions(adjacency=adjacency),
        AnswerOptions(out=folder, explain=explain, progress=False),
    )
    answer_explain_s = time.perf_counter() - t
    answer_s = report["seconds"]
    t = time.perf_counter()
    answers = read_answers(report["path"])
    witnesses = read_witnesses(report["witnesses"])[0]
    write_back_to(store, answers, stored.query_set(), witnesses=witnesses, query_nodes=False)
    write_s = time.perf_counter() - t
    total_s = time.perf_counter() - t_all
    first_page = None
    with open_store(store) as st:
        rows = st.run(PER_QUERY, {"dataset": dataset, "set": set_name, "method": answers.label})
        pages: dict[str, list[tuple[float, int, int]]] = {}
        for r in sorted(rows, key=lambda r: r["qid"]):
            if len(pages.setdefault(r["type"], [])) >= pages_per_type or not r["answers"]:
                continue
            t = time.perf_counter()
            g = read_page_graph(st, r["qid"], answers.label, dataset, set_name)
            render_html(g)
            took = time.perf_counter() - t
            if first_page is None:
                first_page = took
            else:
                pages[r["type"]].append((took, len(g.nodes), len(g.edges)))
    order = [t for t in QUERY_TYPES] + sorted({r["type"] for r in rows} - set(QUERY_TYPES))
    table = []
    for qtype in order:
        of = [r for r in rows if r["type"] == qtype]
        if not of:
            continue
        n = len(of)
        ans, wit, atoms = (sum(r[k] for r in of) / n for k in ("answers", "witnesses", "atoms"))
        page = pages.get(qtype) or []
        table.append(
            [
                qtype,
                n,
                ans,
                wit,
                atoms,
                wit + atoms,
                ans + 2 * wit + 3 * atoms,
                statistics.median(p[0] for p in page) if page else None,
                f"{page[0][1]} / {page[0][2]}" if page else None,
            ]
        )
    cols = [
        "type",
        "queries",
        "ANSWER rels / query",
        "witnesses / query",
        "atoms / query",
        "nodes / query",
        "relationships / query",
        "browse s (median)",
        "page nodes / relationships",
    ]
    stages = [
        ["read, parse and mark the set", read_s],
        ["answer", answer_s],
        [f"explain the top {explain} of each", answer_explain_s - answer_s],
        ["write-back", write_s],
        ["all", total_s],
        ["the process's first browse page (imports neo4j-viz)", first_page],
    ]
    slowest = [r[7] for r in table if r[7] is not None]
    return Result(
        [
            Table(["stage", "seconds"], stages, formats={"seconds": ".2f"}),
            Table(cols, table, title="Per type", formats={c: ".1f" for c in cols[2:7]} | {cols[7]: ".2f"}),
        ],
        {"page_s": max(slowest) if slowest else None},
        [
            "Nodes per query = witnesses + atoms; relationships per query = ANSWER + 2 x witnesses (EXPLAINED_BY,"
            " FOR) + 3 x atoms (USES, HEAD, TAIL)."
        ],
    )
