"""The two forms of an answers batch's ranked rows agree bit for bit: the per-query numpy form the CPU
answers with and the batched torch form a GPU answers with (run here on CPU tensors), on utilities full
of ties, infinities and NaNs, with truths that repeat, sit in the top k or lie outside it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.formats.answers import ranked_rows, ranked_rows_on_device


@st.composite
def batches(draw: st.DrawFn) -> tuple[torch.Tensor, list[np.ndarray], int]:
    bsz = draw(st.integers(1, 6))
    n = draw(st.integers(1, 40))
    pool = [float("-inf"), float("inf"), float("nan"), 0.0, 0.25, 0.5, 1.0, 2.0, -1.0]
    vals = draw(st.lists(st.sampled_from(pool) | st.floats(-3, 3, width=32), min_size=bsz * n, max_size=bsz * n))
    util = torch.tensor(vals, dtype=torch.float32).reshape(bsz, n)
    truth = [np.asarray(draw(st.lists(st.integers(0, n - 1), max_size=8)), dtype=np.int64) for _ in range(bsz)]
    return util, truth, draw(st.integers(0, n + 3))


@settings(max_examples=300, deadline=None)
@given(batches())
def test_the_batched_form_is_the_per_query_form(batch: tuple[torch.Tensor, list[np.ndarray], int]) -> None:
    util, truth, k = batch
    want = ranked_rows(util, truth, k)
    got = ranked_rows_on_device(util, truth, k)
    for f in dataclasses.fields(want):
        a, b = getattr(want, f.name), getattr(got, f.name)
        assert a.dtype == b.dtype, f.name
        assert np.array_equal(a, b, equal_nan=f.name == "utility"), f.name


def test_a_hand_made_batch() -> None:
    """Row 0: values 3, 1, 3, nan, 1 (ids 0-4), k = 2: the top is 0, 2 (the tie by id); truth 4, 1, 4 adds
    1 and 4, ranked 3 and 4 in the tie group first 3, size 2; the NaN ranks last as -inf."""
    util = torch.tensor([[3.0, 1.0, 3.0, float("nan"), 1.0]])
    got = ranked_rows_on_device(util, [np.array([4, 1, 4, 3])], 2)
    assert got.counts.tolist() == [5]
    assert got.entity.tolist() == [0, 2, 1, 3, 4]
    assert got.rank.tolist() == [1, 2, 3, 5, 4]
    assert got.rank_first.tolist() == [1, 1, 3, 5, 3]
    assert got.ties.tolist() == [2, 2, 2, 1, 2]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_utilities_rank_on_the_device_as_the_cpu_does() -> None:
    g = torch.Generator().manual_seed(0)
    util = (torch.rand(64, 4999, generator=g) * 50).round() / 50  # many ties
    util[util < 0.3] = float("-inf")
    truth = [np.random.default_rng(b).integers(0, 4999, 40) for b in range(64)]
    want, got = ranked_rows(util, truth), ranked_rows(util.cuda(), truth)
    for f in dataclasses.fields(want):
        assert np.array_equal(getattr(want, f.name), getattr(got, f.name)), f.name
