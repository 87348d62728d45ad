"""The optimiser of every model the project trains (UKGE, BEUrRE, the query-embedding baselines,
calibration L): Adam, in the form that suits the device."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def adam(params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """``torch.optim.Adam(params, lr, weight_decay)``. On CUDA its fused form: one kernel per step for all
    the parameters and the step counters on the device, where the default for-each form launches a dozen
    kernels a step (a UKGE step is ~30 kernels in all, so launches bound it). The same update up to
    float rounding; a CUDA run already draws other batches than a CPU run of its seed (models/training.py),
    so nothing seeded changes there. On the CPU the default form: seeded CPU runs are unchanged."""
    params = list(params)
    on_cuda = bool(params) and all(p.is_cuda for p in params)
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=True if on_cuda else None)
