"""The export of box models goes through the pruned scorer (pipeline.models.box_bounds) and writes the same
files as the dense loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from pipeline.formats.adjacency import load_adjacency
from pipeline.models import default_config, load_run, train
from pipeline.models.runs import RESULTS_FILE, read_json, save_model, write_run_json
from pipeline.stages.export import export_adjacency
from tests.models.test_box_bounds import spread_model
from tests.models.toy import toy_kg


@pytest.fixture(scope="module")
def box_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trained toy BEUrRE run whose boxes are then spread out (as a longer training would), so the
    export has blocks to prune: 300 entities, 3 relations."""
    run = tmp_path_factory.mktemp("box") / "run"
    kg = toy_kg(n_entities=300, n_relations=3, n_facts=900)
    train(kg, default_config("toy", "beurre", epochs=1, dim=4, batch_size=256, lr=0.02, seed=0), run,
          progress=False)
    model = load_run(run)
    model.load_state_dict(spread_model(300, 4, 3, seed=3, spread=4.0).state_dict())
    save_model(run, model)
    # results.json names the model it describes: a model replaced by hand is refused unless it is updated
    results = read_json(run / RESULTS_FILE)
    write_run_json(run / RESULTS_FILE, {**results, "model_hash": model.content_hash()})
    return run


def _facts(path: Path) -> list[tuple[np.ndarray, ...]]:
    graph, _ = load_adjacency(path)
    return [tuple(x.numpy() for x in graph.relation(r)) for r in range(graph.n_relations)]


@pytest.mark.parametrize("threshold", [0.05, 0.3])
def test_pruned_export_equals_the_dense_export(box_run: Path, tmp_path: Path, threshold: float) -> None:
    pruned = export_adjacency(box_run, threshold=threshold, out=tmp_path / "p", progress=False, allow_dense=True)
    dense = export_adjacency(box_run, threshold=threshold, out=tmp_path / "d", progress=False, allow_dense=True, prune=False)
    assert pruned["nnz"] == dense["nnz"] > 0
    for (ph, pt, ps), (dh, dt, ds) in zip(_facts(tmp_path / "p"), _facts(tmp_path / "d"), strict=True):
        np.testing.assert_array_equal(ph, dh)
        np.testing.assert_array_equal(pt, dt)
        np.testing.assert_allclose(ps, ds, rtol=0, atol=1e-6)
    stats = pruned["pruning"]
    assert "pruning" not in dense and stats["facts"] == pruned["nnz"]
    assert stats["blocks_pruned"] > 0 and 0 < stats["scored_share"] < 1


def test_pruned_export_keeps_the_dense_guard(box_run: Path, tmp_path: Path) -> None:
    from pipeline.core.errors import PipelineError

    # judged after the first block of heads (relation 0), also with the progress bar off
    with pytest.raises(PipelineError, match=r"pairs scored so far \(through relation #0\).*more than its budget "
                       r"of 1.0 KB \(the 1.0 KB allowed\); choose a higher threshold="):
        export_adjacency(box_run, threshold=0.001, out=tmp_path / "g", progress=False, max_bytes=1000)
    assert not (tmp_path / "g").exists()


def test_cli_export_reports_the_pruning(box_run: Path, tmp_path: Path) -> None:
    from pipeline.cli import cli

    res = CliRunner().invoke(cli, ["export", str(box_run), "--threshold", "0.3", "--out", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    assert "block pairs pruned" in res.output


@pytest.mark.gpu
def test_cuda_pruned_export_matches_cpu(box_run: Path, tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    export_adjacency(box_run, threshold=0.1, out=tmp_path / "cpu", device="cpu", progress=False, allow_dense=True)
    export_adjacency(box_run, threshold=0.1, out=tmp_path / "gpu", device="cuda", progress=False, allow_dense=True)
    for a, b in zip(_facts(tmp_path / "cpu"), _facts(tmp_path / "gpu"), strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_allclose(a[2], b[2], rtol=0, atol=1e-6)
