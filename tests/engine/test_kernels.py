"""The compiled stream (pipeline.engine.kernels) against the torch form of the same step
(maxplus._stream, narrow and wide): value for value on random inputs (ties, -inf states, zero and negative
betas, unsorted and sorted columns, one to three atoms, NaN from inf * 0), and the engine's answers with
every stream compiled equal to the frozen engine and the brute force (tests/engine/test_multi_edges.py
draws the queries). Also the modes of PIPELINE_KERNELS."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.engine.maxplus as mp
import tests.engine.reference.adjacency as ref_adj
import tests.engine.reference.evaluate as ref_eval
from pipeline.core.errors import PipelineError
from pipeline.engine import Adjacency, kernels, search_batch
from tests.engine.oracle import dense_conf, oracle
from tests.engine.test_multi_edges import batch, graphs
from tests.engine.test_oracle import assert_same, graph_of

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")
NEG = float("-inf")


@pytest.fixture(autouse=True, scope="module")
def _loaded():
    kernels.load()  # every test here may call the compiled form directly, whatever ran before it


def test_the_compiled_form_loads_where_numba_is_installed():
    """Where numba is installed the compiled form must load: a kernel that fails to compile would
    otherwise fall back to the torch form in silence (same answers, the speed gone)."""
    assert kernels.load()
    assert kernels._state["kernel"] is not None


def compiled(work: int = 0):
    """Every stream of at least `work` entry-rows through the compiled form (the kernel is loaded)."""
    return mock.patch.object(kernels, "MIN_WORK", work)


def child(code: str, timeout: int = 300, **env: str) -> str:
    """Run code in a fresh Python process with env added to this one's; its stdout, stripped (its stderr
    in the failure where it exits with an error)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def torch_form(state, betas, src, dst, cc, wide: bool) -> torch.Tensor | None:
    old = (kernels.MIN_WORK, mp._WIDE)
    kernels.MIN_WORK, mp._WIDE = 1 << 62, 1 if wide else 1 << 30
    try:
        return mp._stream(state, slice(None), betas, src, dst, cc)
    finally:
        kernels.MIN_WORK, mp._WIDE = old


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN where NaN (signed zeros compare equal, as the engine's results are compared)."""
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all()) and a.shape == b.shape


@st.composite
def steps(draw):
    n = draw(st.integers(1, 40))
    rows = draw(st.integers(1, 40))
    atoms = draw(st.integers(1, 3))
    f = draw(st.integers(1, 300))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    levels = torch.tensor([0.0, 0.25, 0.5, 0.5, 0.7093, 1.0])
    state = levels[torch.randint(0, len(levels), (rows, n), generator=g)] * 3 - 1
    state[torch.rand(rows, n, generator=g) < draw(st.sampled_from([0.0, 0.3, 1.0]))] = NEG
    src = torch.randint(0, n, (f,), generator=g, dtype=torch.int32)
    dst = torch.randint(0, n, (f,), generator=g, dtype=torch.int32)
    if draw(st.booleans()):  # the engine's order: by column
        dst = torch.sort(dst).values
    if draw(st.booleans()):
        src, dst = src.long(), dst.long()
    cc = levels[torch.randint(0, len(levels), (atoms, f), generator=g)]
    choices = draw(st.sampled_from(["nonneg", "signed", "inf"]))
    pool = {
        "nonneg": [0.0, 0.5, 1.0, 2.0],
        "signed": [-1.0, -0.0, 0.0, 0.5, 1.5],
        "inf": [float("inf"), 1.0, 0.0],
    }
    pool_t = torch.tensor(pool[choices])
    betas = [pool_t[torch.randint(0, len(pool_t), (rows,), generator=g)] for _ in range(atoms)]
    return state, betas, src, dst, cc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps(), st.booleans())
def test_compiled_stream_equals_the_torch_form(step, wide):
    state, betas, src, dst, cc = step
    want = torch_form(state, betas, src, dst, cc, wide)
    got = kernels.stream_max(state, betas, src, dst, cc)
    assert got.is_contiguous() and got.dtype == torch.float32
    assert same(got, want)


