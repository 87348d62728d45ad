"""UKGE (Chen et al., 2019): DistMult-style plausibility mapped to a confidence.

plausibility  x = <e_h, r, e_t> = sum_k e_h[k] * r[k] * e_t[k]
logi:         P = sigmoid(w * x + b)
rect:         P = clamp(w * x + b, 0, 1)   (trained on the unbounded w * x + b, as UKGE's code does,
                                           so gradients do not vanish outside [0, 1])
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from pipeline.core.gather import rows
from pipeline.core.options import Option
from pipeline.models.base import ConfidenceModel, uniform_


class UKGE(ConfidenceModel):
    """Entity and relation vectors of size dim; a scalar affine map (w, b) then the mapping function."""

    mapping: str = ""
    hyper_options: ClassVar[dict[str, Option]] = {
        "l2": Option(help="Weight of the L2 penalty on a batch's embeddings (UKGE: 5e-4).", kind="float", low=0.0, high=100.0),
    }

    def __init__(
        self, n_entities: int, n_relations: int, dim: int = 128, l2: float = 5e-4, seed: int = 0
    ) -> None:
        super().__init__(n_entities, n_relations, dim)
        self.l2, self.seed = float(l2), int(seed)
        g = torch.Generator().manual_seed(self.seed)
        # Glorot-uniform, the initialiser of UKGE's TensorFlow variables
        self.ent = uniform_((n_entities, dim), *_glorot(n_entities, dim), g)
        self.rel = uniform_((n_relations, dim), *_glorot(n_relations, dim), g)
        self.w = nn.Parameter(torch.ones(()))
        self.b = nn.Parameter(torch.zeros(()))

    def hyper(self) -> dict[str, Any]:
        return {"l2": self.l2, "seed": self.seed}

    def plausibility(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        """<e_h, r, e_t>: (B,) float32."""
        return (rows(self.ent, h) * rows(self.rel, r) * rows(self.ent, t)).sum(-1)

    def _map(self, x: Tensor) -> Tensor:
        z = self.w * x + self.b
        return torch.sigmoid(z) if self.mapping == "logi" else z.clamp(0.0, 1.0)

    def forward(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        return self._map(self.plausibility(h, r, t))

    def training_output(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        x = self.plausibility(h, r, t)
        return torch.sigmoid(self.w * x + self.b) if self.mapping == "logi" else self.w * x + self.b

    @torch.no_grad()
    def score_block(self, heads: Tensor, r: int, tails: Tensor) -> Tensor:
        # (B, d) * (d,) @ (d, T): one matmul per block
        left = self.ent[heads] * self.rel[r]
        return self._map(left @ self.ent[tails].T)

    def block_rows(self, n_tails: int, budget: int = 1 << 24) -> int:
        return max(1, budget // max(1, n_tails))

    def features(self, h: Tensor, r: Tensor, t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(e_h, r, e_t): (B, dim) each."""
        return rows(self.ent, h), rows(self.rel, r), rows(self.ent, t)

    @property
    def feature_dims(self) -> tuple[int, int]:
        return self.dim, self.dim

    def regularization(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        # UKGE: l2 * (l2_loss(e_h) + l2_loss(r) + l2_loss(e_t)) / batch, l2_loss(x) = sum(x^2) / 2
        sq = rows(self.ent, h).pow(2).sum() + rows(self.rel, r).pow(2).sum() + rows(self.ent, t).pow(2).sum()
        return self.l2 * sq / (2 * len(h))


def _glorot(fan_in: int, fan_out: int) -> tuple[float, float]:
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return -a, a


class UKGELogi(UKGE):
    name = "ukge_logi"
    description = "UKGE, logistic map sigmoid(w<h,r,t>+b) (Chen et al. 2019); --psl adds soft-logic facts"
    mapping = "logi"


class UKGERect(UKGE):
    name = "ukge_rect"
    description = (
        "UKGE, bounded rectifier clamp(w<h,r,t>+b, 0, 1) (Chen et al. 2019); --psl adds soft-logic facts"
    )
    mapping = "rect"
