"""Ground truth: the exact engine on an observed graph turns queries into answer lists.

Answers (design section 1): entities with finite u > 0, utility descending, ties by entity id, top 100.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pipeline.engine import Adjacency, evaluate_batch, top_answers
from pipeline.query.model import Query

TOP_K = 100


def answer_lists(utility: torch.Tensor, k: int = TOP_K) -> list[tuple[list[int], list[float], int]]:
    """Per row of utility (B, N) float32: (ids best first, their utilities as floats, the number of all
    answers before the top-k cut)."""
    out = []
    for row in utility:
        ids, vals = top_answers(row, k=k)
        n_all = int((torch.isfinite(row) & (row > 0)).sum())
        out.append(([int(i) for i in ids.tolist()], [float(v) for v in vals.tolist()], n_all))
    return out


def ground_truth(
    queries: Sequence[Query], graph: Adjacency, k: int = TOP_K
) -> list[tuple[list[int], list[float], int]]:
    """Answer lists of queries on graph (an indexed observed graph), see :func:`answer_lists`."""
    if not queries:
        return []
    return answer_lists(evaluate_batch(list(queries), graph), k)
