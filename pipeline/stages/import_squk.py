"""Turn published SQUK files into our query sets: their queries and answers, plus our engine's answers on
the observed graphs (easy = train graph, hard = the file's split graph), so the two can be compared."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.core.kg import observed_graph
from pipeline.core.progress import output
from pipeline.engine import Adjacency
from pipeline.formats.queryset import query_to_records, write_query_set
from pipeline.sampling.truth import ground_truth
from pipeline.sampling.useful import is_useful
from pipeline.softquery import to_text
from pipeline.squk.files import read_squk_file


def import_squk(
    paths: list[str | Path],
    kg,
    alpha_table: np.ndarray | None,
    out_dir: str | Path,
    seed: int = 0,
    progress: bool = True,
) -> list[dict]:
    """One query set per SQUK file, written to out_dir/<file stem>.parquet. Returns one summary per file:
    queries and how many our engine answers exactly as published (ids in order and values to 4 decimals).
    Every formula has the type its file name says (:func:`pipeline.squk.files.read_squk_file` refuses
    another)."""
    from pipeline.store.ingest import content_key

    graphs: dict[str, Adjacency] = {}
    version = content_key(kg)  # the data set version the ids mean (pipeline.core.versions)

    def adj(which: str) -> Adjacency:
        if which not in graphs:
            graphs[which] = Adjacency.from_graph(observed_graph(kg, which))
        return graphs[which]

    # every file read and checked before any is written: a malformed one refuses the whole import
    read = [read_squk_file(p, alpha_table=alpha_table, n_entities=kg.n_entities, n_relations=kg.n_relations)
            for p in paths]
    out = []
    with output(progress).bar(list(zip(paths, read, strict=True)), desc="import squk", unit="file") as bar:
        for path, (info, queries) in bar:
            qs = [q.query for q in queries]
            easy = ground_truth(qs, adj("train"))
            hard = ground_truth(qs, adj(info.split))
            rows = []
            agree = 0
            for i, (q, (e_ids, e_vals, _, _), (h_ids, h_vals, _, _)) in enumerate(
                zip(queries, easy, hard, strict=True)
            ):
                same = not is_useful(q.answers, q.values, h_ids, h_vals)
                agree += same
                rows.append(
                    {
                        "id": f"squk-{info.split}-{info.type}-{i:05d}",
                        "type": info.type,
                        "text": to_text(q.query),
                        "atoms": query_to_records(q.query),
                        "answers_easy": e_ids,
                        "utilities_easy": e_vals,
                        "answers_hard": h_ids,
                        "utilities_hard": h_vals,
                        "seed": int(seed),
                        "answers_published": q.answers,
                        "utilities_published": q.values,
                        # the paper protocol reads the file's own list, in the file's order (best first)
                        "answers_paper": q.answers,
                    }
                )
            meta = {
                "dataset": kg.name,
                "split": info.split,
                "alpha": info.alpha or "given",
                "beta": info.beta or "given",
                "source": f"squk:{Path(path).name}",
                "seed": int(seed),
                "dataset_version": version,
            }
            target = write_query_set(
                rows, Path(out_dir) / (Path(path).name.removesuffix(".json") + ".parquet"), meta
            )
            out.append(
                {
                    "file": Path(path).name,
                    "type": info.type,
                    "split": info.split,
                    "queries": len(rows),
                    "same_as_published": agree,
                    "out": str(target),
                }
            )
    return out