def test_by_hand_one_and_two_atoms():
    # state (1, 3); entries (s, o): (0, 1) c=0.5, (2, 1) c=1.0, (1, 0) c=0.25; beta 2
    state = torch.tensor([[1.0, NEG, 0.0]])
    src, dst = torch.tensor([0, 2, 1], dtype=torch.int32), torch.tensor([1, 1, 0], dtype=torch.int32)
    got = kernels.stream_max(state, [torch.tensor([2.0])], src, dst, torch.tensor([[0.5, 1.0, 0.25]]))
    assert got.tolist() == [[NEG, 2.0, NEG]]  # column 1: max(1 + 2 * 0.5, 0 + 2 * 1); column 0: -inf + 0.5
    cc = torch.tensor([[0.5, 1.0, 0.25], [1.0, 0.0, 1.0]])
    got = kernels.stream_max(state, [torch.tensor([2.0]), torch.tensor([0.5])], src, dst, cc)
    assert got.tolist() == [[NEG, 2.5, NEG]]  # 1 + 1 + 0.5 beats 0 + 2 + 0


def test_the_sum_is_fused_as_torch_adds_it():
    """x + beta * c rounded once (addcmul_'s fused multiply-add), not twice: a case where they differ."""
    x, beta, c = (
        torch.tensor([[-(1.0 + 2**-22)]]),
        torch.tensor([1.0 + 2**-23]),
        torch.tensor([[1.0 + 2**-23]]),
    )
    fused = x.clone().addcmul_(beta[:, None], c)  # 2**-46 exactly (the product unrounded)
    twice = x + (beta[:, None] * c)
    assert fused.item() == 2**-46 and twice.item() == 0.0  # the case separates the two roundings
    got = kernels.stream_max(
        x, [beta], torch.tensor([0], dtype=torch.int32), torch.tensor([0], dtype=torch.int32), c
    )
    assert torch.equal(got, fused)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_engine_with_every_stream_compiled_equals_the_frozen_engine_and_the_oracle(data):
    n, r, facts = data.draw(graphs())
    queries = data.draw(batch(n, r))
    graph = graph_of(n, r, facts)
    adj = Adjacency.from_graph(graph)
    with torch.no_grad():
        with compiled(0):
            fast = search_batch(queries, adj)
        ref = ref_eval.evaluate_batch(queries, ref_adj.Adjacency.from_graph(graph))
    assert torch.equal(fast, ref)
    conf = dense_conf(n, r, facts)
    for q, u in zip(queries, fast, strict=True):
        assert_same(u, oracle(q, conf))


def test_modes(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setenv("PIPELINE_KERNELS", "torch")
    assert not kernels.applies(cpu, 1 << 40)  # loaded, but switched off
    assert kernels.prepare(1 << 40) is None
    monkeypatch.setenv("PIPELINE_KERNELS", "auto")
    assert kernels.applies(cpu, kernels.MIN_WORK) and not kernels.applies(cpu, kernels.MIN_WORK - 1)
    assert not kernels.applies(torch.device("meta"), 1 << 40)  # never off the CPU
    monkeypatch.setenv("PIPELINE_KERNELS", "fast")
    with pytest.raises(PipelineError, match="PIPELINE_KERNELS='fast'"):
        kernels.mode()


def _fresh(mode: str, facts: int) -> str:
    code = (
        "from pipeline.engine import kernels\n"
        f"t = kernels.prepare({facts})\n"
        "t is None or t.join()\n"
        "import sys\n"
        "print(kernels._state.get('kernel') is not None, 'numba' in sys.modules)\n"
    )
    return child(code, PIPELINE_KERNELS=mode)


def test_auto_loads_numba_for_large_exports_only():
    """A fresh process: a small export (PPI5k's size) never imports numba; a large one loads the compiled
    form in the background; mode numba loads it whatever the size; mode torch never."""
    assert _fresh("auto", 618_930) == "False False"
    assert _fresh("auto", 84_123_328) == "True True"
    assert _fresh("numba", 10) == "True True"
    assert _fresh("torch", 84_123_328) == "False False"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps(), st.integers(2, 4))
def test_entries_cut_across_threads_give_the_same_values(step, threads):
    state, betas, src, dst, cc = step
    want = torch_form(state, betas, src, dst, cc, wide=False)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with mock.patch.object(kernels, "SPLIT_WORK", 1):  # every step cut in up to `threads` parts
            got = kernels.stream_max(state, betas, src, dst, cc)
    finally:
        torch.set_num_threads(before)
    assert same(got, want)


