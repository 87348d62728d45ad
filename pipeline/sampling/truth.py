"""Ground truth: the exact engine on an observed graph turns queries into answer lists.

Answers (design section 1): entities with finite u > 0, utility descending, the top 100, and where a group
of tied utilities crosses that cut, the WHOLE group: ids never decide who is an answer. (The other rule the
design allows, a seeded random choice within the group, would leave the excluded members tied with the
included ones, so even the true utilities could not score 100; the whole group keeps every invariant.)
Within a group the stored order is by entity id, which no metric reads.

Beside them, on request, the list the SQUK benchmark's generator would have written for the same utilities
(:mod:`pipeline.squk.generator_order`): the truth the paper protocol reads, its ties in the generator's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from pipeline.engine import Adjacency, search_batch, top_answers
from pipeline.softquery.model import TOP_K, Query


def cut_answers(row: torch.Tensor, k: int = TOP_K) -> tuple[torch.Tensor, torch.Tensor]:
    """The answers of one utility vector (N,): ids (n,) int64 and utilities (n,), best first (ties by id),
    the top k plus every entity tied with the k-th (so n >= k only when a tie crosses the cut)."""
    ids, vals = top_answers(row, k=k)
    if len(ids) == k and k > 0:
        tied = torch.nonzero(row == vals[-1], as_tuple=True)[0]  # ids ascending
        extra = tied[~torch.isin(tied, ids)]
        if len(extra):
            ids = torch.cat([ids, extra])
            vals = torch.cat([vals, row[extra]])
    return ids, vals


class Truth(NamedTuple):
    """One query's answers on a graph: ids best first (:func:`cut_answers`), their utilities, the number of
    all answers before the cut, and (when asked for) the SQUK generator's list, best first (None otherwise)."""

    ids: list[int]
    utilities: list[float]
    n_all: int
    paper: list[int] | None = None


def answer_lists(utility: torch.Tensor, k: int = TOP_K, paper: bool = False) -> list[Truth]:
    """Per row of utility (B, N) float32 its :class:`Truth`; with paper, also the generator's list
    (:func:`pipeline.squk.generator_order.generator_answers` of the row)."""
    if paper:  # numba, compiled once per installation: only where a query set will be evaluated
        from pipeline.squk.generator_order import generator_answers
    out = []
    for row in utility:
        ids, vals = cut_answers(row, k=k)
        n_all = int((torch.isfinite(row) & (row > 0)).sum())
        gen = [int(i) for i in generator_answers(row.detach().cpu().numpy().astype(np.float64))] if paper else None
        out.append(Truth([int(i) for i in ids.tolist()], [float(v) for v in vals.tolist()], n_all, gen))
    return out


def ground_truth(queries: Sequence[Query], graph: Adjacency, k: int = TOP_K, paper: bool = False) -> list[Truth]:
    """Answer lists of queries on graph (an indexed observed graph), see :func:`answer_lists`."""
    if not queries:
        return []
    return answer_lists(search_batch(list(queries), graph), k, paper)
