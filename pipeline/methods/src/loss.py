"""Calibration L's losses: what a training step minimises, given the predicted utilities of a batch of
alpha-0 train queries on the calibrated index and their true utilities on the target graph.

- ``balanced`` (the default): the mean squared error over each query's answers (finite u > 0) and over
  ``negatives`` uniformly sampled entities that are not answers (their target: their true utility), the
  two means weighing 1 and ``negative_weight``;
- ``authors`` (the authors' released code, ``Neural_SIU.py`` ``criterion`` with ``inclusion_sampling`` and
  ``QG_soft_train.py``'s ``l2`` loss): per query one answer drawn uniformly (squared error against its
  true utility) and ``negatives`` entities drawn uniformly among all (squared prediction: target 0, even
  for an answer drawn by chance), the query weighted ``sqrt(1 / (n_answers + 4))``: the loss is
  ``sum_q w_q (e_pos + mean e_neg) / sum_q w_q``;
- the pull to the identity (``identity`` > 0): the mean squared change of ``IDENTITY_SAMPLE`` stored
  confidences drawn uniformly each step, times ``identity``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pipeline.softquery.model import Query

# the engine's search_batch: (queries, index, need=cells whose gradient is read) -> (B, N) utilities
SearchFn = Callable[..., torch.Tensor]

AUTHORS_BASE = 4  # the authors' inclusion_sampling base_num: weight sqrt(1 / (n + 4))
IDENTITY_SAMPLE = 4096  # stored facts per step in the pull to the identity


def _loss_entities(true_u: torch.Tensor, negatives: int, gen: torch.Generator) -> torch.Tensor:
    """(B, n_entities) bool mask: the answers (finite u > 0) plus `negatives` uniformly sampled entities.

    Uniform, not the best-predicted non-answers: a high prediction that is not a train answer is often a
    true fact of valid/test that the backbone generalised to, and L must not learn to erase those."""
    answers = torch.isfinite(true_u) & (true_u > 0)
    mask = answers.clone()
    uniform = torch.randint(0, true_u.shape[1], (true_u.shape[0], negatives), generator=gen, device=gen.device)
    mask.scatter_(1, uniform.to(mask.device), True)
    return mask


def balanced_loss(
    pred_u: torch.Tensor, true_u: torch.Tensor, negatives: int, gen: torch.Generator, negative_weight: float = 1.0,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The default loss (module docstring) of predicted utilities (B, N) against true ones (B, N). mask:
    the entities drawn (_loss_entities), when drawn before the search."""
    mask = _loss_entities(true_u, negatives, gen) if mask is None else mask
    answers = torch.isfinite(true_u) & (true_u > 0)
    # alpha = 0: no atom fails, so both utilities are finite on every entity of the mask. Answers and
    # sampled non-answers weigh the same in total: non-answers outnumber answers and would otherwise
    # teach L to push every confidence to 0.
    err = (pred_u - true_u).pow(2)
    pos, neg = mask & answers, mask & ~answers
    parts = [(err[m].mean(), w) for m, w in ((pos, 1.0), (neg, negative_weight)) if m.any() and w > 0]
    if not parts:
        return (pred_u * 0).nan_to_num().sum()  # nothing to fit in this batch: a zero loss with a graph
    return sum(e * w for e, w in parts) / sum(w for _, w in parts)


def authors_draws(true_u: torch.Tensor, negatives: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """What the authors' loss reads of a batch: per query one answer drawn uniformly among its answers
    (a query without answers draws among all, unused), ``negatives`` entities drawn uniformly among all,
    and its answer count: (pick (B,), negatives (B, k), count (B,))."""
    answers = torch.isfinite(true_u) & (true_u > 0)
    count = answers.sum(1)
    weights = torch.where((count > 0)[:, None], answers.float(), torch.ones_like(true_u))
    pick = torch.multinomial(weights, 1, generator=gen).squeeze(1)
    neg = torch.randint(0, true_u.shape[1], (true_u.shape[0], negatives), generator=gen, device=gen.device)
    return pick, neg.to(true_u.device), count


def authors_loss(
    pred_u: torch.Tensor, true_u: torch.Tensor, negatives: int, gen: torch.Generator,
    draws: tuple[torch.Tensor, ...] | None = None,
) -> torch.Tensor:
    """The authors' loss (module docstring). A query without answers keeps its negatives' term. draws:
    authors_draws', when drawn before the search."""
    pick, neg, count = authors_draws(true_u, negatives, gen) if draws is None else draws
    rows = torch.arange(true_u.shape[0], device=true_u.device)
    e_pos = (pred_u[rows, pick] - true_u[rows, pick]).pow(2) * (count > 0)
    e_neg = pred_u.gather(1, neg).pow(2).mean(1) if neg.shape[1] else torch.zeros_like(e_pos)
    w = torch.rsqrt(count.to(pred_u.dtype) + AUTHORS_BASE)
    return (w * e_pos).sum() / w.sum() + (w * e_neg).sum() / w.sum()


def batch_loss(
    search: SearchFn,
    queries: list[Query],
    adj: Any,
    true_u: torch.Tensor,
    negatives: int,
    gen: torch.Generator,
    negative_weight: float = 1.0,
    weights: str = "balanced",
) -> torch.Tensor:
    """The loss of one batch: the engine's utilities of the queries on the (calibrated) index, against
    their true utilities, under ``weights`` (balanced or authors). The entities the loss reads are drawn
    first and given to the search (``need``): it routes the gradients of those cells alone, the same
    gradients as routing every cell (the others' are 0), at a fraction of the cost."""
    if weights == "authors":
        draws = authors_draws(true_u, negatives, gen)
        need = torch.zeros_like(true_u, dtype=torch.bool)
        rows = torch.arange(true_u.shape[0], device=true_u.device)
        need[rows, draws[0]] = True
        need.scatter_(1, draws[1], True)
        return authors_loss(search(queries, adj, need=need), true_u, negatives, gen, draws)
    mask = _loss_entities(true_u, negatives, gen)
    return balanced_loss(search(queries, adj, need=mask), true_u, negatives, gen, negative_weight, mask)


def identity_pull(calib: Any, adj: Any, tables: tuple[torch.Tensor, ...], gen: torch.Generator) -> torch.Tensor:
    """The mean squared change that L makes to IDENTITY_SAMPLE stored confidences drawn uniformly (rows
    by head: every stored fact once), differentiable in L."""
    fwd = adj.fwd
    nnz = fwd.conf.numel()
    if nnz == 0:
        return calib.bias.sum() * 0.0
    pos = torch.randint(0, nnz, (IDENTITY_SAMPLE,), generator=gen, device=gen.device).to(fwd.conf.device)
    starts = fwd.ptr[:: adj.n_entities].contiguous()
    rel = torch.searchsorted(starts, pos, right=True) - 1  # relation r holds [starts[r], starts[r+1])
    raw = fwd.conf.index_select(0, pos)
    new = calib.calibrate(raw, fwd.src.index_select(0, pos).long(), rel, fwd.dst.index_select(0, pos).long(),
                          calib.projections(tables))
    return (new - raw).pow(2).mean()
