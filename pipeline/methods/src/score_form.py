"""Calibration L in the authors' form (``--l-form score``, ``--l-variant authors``): the affine map applied
to a UKGE backbone's raw plausibility ``x = <e_h, r, e_t>`` before its mapping, the relation embeddings
optionally trained (``r + s_r``, ``--l-train affine+relations``), then re-thresholded at the export's
threshold:

    x_c = <e_h, r + s_r, e_t> (1 + rho) + lambda,   P_c = m(w x_c + b) if >= T else 0

with ``[rho, lambda]`` the same linear map of the frozen features as :class:`~.affine.AffineCalibration`,
``m`` the backbone's mapping (logi: sigmoid; rect: clamp to [0, 1]) and ``w, b`` its scalars. The authors'
code (``Neural_SIU.py``, ``Kge_finetune``) applies the affine map to the raw UKGE score and a ReLU in
place of the mapping, its linear layers initialised at 1e-3 of PyTorch's default; here every new
parameter starts at 0, so an untrained L is the backbone's own confidence (the identity up to the float
summation order of the dot product), and the mapping is kept, so the form corrects what the export holds.
Only stored facts are calibrated (a fact below the threshold stays absent, as for every SRC answer);
a fact that the correction takes below the threshold drops out of the graph, during training too.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from pipeline.core.errors import PipelineError
from pipeline.core.gather import rows

_BLOCK = 1 << 15  # facts scored at once without autograd: (block, dim) gathers stay in the cache


class ScoreCalibration(nn.Module):
    """L on the raw score of a UKGE backbone (module docstring). The backbone's entity and relation
    vectors and its (w, b) are buffers, not saved with L (its run is the other half of a saved L)."""

    def __init__(self, model: Any, entity_dim: int, relation_dim: int, threshold: float,
                 train_relations: bool) -> None:
        super().__init__()
        mapping = getattr(model, "mapping", "")
        if mapping not in ("logi", "rect"):
            raise PipelineError(f"calibration L on the raw score needs a UKGE backbone (a dot-product score and "
                                f"its mapping); {getattr(model, 'name', type(model).__name__)} has none "
                                "(use l_form=confidence)")
        self.mapping, self.threshold = mapping, float(threshold)
        self.w_head = nn.Parameter(torch.zeros(entity_dim, 2))
        self.w_rel = nn.Parameter(torch.zeros(relation_dim, 2))
        self.w_tail = nn.Parameter(torch.zeros(entity_dim, 2))
        self.bias = nn.Parameter(torch.zeros(2))
        dev = model.device
        self.register_buffer("ent", model.ent.detach().float().to(dev), persistent=False)
        self.register_buffer("rel", model.rel.detach().float().to(dev), persistent=False)
        self.register_buffer("w", model.w.detach().float().reshape(()).to(dev), persistent=False)
        self.register_buffer("b", model.b.detach().float().reshape(()).to(dev), persistent=False)
        self.rel_shift = nn.Parameter(torch.zeros_like(self.rel)) if train_relations else None

    def projections(self, tables: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """[rho, lambda] parts per head entity, relation (bias included) and tail entity (as the affine L)."""
        eh, er, et = tables
        return eh @ self.w_head, er @ self.w_rel + self.bias, et @ self.w_tail

    def relation_vectors(self) -> torch.Tensor:
        return self.rel if self.rel_shift is None else self.rel + self.rel_shift

    def calibrate(
        self, conf: torch.Tensor, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor, proj: tuple[torch.Tensor, ...]
    ) -> torch.Tensor:
        """Calibrated confidences (nnz,) of facts h, r, t (nnz,) int64 (conf, their exported confidence, is
        not read: the score is recomputed from the backbone's vectors)."""
        ph, pr, pt = proj
        rl = rows(ph, h) + rows(pr, r) + rows(pt, t)
        x = (rows(self.ent, h) * rows(self.relation_vectors(), r) * rows(self.ent, t)).sum(-1)
        z = self.w * (x * (1.0 + rl[:, 0]) + rl[:, 1]) + self.b
        p = torch.sigmoid(z) if self.mapping == "logi" else z.clamp(0.0, 1.0)
        return torch.where(p >= self.threshold, p, torch.zeros_like(p))

    @torch.no_grad()
    def fill(self, out: torch.Tensor, conf: torch.Tensor, h: torch.Tensor, t: torch.Tensor,
             proj: tuple[torch.Tensor, ...], r: int) -> None:
        """out = calibrate(conf, h, r, t) for facts of one relation r, in place, in blocks."""
        for lo in range(0, conf.numel(), _BLOCK):
            hi = min(lo + _BLOCK, conf.numel())
            rel = torch.full((hi - lo,), r, dtype=torch.int64, device=conf.device)
            out[lo:hi] = self.calibrate(conf[lo:hi], h[lo:hi].long(), rel, t[lo:hi].long(), proj)