_CHECK = """
import torch
from pipeline.engine import kernels
import pipeline.engine.maxplus as mp
assert kernels.load()
g = torch.Generator().manual_seed(1)
state = torch.rand(3, 50, generator=g)
src = torch.randint(0, 50, (4000,), generator=g, dtype=torch.int32)
dst = torch.sort(torch.randint(0, 50, (4000,), generator=g, dtype=torch.int32)).values
cc, betas = torch.rand(2, 4000, generator=g), [torch.rand(3, generator=g), torch.rand(3, generator=g)]
got = kernels.stream_max(state, betas, src, dst, cc)
kernels.MIN_WORK = 1 << 62
assert torch.equal(got, mp._stream(state, slice(None), betas, src, dst, cc))
print("same")
"""


def test_a_damaged_numba_cache_is_never_believed(tmp_path):
    """numba reads its disk cache with pickle, unchecked: a flipped byte or a truncated file there must
    mean a fresh compilation (and a cache written again for the next process), not a traceback."""

    def run() -> str:
        return child(_CHECK, NUMBA_CACHE_DIR=str(tmp_path), PIPELINE_KERNELS="numba")

    assert run() == "same"  # compiles and saves
    data = sorted(tmp_path.rglob("*.nbc"))
    assert data
    for p in data:
        raw = bytearray(p.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        p.write_bytes(bytes(raw[: len(raw) - 64]))
    assert run() == "same"  # the damaged files: compiled afresh, the index emptied
    assert run() == "same"  # and written again
    assert sorted(tmp_path.rglob("*.nbc"))


def test_one_flipped_bit_in_numba_machine_code_means_a_fresh_compilation(tmp_path):
    """numba unpickles its cache unchecked: one flipped bit in a data file's machine code was loaded as
    is, and some flips aborted the process inside LLVM. Each file is now sealed with a CRC-32
    (pipeline/engine/_numba_cache.py), so the damaged file is never read: compiled afresh, written again."""
    from pipeline.engine._numba_cache import MAGIC, _open

    def run() -> str:
        return child(_CHECK, NUMBA_CACHE_DIR=str(tmp_path), PIPELINE_KERNELS="numba")

    assert run() == "same"
    (data,) = [p for p in tmp_path.rglob("*stream-*.nbc")]
    sealed = data.read_bytes()
    assert sealed.startswith(MAGIC) and _open(sealed) is not None
    for pos in (len(sealed) // 3, 2 * len(sealed) // 3, len(sealed) - 5):  # inside the machine code
        raw = bytearray(sealed)
        raw[pos] ^= 0x10
        data.write_bytes(bytes(raw))
        assert run() == "same"
        again = data.read_bytes()
        assert again != bytes(raw) and _open(again) is not None  # rewritten, sealed


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 60), unique=True),
    st.lists(st.integers(0, 60), unique=True),
    st.sampled_from([torch.int32, torch.int64]),
)
def test_compiled_merge_equals_the_numpy_merge(a, b, dtype):
    """adjacency.shared_keys on two runs: the compiled two-pointer pass gives the numpy merge's arrays."""
    from pipeline.engine import adjacency

    runs = [torch.tensor(sorted(x), dtype=dtype) for x in (a, b)]
    with compiled(0):
        got, where = adjacency.shared_keys(runs)
    with compiled(1 << 62):
        want, want_where = adjacency.shared_keys(runs)
    assert got.dtype == want.dtype == dtype
    assert torch.equal(got, want) and got.tolist() == sorted(set(a) & set(b))
    assert all(torch.equal(x, y) and x.dtype == torch.int64 for x, y in zip(where, want_where, strict=True))


_FORK = """
import os
import torch
from pipeline.engine import kernels
assert kernels.prepare(84_123_328) is not None  # the load runs in a thread; fork at once
pid = os.fork()
if pid == 0:  # the child: the fork waited for the load, so the code is here and no loader thread is
    ok = kernels.ready() and kernels.stream_max(torch.zeros(1, 3), [torch.ones(1)], torch.tensor([0]),
                                                torch.tensor([2]), torch.tensor([[0.5]])).tolist() == [[float("-inf"), float("-inf"), 0.5]]
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), kernels.ready())
"""


