"""The per-(head, relation) top-k cap: the selection against a brute-force per-row sort, ties included, and
the export with --top-k against the dense scores of a trained toy model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.formats.adjacency import load_adjacency
from pipeline.models import load_run
from pipeline.stages.export_select import select_block
from tests.export.test_export import _train, export_adjacency


def brute(scores: np.ndarray, threshold: float, k: int | None) -> set[tuple[int, int]]:
    """Per row: tails sorted by (score descending, tail ascending), the first k, then the threshold."""
    kept = set()
    for i, row in enumerate(scores):
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        for j in order[: k if k is not None else len(row)]:
            if row[j] >= threshold:
                kept.add((i, j))
    return kept


def test_hand_example_with_ties() -> None:
    s = torch.tensor([[0.5, 0.9, 0.5, 0.1, 0.5], [0.2, 0.2, 0.2, 0.2, 0.2]])
    rows, tails, vals = select_block(s, 0.3, 2)
    # row 0: 0.9 at tail 1, then the tie 0.5 goes to tail 0; row 1: nothing passes 0.3
    assert rows.tolist() == [0, 0] and tails.tolist() == [0, 1] and vals.tolist() == pytest.approx([0.5, 0.9])
    rows, tails, _ = select_block(s, 0.15, 3)
    assert list(zip(rows.tolist(), tails.tolist(), strict=True)) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


@settings(max_examples=200, deadline=None)
@given(
    scores=arrays(np.float32, st.tuples(st.integers(1, 6), st.integers(1, 9)),
                  elements=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0])),  # few values: many ties
    threshold=st.sampled_from([0.05, 0.25, 0.6]),
    k=st.one_of(st.none(), st.integers(1, 12)),
)
def test_selection_equals_brute_force(scores: np.ndarray, threshold: float, k: int | None) -> None:
    rows, tails, vals = select_block(torch.from_numpy(scores), threshold, k)
    pairs = list(zip(rows.tolist(), tails.tolist(), strict=True))
    assert pairs == sorted(pairs)  # sorted by (row, tail), as the export format requires
    assert set(pairs) == brute(scores, threshold, k)
    np.testing.assert_array_equal(vals.numpy(), scores[rows.numpy(), tails.numpy()])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory.mktemp("topk") / "r", "ukge_logi")


@pytest.mark.parametrize("k,block_rows", [(1, None), (3, 7), (1000, None)])
def test_export_top_k_equals_dense(run: Path, k: int, block_rows: int | None, tmp_path: Path) -> None:
    threshold = 0.2
    man = export_adjacency(run, threshold=threshold, out=tmp_path / "e", progress=False, block_rows=block_rows, top_k=k)
    graph, meta = load_adjacency(tmp_path / "e", dataset="toy")
    model = load_run(run)
    n = model.n_entities
    total = 0
    for r in range(model.n_relations):
        dense = model.score_block(torch.arange(n), r, torch.arange(n)).detach().numpy()
        want = sorted(brute(dense, threshold, k))
        gh, gt, _ = graph.relation(r)
        assert list(zip(gh.tolist(), gt.tolist(), strict=True)) == want
        total += len(want)
    assert man["nnz"] == total > 0 and meta["top_k"] == k
    assert man["nnz"] <= k * n * model.n_relations


def test_top_k_is_part_of_the_cache_key_and_validated(run: Path, tmp_path: Path) -> None:
    a = export_adjacency(run, threshold=0.2, out=tmp_path / "e", progress=False, top_k=1)
    with pytest.raises(ArtifactError, match=r"holds an export of top_k 1 \(this one None\): overwrite=True"):
        export_adjacency(run, threshold=0.2, out=tmp_path / "e", progress=False)  # same folder, no cap: not silently replaced
    b = export_adjacency(run, threshold=0.2, out=tmp_path / "e", progress=False, overwrite=True)
    assert not b["cached"] and b["nnz"] > a["nnz"] and b["top_k"] is None
    assert export_adjacency(run, threshold=0.2, out=tmp_path / "e", progress=False)["cached"]
    with pytest.raises(PipelineError, match=r"top_k=0: must be at least 1"):
        export_adjacency(run, threshold=0.2, out=tmp_path / "f", progress=False, top_k=0)


def test_cli_top_k(run: Path, tmp_path: Path) -> None:
    from pipeline.cli import cli

    res = CliRunner().invoke(cli, ["export", str(run), "--threshold", "0.2", "--top-k", "2", "--out", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output  # a tiny graph is never refused by the dense guard
    man = load_adjacency(tmp_path / "c")[1]
    assert man["top_k"] == 2 and man["nnz"] <= 2 * man["n_entities"] * man["n_relations"]
    bad = CliRunner().invoke(cli, ["export", str(run), "--top-k", "0", "--out", str(tmp_path / "d")])
    assert bad.exit_code != 0 and "--top-k 0: must be at least 1" in bad.output and "Traceback" not in bad.output
