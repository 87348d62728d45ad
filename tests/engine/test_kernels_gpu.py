"""The fused CUDA stream (pipeline/engine/_stream_triton.py) against the CPU's forms of the same
step, value for value: on a GPU (marked gpu) on random steps (ties, -inf states, signed and infinite
betas, NaN from inf * 0, sorted and unsorted columns, one to three atoms, int32 and int64 indices), the
rounding of one fused multiply-add, and the engine's answers on CUDA with every stream fused equal to
the frozen CPU engine and the brute force; and, without a GPU, the same kernel run by triton's
interpreter (skipped where triton is not installed: it is not a dependency)."""

from __future__ import annotations

import importlib.util
import textwrap
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.engine.reference.adjacency as ref_adj
import tests.engine.reference.evaluate as ref_eval
from pipeline.engine import Adjacency, kernels, search_batch
from tests.engine.oracle import dense_conf, oracle
from tests.engine.test_kernels import child, same, steps, torch_form
from tests.engine.test_multi_edges import batch, graphs
from tests.engine.test_oracle import assert_same, graph_of

HAS_TRITON = importlib.util.find_spec("triton") is not None


def on_gpu(test):
    """Marked gpu; skipped without CUDA or without triton."""
    for mark in (
        pytest.mark.skipif(not HAS_TRITON, reason="needs triton"),
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
        pytest.mark.gpu,
    ):
        test = mark(test)
    return test


def fused(work: int = 0):
    """Every CUDA stream of at least `work` entry-rows through the fused kernel."""
    return mock.patch.object(kernels, "GPU_MIN_WORK", work)


@on_gpu
def test_the_fused_kernel_loads_where_triton_and_a_gpu_are():
    assert kernels.load_gpu()


@on_gpu
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps(), st.booleans(), st.sampled_from([None, True, False]))
def test_fused_gpu_stream_equals_the_cpu_forms(step, wide, segmented):
    from pipeline.engine._stream_triton import stream_max

    state, betas, src, dst, cc = step
    want = torch_form(state, betas, src, dst, cc, wide)
    cuda = [state.cuda(), [b.cuda() for b in betas], src.cuda(), dst.cuda(), cc.cuda()]
    got = stream_max(*cuda, segmented=segmented)
    assert got.is_cuda and got.is_contiguous()
    assert same(got.cpu(), want)


@on_gpu
def test_the_gpu_sum_is_fused_as_the_cpu_adds_it():
    """x + beta * c rounded once, as addcmul_ and the CPU's compiled loop round it."""
    x, beta, c = (
        torch.tensor([[-(1.0 + 2**-22)]]),
        torch.tensor([1.0 + 2**-23]),
        torch.tensor([[1.0 + 2**-23]]),
    )
    i = torch.tensor([0], dtype=torch.int32, device="cuda")
    assert kernels.load_gpu()
    got = kernels.stream_max(x.cuda(), [beta.cuda()], i, i, c.cuda())
    assert got.item() == 2**-46  # fused; rounded twice it would be 0


@on_gpu
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_engine_on_cuda_with_every_stream_fused_equals_the_frozen_engine_and_the_oracle(data):
    n, r, facts = data.draw(graphs())
    queries = data.draw(batch(n, r))
    graph = graph_of(n, r, facts)
    with torch.no_grad():
        with fused(0):
            fast = search_batch(queries, Adjacency.from_graph(graph.to("cuda"))).cpu()
        ref = ref_eval.evaluate_batch(queries, ref_adj.Adjacency.from_graph(graph))
    assert torch.equal(fast, ref)
    conf = dense_conf(n, r, facts)
    for q, u in zip(queries, fast, strict=True):
        assert_same(u, oracle(q, conf))


