"""The gather of a trained embedding table: ``rows(weight, ids)``, used by every model the project trains
(UKGE, BEUrRE, the query-embedding baselines) and by calibration L."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def rows(weight: Tensor, ids: Tensor | int) -> Tensor:
    """``weight[ids]`` (``ids.shape + (d,)``) for a table the step trains, with a backward fit for an
    accelerator: every embedding gather of the trained models goes through it.

    The gradient of ``weight[ids]`` is an ``index_put_`` with accumulate. CUDA runs it deterministically by
    sorting the ids and summing each row's duplicates one after the other (pytorch/pytorch#41162): a
    relation's handful of rows, repeated in each of a batch's 21 x B triples, is a long serial sum. On a
    multi-core CPU outside deterministic mode (calibration L and the baselines train there) it sums in a
    varying order: two threads gave two different gradients for one gather of 32,786 ids into 30 rows, so
    a seeded fit could differ from run to run. The gradient of ``F.embedding`` sums the duplicates by
    segments, in parallel and in a fixed order, on both. On the CPU it is bit for bit the gradient of
    ``weight[ids]`` under deterministic mode (as the backbones train) or with one thread
    (tests/models/test_rows.py), so seeded CPU runs are unchanged. A plain int picks one row.
    """
    return weight[ids] if isinstance(ids, int) else F.embedding(ids, weight)
