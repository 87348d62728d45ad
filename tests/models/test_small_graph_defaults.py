"""Training defaults that fit the graph: a small graph gets enough optimisation steps per epoch, the
benchmark sets keep the reference batch sizes (so earlier tables stay valid), and the mean predictor's
valid MSE is the bar a run is measured against."""

from __future__ import annotations

import pytest

from loaders import BENCHMARKS
from pipeline.models import default_config
from pipeline.models.config import MIN_STEPS_PER_EPOCH, MODEL_DEFAULTS, fitted_batch_size, steps_per_epoch
from pipeline.models.evaluation import mean_predictor


@pytest.mark.parametrize(
    ("default", "n_train", "expected"),
    [
        (1024, 406, 25),  # Les Miserables' train split: 406 // 16 = 25 -> 17 steps, not 1
        (1024, 16 * 1024, 1024),  # exactly 16 steps at the default: unchanged
        (1024, 15 * 1024 + 1, 1024),  # ceil(...) = 16 steps already
        (1024, 15 * 1024, 960),  # 15 steps at the default: 15360 / 16 = 960
        (1024, 30, 8),  # 30 // 16 = 1 is below the floor of 8 facts per batch
        (4, 30, 4),  # never above the default
        (1024, 0, 1024),  # no facts: nothing to fit
    ],
)
def test_fitted_batch_size_by_hand(default: int, n_train: int, expected: int) -> None:
    assert fitted_batch_size(default, n_train) == expected


def test_a_fitted_batch_size_gives_the_minimum_steps_where_the_floor_allows() -> None:
    for n in range(8 * MIN_STEPS_PER_EPOCH, 20_000, 37):
        assert steps_per_epoch(fitted_batch_size(1024, n), n) >= MIN_STEPS_PER_EPOCH


@pytest.mark.parametrize("name", ["ppi5k", "cn15k", "onet20k"])
@pytest.mark.parametrize("model", sorted(MODEL_DEFAULTS))
def test_benchmark_sets_keep_the_reference_batch_size(name: str, model: str) -> None:
    # the published train rows and the distinct train facts (measured: PPI5k 214,661, CN15k 193,274; 210 and
    # 189 steps at 1024, 53 and 48 at BEUrRE's 4096): both keep the reference batch size
    rows = BENCHMARKS.get(name).facts["train"]
    for n_train in (rows, {"ppi5k": 214_661, "cn15k": 193_274}.get(name, rows)):
        cfg = default_config(name, model, n_train=n_train)
        assert cfg.batch_size == MODEL_DEFAULTS[model]["batch_size"]
        assert steps_per_epoch(cfg.batch_size, n_train) >= 3 * MIN_STEPS_PER_EPOCH


def test_default_config_fits_only_an_unset_batch_size() -> None:
    assert default_config("x", "ukge_logi", n_train=406).batch_size == 25
    assert default_config("x", "ukge_logi", n_train=406, batch_size=64).batch_size == 64
    assert default_config("x", "ukge_logi").batch_size == 1024  # no graph given: the reference default


def test_mean_predictor_by_hand() -> None:
    got = mean_predictor([0.2, 0.4], [0.3, 0.5])  # predicts 0.3: errors 0 and 0.2
    assert got["confidence"] == pytest.approx(0.3)
    assert got["valid_mse"] == pytest.approx(0.02)
    assert mean_predictor([], [0.5])["valid_mse"] != mean_predictor([], [0.5])["valid_mse"]  # NaN