def test_a_fork_during_the_background_load_waits_for_it():
    assert child(_FORK, timeout=120, PIPELINE_KERNELS="auto") == "0 True"


_RENT = """
import time, torch
from pipeline.engine import kernels
slow = kernels.load
def load():
    time.sleep(1.0)  # a load still under way when the steps come
    return slow()
kernels.load = load
cpu = torch.device("cpu")
kernels.prepare(kernels.KERNEL_FACTS)
small = [kernels.applies(cpu, kernels.MIN_WORK) for _ in range(3)]  # rent: the torch form, no wait
assert "kernel" not in kernels._state, "the load ended before the steps (test too slow to mean anything)"
t = time.perf_counter()
big = kernels.applies(cpu, kernels.WAIT_AFTER)  # the rent reaches the load's cost: this step waits
print(small, big, time.perf_counter() - t > 0.3)
"""


def test_steps_rent_the_torch_form_while_loading_then_wait():
    """Ski rental (mode auto, a large export, the load under way): steps run the torch form at once until
    their work adds up to WAIT_AFTER entry-rows; the step that reaches it waits for the load and runs
    compiled. So a single query never waits and a large batch loses at most about the load's cost."""
    assert child(_RENT, timeout=120, PIPELINE_KERNELS="auto") == "[False, False, False] True True"


_EXPECT = """
import time, torch
from pipeline.engine import kernels
slow = kernels.load
def load():
    time.sleep(1.0)  # a load still under way when the batch chooses its path
    return slow()
kernels.load = load
cpu = torch.device("cpu")
kernels.prepare(kernels.KERNEL_FACTS)
kernels.expect(cpu, kernels.MIN_WORK)  # streams that would rent the torch form: no wait
small = ("kernel" in kernels._state, kernels.rows_cost(cpu, 8, kernels.MIN_WORK))
t = time.perf_counter()
kernels.expect(cpu, kernels.WAIT_AFTER)  # streams that would wait for the load: wait now
waited = time.perf_counter() - t > 0.3
print(small, waited, kernels.ready(), kernels.rows_cost(cpu, 8, kernels.MIN_WORK), kernels._state.get("rented", 0))
"""


def test_a_path_choice_waits_for_the_load_its_streams_would_wait_for():
    """kernels.expect (maxplus._floor_pays' first step): while the compiled form loads in the background,
    streams adding up to WAIT_AFTER entry-rows would wait for it and run compiled, so the choice between
    paths waits first and prices them with the compiled form (rows_cost: 0.6 for 8 rows, not 8). Fewer
    entry-rows neither wait nor rent (the streams rent what they run)."""
    assert child(_EXPECT, timeout=120, PIPELINE_KERNELS="auto") == "(False, 8.0) True True 0.6 0"


_MISCOMPILED = """
import numba, torch
from pipeline.engine import kernels
import pipeline.engine.maxplus as mp

@numba.njit
def wrong(st, src, dst, cc, beta, out):  # what a flipped byte in cached machine code could compute
    for i in range(src.shape[0]):
        for b in range(out.shape[1]):
            out[dst[i], b] = max(out[dst[i], b], st[src[i], b] + beta[0, b] * cc[0, i] + 1e-3)

kernels._compile = lambda: wrong
print(kernels.load(), kernels.applies(torch.device("cpu"), 1 << 40))
"""


def test_a_kernel_that_fails_its_known_answers_is_never_used():
    """load() checks the compiled stream on small steps with known answers (1-9 rows, 1-3 atoms) and the
    merge on a known pair, recompiling once without numba's disk cache; code that still computes other
    values (a damaged cache's machine code, a miscompilation) leaves the torch form in charge."""
    assert child(_MISCOMPILED, PIPELINE_KERNELS="numba").split() == ["False", "False"]


