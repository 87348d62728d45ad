"""Number embedding (NE) of the SRC paper's baselines: a sinusoidal code of a scalar, as in the Transformer.

``g(v)[2i] = sin(v / 1000^(2i/d))`` and ``g(v)[2i+1] = cos(v / 1000^(2i/d))``: the even/odd pair ``2i, 2i+1``
shares one frequency, so the code of a number is a point on ``d/2`` circles of decreasing frequency. The base
is 1000 (the paper's appendix), not the Transformer's 10000: alpha and beta live in [0, 1], and a smaller base
keeps more dimensions away from the nearly constant ``sin ~ 0, cos ~ 1`` regime.
"""

from __future__ import annotations

import torch

BASE = 1000.0


def number_embedding(values: torch.Tensor, dim: int, base: float = BASE) -> torch.Tensor:
    """Sinusoidal codes of numbers.

    values: (...) float; returns (..., dim) float of the same dtype/device. dim may be odd (the last dim is
    then a sine with no cosine partner)."""
    if dim <= 0:
        raise ValueError(f"number embedding dimension must be positive, got {dim}")
    v = values.to(torch.get_default_dtype() if not values.is_floating_point() else values.dtype)
    idx = torch.arange(dim, device=v.device)
    pair = (idx // 2) * 2  # the even index of each sin/cos pair sets its frequency
    freq = base ** (-pair.to(v.dtype) / dim)
    angle = v.unsqueeze(-1) * freq
    return torch.where(idx % 2 == 0, torch.sin(angle), torch.cos(angle))
