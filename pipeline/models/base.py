"""What every confidence model shares: construction from a JSON-able config, confidence scoring of triples,
block scoring for the neural-adjacency export, feature vectors for calibration, and a content hash.

A model maps a triple (h, r, t) of integer ids to a predicted confidence in [0, 1]. Models are saved as a
state dict plus their config (never as pickled modules), so a run directory stays readable across versions.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from pipeline.core.options import Option


class ConfidenceModel(nn.Module):
    """Base of the uncertain-KG embeddings (UKGE, BEUrRE).

    Subclasses set `name` and `description`, take `n_entities, n_relations, dim` plus their own keyword
    hyper-parameters (all JSON-able; `hyper()` returns them), declare those a config may set in
    `hyper_options` (name -> :class:`~pipeline.core.options.Option`: kind and range; a run's ``model_kwargs``
    is checked against them before a model is built), and implement `forward`, `score_block`, `features`
    and `regularization`.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    hyper_options: ClassVar[dict[str, Option]] = {}

    def __init__(self, n_entities: int, n_relations: int, dim: int) -> None:
        super().__init__()
        self.n_entities, self.n_relations, self.dim = int(n_entities), int(n_relations), int(dim)

    # -- construction ------------------------------------------------------------------------------------

    def hyper(self) -> dict[str, Any]:
        """Constructor keyword arguments besides n_entities, n_relations, dim (JSON-able)."""
        return {}

    def config(self) -> dict[str, Any]:
        """Everything needed to rebuild the module before loading its state dict."""
        return {
            "model": self.name,
            "n_entities": self.n_entities,
            "n_relations": self.n_relations,
            "dim": self.dim,
            **self.hyper(),
        }

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> ConfidenceModel:
        kwargs = {k: v for k, v in cfg.items() if k != "model"}
        return cls(**kwargs)

    # -- scoring ------------------------------------------------------------------------------------------

    def forward(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        """Predicted confidences of triples: h, r, t (B,) int64 -> (B,) float32 in [0, 1]."""
        raise NotImplementedError

    def training_output(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        """The value the squared-error loss compares with the target confidence (default: forward).
        UKGE rect trains its unbounded linear output and clamps only when predicting."""
        return self(h, r, t)

    @torch.no_grad()
    def score(self, h: Tensor, r: Tensor, t: Tensor, batch_size: int = 65536) -> Tensor:
        """Confidences of many triples without gradients, in batches: (N,) int64 each -> (N,) float32."""
        dev = self.device
        out = [
            self(h[i : i + batch_size].to(dev), r[i : i + batch_size].to(dev), t[i : i + batch_size].to(dev))
            for i in range(0, len(h), batch_size)
        ]
        return torch.cat(out) if out else torch.zeros(0, device=dev)

    def score_block(self, heads: Tensor, r: int, tails: Tensor) -> Tensor:
        """Confidences of every (head, r, tail) pair: heads (B,), tails (T,) int64 -> (B, T) float32.
        Used by the export; subclasses use a matmul or broadcasting instead of B*T separate triples."""
        raise NotImplementedError

    def block_rows(self, n_tails: int, budget: int = 1 << 24) -> int:
        """How many heads score_block can take at once against n_tails tails within `budget` floats of
        intermediate memory (the export shrinks it further on out-of-memory)."""
        return max(1, budget // max(1, n_tails))

    def features(self, h: Tensor, r: Tensor, t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Feature vectors of a triple's parts, for calibration L (design section 2):
        h, r, t (B,) int64 -> (eh (B, De), er (B, Dr), et (B, De)) float32. `feature_dims` gives (De, Dr)."""
        raise NotImplementedError

    @property
    def feature_dims(self) -> tuple[int, int]:
        raise NotImplementedError

    def regularization(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        """The model's weight penalty for a batch of positive triples (a scalar)."""
        return torch.zeros((), device=self.device)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # -- identity -----------------------------------------------------------------------------------------

    def content_hash(self) -> str:
        """sha256 over the config and every parameter's name, dtype, shape and bytes: two models share a
        hash exactly when they predict the same numbers (the export cache key)."""
        h = hashlib.sha256(json.dumps(self.config(), sort_keys=True).encode())
        for key, value in sorted(self.state_dict().items()):
            v = value.detach().to("cpu").contiguous()
            h.update(f"{key}|{v.dtype}|{tuple(v.shape)}|".encode())
            h.update(v.numpy().tobytes() if v.dtype != torch.bfloat16 else v.float().numpy().tobytes())
        return h.hexdigest()


def uniform_(shape: tuple[int, ...], low: float, high: float, generator: torch.Generator) -> nn.Parameter:
    """A parameter drawn from U(low, high) with an explicit generator (seeded init, no global RNG)."""
    return nn.Parameter(torch.empty(shape).uniform_(low, high, generator=generator))


def normal_(shape: tuple[int, ...], mean: float, std: float, generator: torch.Generator) -> nn.Parameter:
    return nn.Parameter(torch.empty(shape).normal_(mean, std, generator=generator))
