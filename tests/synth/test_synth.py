"""The synthetic uncertain-KG generator: exact counts, determinism, power-law degrees, confidences like the
data sets', and the round trip through `pipeline ingest --from` into a loadable user data set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.errors import PipelineError
from pipeline.stages.synth import CONFIDENCE_QUANTILES, draw_confidences, generate, quantiles_of, write_tsv
from tests.conftest import require_data


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 40), r=st.integers(1, 4), extra=st.integers(0, 60), seed=st.integers(0, 2**16))
def test_counts_distinct_no_self_loops_every_entity_used(n: int, r: int, extra: int, seed: int) -> None:
    f = min(n + extra, n * (n - 1) * r // 2)
    if f < n:
        return
    h, rel, t, c = generate(n, r, f, seed)
    assert len(h) == f
    keys = (h * r + rel) * n + t
    assert len(np.unique(keys)) == f and np.all(np.diff(keys) > 0)  # distinct and sorted
    assert not np.any(h == t)
    assert set(np.concatenate([h, t]).tolist()) == set(range(n))
    assert rel.min() >= 0 and rel.max() < r and np.all((c >= 0) & (c <= 1))


def test_same_seed_same_graph_other_seed_other_graph() -> None:
    a = generate(500, 5, 3000, seed=3)
    b = generate(500, 5, 3000, seed=3)
    c = generate(500, 5, 3000, seed=4)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])


def test_degrees_are_heavy_tailed() -> None:
    n = 5000
    h, _, t, _ = generate(n, 10, 50_000, seed=0)
    deg = np.bincount(np.concatenate([h, t]), minlength=n)
    # a power law has hubs far above the mean and a median below it; an Erdos-Renyi graph of the same
    # density would have max/mean ~ 1.7 and median ~ mean
    assert deg.max() > 20 * deg.mean()
    assert np.median(deg) < 0.6 * deg.mean()
    assert deg.min() >= 1


@pytest.mark.parametrize("like", ["ppi5k", "cn15k"])
def test_quantile_tables_match_the_data(like: str) -> None:
    folder = require_data(like)
    c = np.loadtxt(folder / "train.tsv", usecols=3)
    assert quantiles_of(c) == tuple(CONFIDENCE_QUANTILES[like])


@pytest.mark.parametrize("like", ["ppi5k", "cn15k"])
def test_drawn_confidences_follow_the_table(like: str) -> None:
    c = draw_confidences(np.random.default_rng(0), 200_000, like)
    table = np.asarray(CONFIDENCE_QUANTILES[like])
    got = np.quantile(c, np.linspace(0, 1, len(table)))
    assert np.max(np.abs(got[1:-1] - table[1:-1])) < 0.02
    assert c.min() >= table[0] and c.max() <= table[-1]
    if like == "cn15k":  # its point mass at 0.7093 (~40% of the table's steps) survives the sampling
        assert 0.35 < np.mean(c == 0.7093) < 0.5


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(PipelineError, match="--facts"):
        generate(10, 1, 5)
    with pytest.raises(PipelineError, match="--facts"):
        generate(10, 1, 10_000)
    with pytest.raises(PipelineError, match="--like"):
        draw_confidences(np.random.default_rng(0), 3, "fb15k")


def test_tsv_is_named_and_reads_back(tmp_path: Path) -> None:
    h, r, t, c = generate(12, 2, 30, seed=1)
    p = write_tsv(tmp_path / "g.tsv", h, r, t, c, 12, 2)
    lines = p.read_text().splitlines()
    assert lines[0] == "head\trelation\ttail\tconfidence" and len(lines) == 31
    first = lines[1].split("\t")
    assert first[0] == f"ent{h[0]:02d}" and first[1] == f"rel{r[0]}" and float(first[3]) == pytest.approx(c[0])


def test_cli_synth_records_a_user_data_set_loadable_like_any(fresh_store, tmp_path: Path) -> None:
    from loaders import load
    from pipeline.cli import cli

    args = ["synth", "syn", "--entities", "60", "--relations", "3", "--facts", "400", "--seed", "2",
            "--like", "cn15k", "--store", fresh_store.uri, "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["entities"] == 60 and rep["relations"] == 3 and not rep["unchanged"]
    kg = load("syn")
    assert kg.n_entities == 60 and kg.n_relations == 3
    assert sum(rep["rows"].values()) == 400
    again = json.loads(CliRunner().invoke(cli, args).output)
    assert again["unchanged"]  # same seed: the same file, so ingest finds nothing to do
    bad = CliRunner().invoke(cli, ["synth", "syn2", "--entities", "5", "--relations", "1", "--facts", "2"])
    assert bad.exit_code != 0 and "--facts" in bad.output and "Traceback" not in bad.output
