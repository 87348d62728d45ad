"""The engine gives the same utilities on CUDA as on CPU (skipped without a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.core.kg import observed_graph
from pipeline.engine import Adjacency, search_batch
from pipeline.softquery import QUERY_TYPES

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_cuda_equals_cpu(ppi5k):
    rng = np.random.default_rng(3)
    facts = ppi5k.graph("test")
    h = facts["h"].to_numpy()
    queries = []
    for qt in QUERY_TYPES.values():
        for _ in range(20):
            rels = rng.integers(0, ppi5k.n_relations, qt.n_atoms).tolist()
            anchors = h[rng.integers(0, len(h), qt.n_anchors)].tolist()
            alphas = rng.choice([0.0, 0.3, 0.6], qt.n_atoms).tolist()
            queries.append(qt.build(rels, anchors, alphas, rng.choice([0.5, 1.0], qt.n_atoms).tolist()))
    g = observed_graph(ppi5k, "test")
    cpu = search_batch(queries, Adjacency.from_graph(g))
    gpu = search_batch(queries, Adjacency.from_graph(g.to("cuda"))).cpu()
    assert torch.equal(torch.isneginf(cpu), torch.isneginf(gpu))
    fin = torch.isfinite(cpu)
    assert torch.allclose(cpu[fin], gpu[fin], atol=1e-5)
