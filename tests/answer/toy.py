"""Hand-made graphs and query sets shared by the answer and calibration tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.core.kg import GraphTensors
from pipeline.formats.queryset import query_to_records, write_query_set
from pipeline.softquery.model import Query
from pipeline.softquery.parser import parse
from pipeline.softquery.printer import to_text

N_ENTITIES, N_RELATIONS = 6, 2


def graph(facts: list[tuple[int, int, int, float]]) -> GraphTensors:
    h, r, t, c = (np.array(x) for x in zip(*facts, strict=True))
    return GraphTensors.from_arrays(h, r, t, c.astype(np.float32), N_ENTITIES, N_RELATIONS, "toy")


# The observed graph: ground truth comes from here.
TRUTH = graph(
    [
        (0, 0, 1, 0.9),
        (0, 0, 2, 0.6),
        (0, 0, 3, 0.3),
        (1, 1, 4, 0.8),
        (2, 1, 4, 0.5),
        (2, 1, 5, 0.7),
        (3, 1, 5, 0.9),
    ]
)
# A "predicted" graph: what a backbone might export.
PREDICTED = graph([(0, 0, 1, 0.5), (0, 0, 2, 0.8), (0, 0, 3, 0.45), (1, 1, 4, 0.8), (2, 1, 5, 0.7)])

# Queries with their hand-computed ground truth on TRUTH (answers best first, ties by id).
QUERIES: list[tuple[str, str, str, list[int], list[float]]] = [
    ("q1", "1p", "#0(#0, ?y)", [1, 2, 3], [0.9, 0.6, 0.3]),
    # max over x of P(0, r0, x) + P(x, r1, y): y=4 via x=1 (1.7), y=5 via x=2 (1.3), every other y via x=1 (0.9)
    ("q2", "2p", "#0(#0, ?x) & #1(?x, ?y)", [4, 5, 0, 1, 2, 3], [1.7, 1.3, 0.9, 0.9, 0.9, 0.9]),
    ("q3", "1p", "#0(#0, ?y, 0.5)", [1, 2], [0.9, 0.6]),
]


def write_toy_query_set(path: Path, queries=QUERIES, split: str = "test", dataset: str = "toy") -> Path:
    rows = []
    for qid, qtype, text, answers, utils in queries:
        q = parse(text)
        rows.append(
            {
                "id": qid,
                "type": qtype,
                "text": to_text(q),
                "atoms": query_to_records(q),
                "answers_easy": answers,
                "utilities_easy": utils,
                "answers_hard": answers,
                "utilities_hard": utils,
                "seed": 0,
            }
        )
    meta = {"dataset": dataset, "split": split, "alpha": "mixed", "beta": "equal", "source": "hand"}
    return write_query_set(rows, path, meta)


def rows_of(
    queries: list[Query], truth: list, qtype: list[str], prefix: str
) -> list[dict]:
    """Query-set rows of engine-computed ground truth (pipeline.sampling.truth.ground_truth output)."""
    out = []
    for i, (q, (ids, vals, _, _)) in enumerate(zip(queries, truth, strict=True)):
        out.append(
            {
                "id": f"{prefix}-{i:04d}",
                "type": qtype[i],
                "text": to_text(q),
                "atoms": query_to_records(q),
                "answers_easy": ids,
                "utilities_easy": vals,
                "answers_hard": ids,
                "utilities_hard": vals,
                "seed": 0,
            }
        )
    return out


def frame_of(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)