# The interpreter runs the kernel's program on the CPU (numpy). Its fused multiply-add is two roundings
# (a * b + c in float32), so the child replaces it with torch's addcmul (the CPU forms' one rounding): what
# is checked here is the kernel's indexing, masks, segmented scan, atomics and NaN flags; the rounding of
# tl.fma is checked on a GPU (test_the_gpu_sum_is_fused_as_the_cpu_adds_it).
_INTERPRETED = textwrap.dedent(
    """
    import numpy as np, torch
    from triton.runtime import interpreter

    def create_fma(self, x, y, z):
        shape = np.broadcast_shapes(x.data.shape, y.data.shape, z.data.shape)
        a, b, c = (torch.from_numpy(np.ascontiguousarray(np.broadcast_to(t.data, shape))) for t in (x, y, z))
        return interpreter.TensorHandle(torch.addcmul(c, a, b).numpy(), z.dtype.scalar)

    interpreter.InterpreterBuilder.create_fma = create_fma
    from pipeline.engine._stream_triton import stream_max
    from tests.engine.test_kernels import same, torch_form

    g = torch.Generator().manual_seed(7)
    levels = torch.tensor([0.0, 0.25, 0.5, 0.5, 0.7093, 1.0])
    checked = 0
    for t in range(48):
        rows, n, f, atoms = (int(torch.randint(lo, hi, (1,), generator=g)) for lo, hi in
                             ((1, 40), (1, 40), (1, 400), (1, 4)))
        state = levels[torch.randint(0, 6, (rows, n), generator=g)] * 3 - 1
        state[torch.rand(rows, n, generator=g) < 0.3] = float("-inf")
        src = torch.randint(0, n, (f,), generator=g)
        dst = torch.randint(0, n, (f,), generator=g)
        if t % 2:
            dst = torch.sort(dst).values
        if t % 3:
            src, dst = src.int(), dst.int()
        cc = levels[torch.randint(0, 6, (atoms, f), generator=g)]
        pool = torch.tensor([[-1.0, -0.0, 0.0, 0.5, 1.5], [float("inf"), 1.0, 0.0, 1.0, 2.0]][t % 2])
        betas = [pool[torch.randint(0, 5, (rows,), generator=g)] for _ in range(atoms)]
        want = torch_form(state, betas, src, dst, cc, t % 4 == 0)
        for segmented in (None, True, False):
            got = stream_max(state, betas, src, dst, cc, segmented=segmented)
            assert same(got, want), (t, segmented)
            checked += 1
    print("checked", checked)
    """
)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (not a dependency)")
def test_the_fused_kernel_interpreted_equals_the_torch_form():
    assert child(_INTERPRETED, timeout=600, TRITON_INTERPRET="1").split() == ["checked", "144"]


_BACKGROUND = textwrap.dedent(
    """
    import torch
    from pipeline.engine import kernels

    assert kernels.prepare(kernels.KERNEL_FACTS - 1, "cuda") is None  # a small export: the torch form
    state = torch.zeros((1, 1), device="cuda")
    assert not kernels.applies(state.device, kernels.GPU_MIN_WORK)  # nothing loaded, none loading
    thread = kernels.prepare(kernels.KERNEL_FACTS, "cuda")
    assert thread is not None and kernels.prepare(kernels.KERNEL_FACTS, "cuda") is None  # one load
    kernels.settle()
    assert kernels.applies(state.device, kernels.GPU_MIN_WORK)
    assert not kernels.applies(state.device, kernels.GPU_MIN_WORK - 1)
    assert "kernel" not in kernels._state  # the CPU's compiled form was not loaded for a GPU export
    print("ok")
    """
)


@on_gpu
def test_auto_loads_the_fused_kernel_in_the_background_for_large_exports():
    assert child(_BACKGROUND, PIPELINE_KERNELS="auto") == "ok"


_WRONG_GPU = textwrap.dedent(
    """
    import torch
    import pipeline.engine._stream_triton as fused
    from pipeline.engine import kernels

    real = fused.stream_max
    fused.stream_max = lambda *a, **k: real(*a, **k).add_(1e-3)  # a damaged triton cache's code, say
    print(kernels.load_gpu(), kernels.applies(torch.device("cuda"), 1 << 40))
    """
)


@on_gpu
def test_a_fused_kernel_that_fails_its_known_answers_is_never_used():
    assert child(_WRONG_GPU, PIPELINE_KERNELS="numba").split() == ["False", "False"]
