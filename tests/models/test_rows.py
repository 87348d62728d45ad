"""``rows(weight, ids)``, the gather of every trained table: the values of ``weight[ids]``, and on the CPU
the same gradient bit for bit (seeded CPU runs are unchanged by it); on CUDA a deterministic gradient."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.gather import rows


def _grads(n_rows: int, dim: int, ids: torch.Tensor, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(n_rows, dim, generator=g).to(device)
    upstream = torch.randn(*ids.shape, dim, generator=g).to(device)
    a, b = table.clone().requires_grad_(), table.clone().requires_grad_()
    ya, yb = a[ids.to(device)], rows(b, ids.to(device))
    (ya * upstream).sum().backward()
    (yb * upstream).sum().backward()
    return ya.detach(), yb.detach(), a.grad, b.grad


@settings(max_examples=40, deadline=None)
@given(
    n_rows=st.integers(1, 40),
    dim=st.integers(1, 9),
    shape=st.lists(st.integers(1, 300), min_size=1, max_size=2),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_rows_is_indexing_with_the_same_cpu_gradient(n_rows: int, dim: int, shape: list[int], threads: int,
                                                     seed: int) -> None:
    """Few rows read many times (a relation's), as in a training step: values and gradients equal."""
    ids = torch.randint(n_rows, tuple(shape), generator=torch.Generator().manual_seed(seed + 1))
    before, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)  # as training runs
    try:
        ya, yb, ga, gb = _grads(n_rows, dim, ids, seed)
    finally:
        torch.set_num_threads(before)
        torch.use_deterministic_algorithms(deterministic)
    assert yb.shape == (*shape, dim)
    assert torch.equal(ya, yb)
    assert torch.equal(ga, gb)


def test_the_gradient_is_the_same_on_two_threads_outside_deterministic_mode() -> None:
    """Calibration L and the baselines train outside deterministic mode: on two threads the gradient of
    ``weight[ids]`` varied from run to run there; ``rows``' is the one-thread gradient every time."""
    ids = torch.randint(30, (169, 194), generator=torch.Generator().manual_seed(0))
    before, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        torch.set_num_threads(1)
        one = _grads(30, 5, ids, 0)[3]
        torch.set_num_threads(2)
        two = [_grads(30, 5, ids, 0)[3] for _ in range(4)]
    finally:
        torch.set_num_threads(before)
        torch.use_deterministic_algorithms(deterministic)
    assert all(torch.equal(one, g) for g in two)


def test_a_plain_int_picks_one_row() -> None:
    table = torch.arange(12.0).reshape(4, 3)
    assert torch.equal(rows(table, 2), torch.tensor([6.0, 7.0, 8.0]))
    assert torch.equal(rows(table, torch.tensor([[3, 0]])), torch.tensor([[[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]]))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_cuda_gradient_is_deterministic_and_right() -> None:
    """Under deterministic algorithms (as training runs), no warning and the same gradient twice, equal to
    the sum it stands for up to float order; 7 rows read 86,016 times (a batch of 4,096 x 21 triples)."""
    ids = torch.randint(7, (4096 * 21,), generator=torch.Generator().manual_seed(0))
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        first = _grads(7, 128, ids, 0, "cuda")
        second = _grads(7, 128, ids, 0, "cuda")
    finally:
        torch.use_deterministic_algorithms(before)
    assert torch.equal(first[3], second[3])
    assert torch.allclose(first[3], first[2], rtol=1e-4, atol=1e-3)
