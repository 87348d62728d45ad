"""Answers browsed where the graph lives: the stages of `pipeline answer --from-store
--write-back --explain K` on a set of (:Query) nodes, what they write per query, and `pipeline browse`.

    PIPELINE_HOME=... PIPELINE_DATA=../shared/data python benchmarks/bench_browse.py --set NAME
        --adjacency DIR [--explain 10] [--store URI] [--out DIR] [--pages-per-type 1]

Stages, each timed once on the wall clock (one torch thread): `read` = the set's nodes read, parsed and
marked in the store (pipeline.stages.stored_queries), `answer` = SRC over the export (the answers file), `explain`
= the witnesses of every query's top K, `write-back` = answers and witnesses into the store; `browse` = one
page per type read from the store and rendered with neo4j-viz (median seconds). Per type: what the
write-back holds per query, counted back in the store: ANSWER relationships, (:Witness) and (:Atom) nodes,
and all relationships written for it (ANSWER + EXPLAINED_BY + FOR + USES + HEAD + TAIL).
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

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

PER_QUERY = """
MATCH (q:Query {dataset: $dataset, set: $set})
OPTIONAL MATCH (q)-[a:ANSWER {method: $method}]->(:Entity)
WITH q, count(a) AS answers
OPTIONAL MATCH (q)-[:EXPLAINED_BY]->(w:Witness {method: $method})
WITH q, answers, count(w) AS witnesses
OPTIONAL MATCH (q)-[:EXPLAINED_BY]->(:Witness {method: $method})-[:USES]->(t:Atom)
RETURN q.qid AS qid, q.type AS type, answers, witnesses, count(t) AS atoms
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", dest="set_name", required=True, help="A set of (:Query) nodes in the store.")
    ap.add_argument("--adjacency", required=True)
    ap.add_argument("--explain", type=int, default=10)
    ap.add_argument("--store", default=None)
    ap.add_argument("--out", default=None, help="Answers folder (default: a temporary one).")
    ap.add_argument("--pages-per-type", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_browse_"))
    dataset = str(read_manifest(Path(args.adjacency))["dataset"])
    t_all = time.perf_counter()
    t = time.perf_counter()
    with open_store(args.store) as store:
        stored = read_stored_queries(store, dataset, args.set_name, out)
    read_s = time.perf_counter() - t
    assert stored.path is not None, "no query of the set parsed"
    t = time.perf_counter()
    how = AnswerOptions(out=out, explain=args.explain, progress=False)
    report = answer_queries(stored.path, MethodOptions(adjacency=args.adjacency), how)
    answer_explain_s = time.perf_counter() - t
    answer_s = report["seconds"]
    explain_s = answer_explain_s - answer_s  # run_answer's own seconds are the answering; the rest explains
    t = time.perf_counter()
    answers = read_answers(report["path"])
    witnesses = read_witnesses(report["witnesses"])[0]
    written = write_back_to(args.store, answers, stored.query_set(), witnesses=witnesses, query_nodes=False)
    write_s = time.perf_counter() - t
    total_s = time.perf_counter() - t_all
    with open_store(args.store) as store:
        rows = store.run(PER_QUERY, {"dataset": dataset, "set": args.set_name, "method": answers.label})
        pages: dict[str, list[tuple[float, int, int, int]]] = {}
        for r in sorted(rows, key=lambda r: r["qid"]):
            if len(pages.setdefault(r["type"], [])) >= args.pages_per_type or not r["answers"]:
                continue
            t = time.perf_counter()
            g = read_page_graph(store, r["qid"], answers.label, dataset, args.set_name)
            size = len(render_html(g).encode())
            pages[r["type"]].append((time.perf_counter() - t, len(g.nodes), len(g.edges), size))
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, one thread; "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"set {args.set_name} ({dataset}): {len(rows)} queries, {len(stored.errors)} not parsed; K = {args.explain}")
    print(f"stages (s): read+parse {read_s:.2f} · answer {answer_s:.2f} · explain {explain_s:.2f} · "
          f"write-back {write_s:.2f} · total {total_s:.2f}  (written: {written})\n")
    print("| type | queries | ANSWER rels / query | witnesses / query | atoms / query | nodes / query | "
          "relationships / query | browse s (median) | page nodes / relationships |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    order = [t for t in QUERY_TYPES] + sorted({r["type"] for r in rows} - set(QUERY_TYPES))
    for qtype in order:
        of = [r for r in rows if r["type"] == qtype]
        if not of:
            continue
        n = len(of)
        ans = sum(r["answers"] for r in of) / n
        wit = sum(r["witnesses"] for r in of) / n
        atoms = sum(r["atoms"] for r in of) / n
        rels = ans + 2 * wit + 3 * atoms  # ANSWER; EXPLAINED_BY + FOR; USES + HEAD + TAIL
        page = pages.get(qtype) or []
        secs = f"{statistics.median(p[0] for p in page):.2f}" if page else "-"
        shape = f"{page[0][1]} / {page[0][2]}" if page else "-"
        print(f"| {qtype} | {n} | {ans:.1f} | {wit:.1f} | {atoms:.1f} | {wit + atoms:.1f} | {rels:.1f} | {secs} | {shape} |")


if __name__ == "__main__":
    main()
