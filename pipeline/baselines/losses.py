"""Training losses of the query-embedding baselines over soft answers (pure functions).

Every loss sees, per query, the logits of its ground-truth answers (best first, padded) with their
utilities and the logits of sampled negatives. Shapes: pos_logits/pos_util/pos_mask (B, A),
neg_logits/neg_mask (B, N); masks are True where the entry is real (a padded answer or a negative that
hit an answer is False).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.baselines.settings import LOSSES  # noqa: F401 (declared with the options that choose one)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(x.dtype)
    return (x * m).sum(-1) / m.sum(-1).clamp(min=1.0)


def weighted_ranking(
    pos_logits: torch.Tensor,
    pos_util: torch.Tensor,
    pos_mask: torch.Tensor,
    neg_logits: torch.Tensor,
    neg_mask: torch.Tensor,
) -> torch.Tensor:
    """The QE papers' negative-sampling loss with each answer weighted by its share of the utility:
    ``-sum_a (u_a / sum u) log sigmoid(z_a) - mean_n log sigmoid(-z_n)``, averaged over queries."""
    w = torch.where(pos_mask, pos_util, torch.zeros_like(pos_util))
    w = w / w.sum(-1, keepdim=True).clamp(min=1e-12)
    pos = -(w * F.logsigmoid(pos_logits)).sum(-1)
    neg = -_masked_mean(F.logsigmoid(-neg_logits), neg_mask)
    return (pos + neg).mean()


def listwise(
    pos_logits: torch.Tensor,
    pos_util: torch.Tensor,
    pos_mask: torch.Tensor,
    neg_logits: torch.Tensor,
    neg_mask: torch.Tensor,
) -> torch.Tensor:
    """ListNet-style cross-entropy: the target distribution over answers and negatives is the utility
    share (negatives 0), the prediction a softmax over the same list. It rewards ordering the answers by
    utility, not only separating them from the negatives."""
    logits = torch.cat([pos_logits, neg_logits], dim=-1)
    mask = torch.cat([pos_mask, neg_mask], dim=-1)
    logits = logits.masked_fill(~mask, float("-inf"))
    target = torch.cat(
        [torch.where(pos_mask, pos_util, torch.zeros_like(pos_util)), torch.zeros_like(neg_logits)], -1
    )
    target = target / target.sum(-1, keepdim=True).clamp(min=1e-12)
    logp = torch.log_softmax(logits, dim=-1)
    return -(target * torch.where(mask, logp, torch.zeros_like(logp))).sum(-1).mean()


def compute_loss(kind: str, *args: torch.Tensor) -> torch.Tensor:
    """The loss named kind (one of LOSSES) on (pos_logits, pos_util, pos_mask, neg_logits, neg_mask)."""
    if kind == "weighted":
        return weighted_ranking(*args)
    if kind == "listwise":
        return listwise(*args)
    if kind == "weighted+listwise":
        return weighted_ranking(*args) + listwise(*args)
    raise ValueError(f"unknown loss {kind!r}; known: {', '.join(LOSSES)}")