def test_sparse_rows_by_hand():
    """kernels.rows_max on a step with answers by hand (kernels._known_rows: alpha, a negated atom)."""
    for dtype in (torch.int32, torch.int64):
        state, b, s, params, ptr, dst, conf = kernels._known_rows(dtype)
        out = torch.full(state.shape, NEG)
        kernels.rows_max(state, b, s, params, ptr, dst, conf, out)
        assert out.tolist() == [[2.5, 2.0, NEG], [2.5, NEG, 2.0]]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_compiled_sparse_rows_equal_the_torch_form(data):
    """maxplus._values' sparse rows of one atom, compiled (kernels.rows_max) and in torch (a ragged
    gather, AtomParams.value, a scatter-max): the same values bit for bit (NaN where NaN), on random
    graphs, states with -inf, alphas, negated atoms, zero, negative and infinite betas, both orientations."""
    from pipeline.engine.atoms import AtomParams, RelationMatrix

    n, r, facts = data.draw(graphs())
    adj = Adjacency.from_graph(graph_of(n, r, facts))
    rows = data.draw(st.integers(1, 6))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
    state = torch.tensor([0.0, 0.25, 0.5, 1.0, -0.5])[torch.randint(0, 5, (rows, n), generator=g)]
    state[torch.rand(rows, n, generator=g) < data.draw(st.sampled_from([0.2, 0.6, 0.95]))] = NEG
    pick = lambda pool: torch.tensor(pool)[torch.randint(0, len(pool), (rows,), generator=g)]  # noqa: E731
    params = AtomParams(
        torch.randint(0, r, (rows,), generator=g),
        pick([0.0, 0.0, 0.3, 0.5, 0.7093, 1.0]),
        pick([1.0, 0.5, 0.0, -0.0, -1.5, float("inf")]),
        torch.rand(rows, generator=g) < 0.4,
    )
    m = RelationMatrix(adj, params, from_head=data.draw(st.booleans()))
    b, s = torch.nonzero(torch.isfinite(state), as_tuple=True)
    want = torch.full((rows, n), NEG)
    pair, o, val = m.rows(b, s)
    cand = state.reshape(-1).index_select(0, (b * n + s).index_select(0, pair)) + val
    want.view(-1).scatter_reduce_(0, b[pair] * n + o, cand, reduce="amax", include_self=True)
    got = torch.full((rows, n), NEG)
    kernels.rows_max(state, b, s, m.params, m.ori.ptr, m.ori.dst, m.ori.conf, got)
    assert same(got, want)


def test_sparse_rows_of_a_multi_edge_by_hand():
    """kernels.rows_max_two on a step with answers by hand (kernels._known_rows_two)."""
    for dtype in (torch.int32, torch.int64):
        state, b, s, parts = kernels._known_rows_two(dtype)
        out = torch.full(state.shape, NEG)
        kernels.rows_max_two(state, b, s, parts, out)
        assert out.tolist() == [[3.5, 2.5, 1.75], [3.0, NEG, 4.0]]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_compiled_sparse_rows_of_a_multi_edge_equal_the_torch_form(data):
    """maxplus._values' sparse rows of a two-atom multi-edge whose rows need both facts, compiled
    (kernels.rows_max_two) and in torch (SumMatrix.finite_rows: the parts' rows, their finite values, the
    shared keys, the sums, a scatter-max): the same values bit for bit, on random graphs, states with
    -inf and NaN, alphas > 0, betas zero, negative and large, the two atoms in either orientation."""
    from pipeline.engine.atoms import AtomParams, RelationMatrix, SumMatrix

    n, r, facts = data.draw(graphs())
    adj = Adjacency.from_graph(graph_of(n, r, facts))
    rows = data.draw(st.integers(1, 6))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
    state = torch.tensor([0.0, 0.25, 0.5, 1.0, -0.5, 3e38])[torch.randint(0, 6, (rows, n), generator=g)]
    state[torch.rand(rows, n, generator=g) < data.draw(st.sampled_from([0.2, 0.6, 0.95]))] = NEG
    if data.draw(st.booleans()):
        state[0, 0] = float("nan")
    pick = lambda pool: torch.tensor(pool)[torch.randint(0, len(pool), (rows,), generator=g)]  # noqa: E731
    parts = [
        RelationMatrix(adj, AtomParams(torch.randint(0, r, (rows,), generator=g), pick([0.1, 0.3, 0.5, 0.7093, 1.0]),
                                       pick([1.0, 0.5, 0.0, -0.0, -1.5, 3e38]), torch.zeros(rows, dtype=torch.bool)),
                       from_head=data.draw(st.booleans()))
        for _ in range(2)
    ]
    m = SumMatrix(parts)
    b, s = torch.nonzero(torch.isfinite(state) | torch.isnan(state), as_tuple=True)
    assert bool(m.intersecting(b).all())
    want = torch.full((rows, n), NEG)
    pair, o, val = m.finite_rows(b, s)
    cand = state.reshape(-1).index_select(0, (b * n + s).index_select(0, pair)) + val
    want.view(-1).scatter_reduce_(0, b[pair] * n + o, cand, reduce="amax", include_self=True)
    got = torch.full((rows, n), NEG)
    kernels.rows_max_two(state, b, s, m.parts, got)
    assert same(got, want)


