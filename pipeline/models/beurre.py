"""BEUrRE (Chen et al., 2021): probabilistic (Gumbel) box embeddings of an uncertain KG.

Each entity is a box: lower corner `lo` (d,) and log side lengths `log_width` (d,). A relation r holds two
affine maps, one for head boxes and one for tail boxes: lo' = lo + trans_r, width' = width * relu(scale_r).
With Gumbel boxes of scale beta, the intersection's corners are smooth maxima/minima,
    lo_cap = beta * logsumexp(lo_1 / beta, lo_2 / beta),   hi_cap = -beta * logsumexp(-hi_1 / beta, -hi_2 / beta),
and the (Bessel-approximated) volume of a box is prod_k softplus(width_k - 2 * gamma * beta)
(gamma = Euler's constant). The confidence of (h, r, t) is a conditional probability,
    P = vol(head' ∩ tail') / vol(condition box),
with the condition box the transformed head box (the design's definition, default) or the tail box (as in
the BEUrRE code: condition="tail"). The intersection is never wider than either box, so P is in [0, 1].
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from pipeline.core.gather import rows
from pipeline.core.options import Option
from pipeline.models.base import ConfidenceModel, normal_, uniform_

EULER_GAMMA = 0.57721566490153286060


def gumbel_intersection(
    lo1: Tensor, hi1: Tensor, lo2: Tensor, hi2: Tensor, beta: float
) -> tuple[Tensor, Tensor]:
    """Corners (lo, hi) of the Gumbel intersection of two boxes (broadcasting, last dim = box dim)."""
    lo = beta * torch.logaddexp(lo1 / beta, lo2 / beta)
    hi = -beta * torch.logaddexp(-hi1 / beta, -hi2 / beta)
    # logaddexp is >= the hard max, so the intersection never leaves the hard one (as the BEUrRE code keeps)
    lo = torch.maximum(lo, torch.maximum(lo1, lo2))
    hi = torch.minimum(hi, torch.minimum(hi1, hi2))
    return lo, hi


def log_volume(width: Tensor, beta: float, temperature: float = 1.0) -> Tensor:
    """log of the expected Gumbel-box volume: sum_k log softplus(width_k - 2 gamma beta). (..., d) -> (...)."""
    tiny = torch.finfo(width.dtype).tiny
    side = F.softplus(width - 2 * EULER_GAMMA * beta, beta=1.0 / temperature).clamp_min(tiny)
    return torch.log(side).sum(-1)


class BEUrRE(ConfidenceModel):
    name = "beurre"
    description = (
        "BEUrRE: Gumbel box embeddings, relation = affine maps of head/tail boxes (Chen et al. 2021)"
    )

    hyper_options: ClassVar[dict[str, Option]] = {
        "gumbel_beta": Option(help="Gumbel temperature of the boxes' corners (BEUrRE: 0.01).", kind="float",
                              above=0.0, high=100.0),
        "condition": Option(help="Which box a confidence is conditioned on: the head's or the tail's.", kind="str",
                            choices=("head", "tail")),
        "reg_width": Option(help="Weight of the penalty on box widths.", kind="float", low=0.0, high=100.0),
        "reg_lo": Option(help="Weight of the penalty on box corners.", kind="float", low=0.0, high=100.0),
        "reg_rel": Option(help="Weight of the penalty on relation transforms.", kind="float", low=0.0, high=100.0),
    }

    def __init__(
        self,
        n_entities: int,
        n_relations: int,
        dim: int = 64,
        gumbel_beta: float = 0.01,
        condition: str = "head",
        reg_width: float = 1.0,
        reg_lo: float = 1e-3,
        reg_rel: float = 1e-3,
        seed: int = 0,
    ) -> None:
        super().__init__(n_entities, n_relations, dim)
        if condition not in ("head", "tail"):
            raise ValueError(f"condition must be 'head' or 'tail', not {condition!r}")
        self.gumbel_beta, self.condition = float(gumbel_beta), condition
        self.reg_width, self.reg_lo, self.reg_rel, self.seed = (
            float(reg_width),
            float(reg_lo),
            float(reg_rel),
            int(seed),
        )
        g = torch.Generator().manual_seed(self.seed)
        # the BEUrRE code's initial ranges: corners near 0, side lengths just under 1
        self.lo = uniform_((n_entities, dim), 1e-4, 0.01, g)
        self.log_width = uniform_((n_entities, dim), -0.1, -0.001, g)
        self.trans_head = normal_((n_relations, dim), 0.0, 1e-4, g)
        self.scale_head = normal_((n_relations, dim), 1.0, 0.2, g)
        self.trans_tail = normal_((n_relations, dim), 0.0, 1e-4, g)
        self.scale_tail = normal_((n_relations, dim), 1.0, 0.2, g)

    def hyper(self) -> dict[str, Any]:
        return {
            "gumbel_beta": self.gumbel_beta,
            "condition": self.condition,
            "reg_width": self.reg_width,
            "reg_lo": self.reg_lo,
            "reg_rel": self.reg_rel,
            "seed": self.seed,
        }

    def boxes(self, e: Tensor, r: Tensor | int, side: str) -> tuple[Tensor, Tensor]:
        """Transformed boxes of entities e under relation r as head ('head') or tail ('tail'):
        (lo, width), each e.shape + (d,)."""
        trans, scale = (
            (self.trans_head, self.scale_head) if side == "head" else (self.trans_tail, self.scale_tail)
        )
        lo = rows(self.lo, e) + rows(trans, r)
        width = torch.exp(rows(self.log_width, e)) * F.relu(rows(scale, r))
        return lo, width

    def _prob(self, hlo: Tensor, hw: Tensor, tlo: Tensor, tw: Tensor) -> Tensor:
        beta = self.gumbel_beta
        lo, hi = gumbel_intersection(hlo, hlo + hw, tlo, tlo + tw, beta)
        cond = hw if self.condition == "head" else tw
        log_p = log_volume(hi - lo, beta) - log_volume(cond, beta)
        return torch.exp(log_p).clamp(0.0, 1.0)

    def forward(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        hlo, hw = self.boxes(h, r, "head")
        tlo, tw = self.boxes(t, r, "tail")
        return self._prob(hlo, hw, tlo, tw)

    @torch.no_grad()
    def score_block(self, heads: Tensor, r: int, tails: Tensor) -> Tensor:
        hlo, hw = self.boxes(heads, r, "head")
        tlo, tw = self.boxes(tails, r, "tail")
        return self._prob(hlo[:, None], hw[:, None], tlo[None], tw[None])

    def block_rows(self, n_tails: int, budget: int = 1 << 24) -> int:
        # a few (B, T, d) intermediates are alive at once
        return max(1, budget // max(1, 4 * n_tails * self.dim))

    def features(self, h: Tensor, r: Tensor, t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """eh, et = [lo, width] (B, 2d) of the untransformed entity boxes; er = [trans_head, scale_head,
        trans_tail, scale_tail] (B, 4d)."""
        ent = lambda e: torch.cat([rows(self.lo, e), torch.exp(rows(self.log_width, e))], -1)  # noqa: E731
        er = torch.cat([rows(p, r) for p in (self.trans_head, self.scale_head, self.trans_tail, self.scale_tail)], -1)
        return ent(h), er, ent(t)

    @property
    def feature_dims(self) -> tuple[int, int]:
        return 2 * self.dim, 4 * self.dim

    def regularization(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        # the BEUrRE code's penalties: norms of side lengths and corners of the batch's boxes, and of the
        # relation maps (here on the parameters themselves, not their exponentials)
        width = lambda e: torch.exp(rows(self.log_width, e)).norm(dim=1).mean()  # noqa: E731
        lo = lambda e: rows(self.lo, e).norm(dim=1).mean()  # noqa: E731
        rel = sum(
            rows(p, r).norm(dim=1).mean()
            for p in (self.trans_head, self.scale_head, self.trans_tail, self.scale_tail)
        )
        return self.reg_width * (width(h) + width(t)) + self.reg_lo * (lo(h) + lo(t)) + self.reg_rel * rel
