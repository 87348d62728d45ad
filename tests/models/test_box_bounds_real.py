"""The pruned box scoring against brute force on the real data sets (slow): a BEUrRE trained briefly on
PPI5k and on CN15k (real torch training, lr 1e-2, few negatives, one epoch), 3 relations of PPI5k and 2
of CN15k, a slice of heads against all tails (``python -m benchmarks run export --verify-slice RxH`` checks
any run's export the same way)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.models import box_bounds as bb
from pipeline.models import default_config, load_run, train
from tests.models.test_box_bounds import assert_same_facts, brute

pytestmark = pytest.mark.slow


def _short_run(kg, tmp: Path):
    cfg = default_config(kg.name, "beurre", epochs=1, lr=0.01, negatives=2, seed=0)
    train(kg, cfg, tmp / kg.name, progress=False, link_prediction=False)  # the bounds, not the ranks
    return load_run(tmp / kg.name)


@pytest.mark.parametrize(("name", "relations", "n_heads"), [("ppi5k", 3, 200), ("cn15k", 2, 100)])
def test_pruned_scoring_equals_brute_force_on_real_data(
    request: pytest.FixtureRequest, tmp_path: Path, name: str, relations: int | None, n_heads: int
) -> None:
    torch.set_num_threads(1)
    kg = request.getfixturevalue(name)
    model = _short_run(kg, tmp_path)
    n = model.n_entities
    heads = torch.as_tensor(np.unique(np.linspace(0, n - 1, n_heads).astype(np.int64)))
    stats = bb.PruneStats()
    for r in range(relations or model.n_relations):
        got = bb.score_relation(model, r, 0.1, heads=heads, stats=stats)
        assert_same_facts(got, brute(model, r, 0.1, heads), 0.1, n)
    assert stats.facts > 0 and stats.pairs_scored < stats.pairs_total