def test_one_query_starts_no_background_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pipeline query` answers one query and ends: no compiled form is loaded for it (a process ending
    while the loader compiles aborted in LLVM's teardown); the block leaves the rule as it found it."""
    monkeypatch.setenv("PIPELINE_KERNELS", "auto")
    monkeypatch.setattr(kernels, "_state", {})
    with kernels.one_query():
        assert kernels.prepare(kernels.KERNEL_FACTS * 4) is None
        assert "thread" not in kernels._state
    assert not kernels._state.get("one_query")


def test_the_padding_matches_the_compiled_vectors():
    """kernels pads rows to _LANES without importing numba; the compiled loop's vectors hold LANES rows."""
    from pipeline.engine import _stream_numba

    assert kernels._LANES == _stream_numba.LANES
    assert [kernels.padded_width(r) for r in (1, 8, 9, 40)] == [8, 8, 16, 40]


def test_a_query_set_loads_the_compiled_form_for_a_mid_sized_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mode auto: an export under KERNEL_FACTS facts loads the compiled form when it answers a query set of
    SET_QUERIES queries or more (PPI5k's 1.3M facts, 1,200 test queries: im and 2m 2-3x faster), never for a
    small export or a few queries, and on a GPU only by the export's size."""
    monkeypatch.setenv("PIPELINE_KERNELS", "auto")
    started: list = []

    class Thread:  # records the start instead of loading
        def __init__(self, target, args=(), name=None, daemon=None):
            started.append(args)

        def start(self) -> None:
            pass

    monkeypatch.setattr(kernels.threading, "Thread", Thread)
    mid = kernels.SET_FACTS
    for facts, queries, device in ((mid, kernels.SET_QUERIES - 1, "cpu"), (mid - 1, 10_000, "cpu"),
                                   (kernels.KERNEL_FACTS - 1, 10_000, "cuda")):
        monkeypatch.setattr(kernels, "_state", {})
        assert kernels.prepare(facts, device, queries) is None, (facts, queries, device)
    monkeypatch.setattr(kernels, "_state", {"fork_hook": True})
    assert kernels.prepare(mid, "cpu", kernels.SET_QUERIES) is not None and len(started) == 1


_QUICK = """
import sys, torch
from pipeline.engine import kernels
assert kernels.load()  # from numba's disk cache (the test before compiled and saved it)
from pipeline.engine import _stream_numba as k
print(type(k.stream._cache).__name__.startswith("Quick"), "numba.np.linalg" in sys.modules, kernels._trusted(k.stream))
"""


def test_the_compiled_form_loads_from_its_cache_without_numbas_registries():
    """Loading the compiled steps from numba's disk cache skips numba's refresh of every registry it can
    compile with (numba.np.linalg and the rest: 0.3-0.4 s of a 0.7 s load); the code loaded so still gives
    the known answers. A second process, so that the first compiled and saved the cache."""
    child(_QUICK, timeout=300)
    assert child(_QUICK, timeout=300) == "True False True"


@pytest.mark.slow
def test_the_first_compilation_says_so_on_stderr_once(tmp_path):
    """The first load after an install compiles for 10-30 s where a cached load takes well under a second:
    one line on stderr says so, with its seconds (never on stdout, which --json keeps to its document);
    the next process reads the cache and says nothing."""
    import re

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from pipeline.engine import kernels; assert kernels.load()"],
                              env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}, capture_output=True,
                              text=True, timeout=300)

    first = run()
    assert first.returncode == 0, first.stderr[-3000:]
    lines = [ln for ln in first.stderr.splitlines() if "compiling" in ln]
    assert len(lines) == 1 and re.fullmatch(r"compiling the engine's steps once \(\d+\.\d s; later runs read them "
                                            r"from numba's disk cache\)", lines[0]), first.stderr
    assert first.stdout == ""
    second = run()
    assert second.returncode == 0 and "compiling" not in second.stderr + second.stdout, second.stderr
