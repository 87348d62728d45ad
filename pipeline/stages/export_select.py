"""Which scored (h, t) pairs of one relation an export keeps: a threshold, and optionally a per-head top-k.

With ``top_k = K`` a head keeps its K best-scored tails that also pass the threshold, so an export holds at
most |R| x |E| x K facts whatever the model; ties at the K-th score go to the lower tail id, so the choice is
exact and deterministic (no dependence on torch.topk's order). What is not kept takes the atom's default in
the engine (confidence 0), as for a threshold alone.
"""

from __future__ import annotations

import torch


def select_block(
    scores: torch.Tensor, threshold: float, top_k: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores: (b, n) float, the block's heads against all n tails. Returns (rows, tails, values): the kept
    pairs as 1-D tensors sorted by (row, tail), rows relative to the block."""
    keep = scores >= threshold
    if top_k is not None and top_k < scores.shape[1]:
        # exact top-k with ties by tail id: keep everything above the K-th value, then the first (lowest
        # tail id) of the entries equal to it until K are kept; O(n) per row like topk itself
        kth = torch.topk(scores, top_k, dim=1, sorted=True).values[:, -1:]
        above = scores > kth
        equal = scores == kth
        room = top_k - above.sum(dim=1, keepdim=True)
        keep &= above | (equal & (equal.cumsum(dim=1) <= room))
    # nonzero() walks row-major, so the pairs come out sorted by (head, tail)
    rows, tails = keep.nonzero(as_tuple=True)
    return rows, tails, scores[rows, tails]


def check_top_k(top_k: int | None) -> int | None:
    from pipeline.core.errors import PipelineError

    if top_k is not None and top_k < 1:
        raise PipelineError(f"--top-k must be at least 1, got {top_k}")
    return top_k
