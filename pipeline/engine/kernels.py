"""Compiled loops for the engine's hottest steps, value for value the torch forms they replace:

- the stream of a relation's stored entries (``maxplus._stream``):
  ``out[o_i, b] = max(out[o_i, b], fma(cc[P-1, i], beta[P-1, b], ... fma(cc[0, i], beta[0, b], st[s_i, b])))``
  for every entry i = (s_i, o_i) and batch row b, each entry read once for up to 32 rows
  (:mod:`._stream_numba`; :func:`rows_cost` tells the engine what a stream of so many rows costs);
- the sparse rows of one atom (:func:`rows_max`, ``maxplus._values``) and of a two-atom multi-edge
  (:func:`rows_max_two`);
- the two-pointer merge of a relation pair's shared entries (``shared_two``).

Exact: fused multiply-adds in atom order (the rounding of torch's ``addcmul_`` on a CPU with FMA) and a
NaN-keeping max (tests/engine/test_kernels.py checks both forms on random inputs). ``PIPELINE_KERNELS``
chooses: ``auto`` (default: loaded in a background thread for exports of at least :data:`KERNEL_FACTS`
facts; a fork waits for it), ``numba`` (at the first step of :data:`MIN_WORK` entry-rows), ``torch``
(never). On a CUDA GPU the same step is one fused triton kernel (:mod:`._stream_triton`) under the same
rules. Where numba or triton cannot be imported the torch form runs, with the same values. Why each
threshold is where it is, and the measured costs: docs/studies/fresh-answer-cache-and-workers.md.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

MIN_WORK = 1 << 17  # entries x rows from which a step runs compiled (~0.5 ms either way; a call costs ~0.2 ms)
SPLIT_WORK = 1 << 21  # entries x rows per thread from which a step's entries are cut across threads
KERNEL_FACTS = 1 << 23  # exports with at least this many facts load the compiled form (mode auto)
# ... and on the CPU so do exports from SET_FACTS facts answering a query set of SET_QUERIES queries or
# more: PPI5k's 1.3M-fact export answers its 100 im test queries in 0.03-0.04 s compiled against
# 0.09-0.13 s in the torch form, and the load (0.2-0.35 s of CPU from numba's disk cache) runs beside the
# query set's read and the method's build (docs/studies/where-a-fresh-process-spends-its-time.md)
SET_FACTS = 1 << 19
SET_QUERIES = 256
WAIT_AFTER = 1 << 27  # entry-rows run in the torch form while loading (~0.4 s) before a step waits (CPU)
GPU_MIN_WORK = 1 << 16  # entries x rows from which a CUDA step runs the fused kernel (triton)
MODES = ("auto", "numba", "torch")  # = pipeline.core.config.KERNEL_MODES
_LANES = 8  # _stream_numba.LANES (kept here: importing that module imports numba)
_state: dict[str, Any] = {}  # "kernel": the compiled function, or None where numba is unavailable
_lock = threading.Lock()


def mode() -> str:
    """PIPELINE_KERNELS (auto, numba or torch; default auto). PipelineError on another value."""
    from pipeline.core.config import kernel_mode

    return kernel_mode()


def applies(device: torch.device, work: int) -> bool:
    """Whether a step of ``work`` entries x rows on ``device`` runs compiled: on the CPU, from MIN_WORK
    on, once the compiled form is loaded (mode auto: by :func:`prepare` for a large export; mode numba:
    here, at the first such step); on a CUDA GPU, from GPU_MIN_WORK on, once the fused kernel is loaded
    (the same rules, with triton: :func:`load_gpu`)."""
    if device.type == "cuda":
        if work < GPU_MIN_WORK or mode() == "torch":
            return False
        if "gpu" in _state:
            return _state["gpu"] is not None
        return mode() == "numba" and load_gpu()
    if device.type != "cpu" or work < MIN_WORK:
        return False
    if "kernel" in _state:
        return _state["kernel"] is not None and mode() != "torch"
    if mode() == "numba":
        return load()
    thread = _state.get("thread")
    if thread is None:
        return False
    # Loading in the background (mode auto). Ski rental: steps run the torch form until their work adds
    # up to about what the load costs, then the next one waits for the load. A single query never
    # waits; a batch that would spend seconds in the torch form (100 CN15k 2m queries in a fresh
    # process: 0.7 s of torch-form steps while numba loaded) loses at most that much.
    _state["rented"] = _state.get("rented", 0) + work
    if _state["rented"] < WAIT_AFTER:
        return False
    thread.join()
    return _state.get("kernel") is not None and mode() != "torch"


def expect(device: torch.device, work: int) -> None:
    """A step about to choose its path (maxplus._floor_pays) by what the streams would cost, streams that
    add up to ``work`` entry-rows (every row it could stream): where the compiled form is still loading in
    the background (mode auto) and that work would bring the rent to WAIT_AFTER (those streams would wait
    for the load, :func:`applies`), wait for the load now, so that the choice is priced with the form that
    will run (:func:`rows_cost`). Otherwise nothing (no rent is counted: the streams rent what they run).
    Priced with the torch form while the load ran, CN15k's first im batch (100 test queries) took the
    floor path for 0.3-0.4 s, just before its streams waited for the load anyway and ran compiled. Paths
    only, never values: every path gives the same values."""
    if device.type != "cpu" or work < MIN_WORK or "kernel" in _state or mode() == "torch":
        return
    thread = _state.get("thread")
    if thread is not None and _state.get("rented", 0) + work >= WAIT_AFTER:
        thread.join()


def prepare(n_facts: int, device: str | torch.device = "cpu", queries: int = 0) -> threading.Thread | None:
    """For an export of n_facts facts being indexed on device: in mode auto from KERNEL_FACTS facts on, or
    on the CPU from SET_FACTS facts on for a query set of ``queries`` >= SET_QUERIES queries (mode numba:
    always), start loading the compiled form for that device in a background thread (CPU:
    numba's import and its disk cache, ~0.8 s of CPU; CUDA: triton's import and the fused kernel's
    compiled shapes, ~0.6 s from triton's cache) and return at once. Until it is loaded every step runs
    the torch form (the same values), so a single query does not wait for it. A fork of this process
    first waits for it (:func:`settle`, registered with os.register_at_fork). None where nothing is to
    load."""
    m = mode()
    gpu = torch.device(device).type == "cuda"
    done, key = ("gpu", "gpu_thread") if gpu else ("kernel", "thread")
    large = n_facts >= KERNEL_FACTS or (not gpu and queries >= SET_QUERIES and n_facts >= SET_FACTS)
    if done in _state or key in _state or m == "torch" or (m == "auto" and not large):
        return None
    if m == "auto" and _state.get("one_query"):
        return None
    thread = threading.Thread(target=load_gpu if gpu else load, name="pipeline-kernels", daemon=True)
    _state[key] = thread
    if hasattr(os, "register_at_fork") and not _state.get("fork_hook"):  # a fork waits for the loads first
        os.register_at_fork(before=settle)
        # a process that ends while the loader compiles (LLVM's threads and statics torn down under it)
        # aborted with "terminate called without an active exception": its end waits for the load too
        atexit.register(settle)
        _state["fork_hook"] = True
    thread.start()
    return thread


def loading() -> bool:
    """Whether a load started by :func:`prepare` is still under way (the answering stage then runs its
    light batches first, beside it)."""
    return any(
        _state.get(key) is not None and _state[key].is_alive() and done not in _state
        for key, done in (("thread", "kernel"), ("gpu_thread", "gpu"))
    )


@contextlib.contextmanager
def one_query() -> Iterator[None]:
    """Within the block the process answers one query and then ends (``pipeline query``): :func:`prepare`
    starts no load in mode auto. A single query never waits for the compiled form (its steps run the
    torch form while it loads), so loading it would only cost a core ~0.8 s and hold the process' end
    (:func:`settle`)."""
    before = _state.get("one_query")
    _state["one_query"] = True
    try:
        yield
    finally:
        _state["one_query"] = before


def settle() -> None:
    """Wait for a load started by :func:`prepare`: call before forking, so that no thread is alive in the
    fork (a child copied while the loader holds the import or numba's compile lock would hang) and the
    forked workers inherit the loaded code."""
    for key in ("thread", "gpu_thread"):
        thread = _state.get(key)
        if thread is not None:
            thread.join()


def load() -> bool:
    """Load the compiled form now (import numba, compile or read its disk cache, run it once on a tiny
    input); False where numba cannot be imported or cannot compile here (the torch form runs). Idempotent."""
    with _lock:
        if "kernel" not in _state:
            started = time.monotonic()
            try:
                kernel = _compile()
                one = np.zeros((1, 1), dtype=np.float32)
                idx = np.zeros(1, dtype=np.int32)
                _dispatch(kernel, (one, idx, idx, one, one, one.copy()))  # the engine's dtypes: their code
                if not _trusted(kernel):
                    # code read from numba's disk cache that computes wrong values (a flipped byte in the
                    # machine code: numba checks none): compiled afresh (recompile() empties the cache)
                    from pipeline.engine._stream_numba import merge_two, rows_max, rows_max_two

                    kernel.recompile()
                    merge_two.recompile()
                    rows_max.recompile()
                    rows_max_two.recompile()
                    if not _trusted(kernel):  # a miscompilation here: the torch form
                        raise RuntimeError("the compiled stream fails its known answers")
                _state["kernel"] = kernel
            except Exception:  # numba missing, incompatible with this numpy, unable to compile here:
                _state["kernel"] = None  # the torch form, same values (an optimisation never fails a command)
            else:
                if compiled_now():
                    # the first load after an install (or a change of numba, of the code, of the CPU)
                    # compiles for 10-30 s where a cached load takes 0.2-0.35 s: say so, once
                    from pipeline.core.progress import note

                    note(f"compiling the engine's steps once ({time.monotonic() - started:.1f} s; later runs "
                         "read them from numba's disk cache)")
        return _state["kernel"] is not None


def compiled_now() -> bool:
    """Whether this process compiled any of the engine's numba steps (a miss of numba's disk cache),
    rather than reading them all from the cache."""
    from pipeline.engine._stream_numba import merge_two, rows_max, rows_max_two, stream

    return any(d.stats.cache_misses for d in (stream, merge_two, rows_max, rows_max_two))


def load_gpu() -> bool:
    """Load the fused CUDA kernel now: import triton, compile its three shapes for one and two atoms
    (~1 s each the first time on a machine, then read from triton's disk cache) and check each on a
    step with known answers. False where triton is missing, cannot compile for this GPU, or computes
    other values (the torch form runs, the same values). Idempotent."""
    with _lock:
        if "gpu" not in _state:
            try:
                from pipeline.engine._stream_triton import stream_max as gpu_stream

                # the kernel's three shapes (1, 2-8, 9+ rows), one and two atoms: compiled now (or read from
                # triton's disk cache, whose files nothing checks) and checked against known answers
                for rows, atoms in ((1, 1), (1, 2), (2, 1), (2, 2), (9, 1), (9, 2)):
                    state, betas, src, dst, cc = _known_step(rows, atoms)
                    got = gpu_stream(
                        state.cuda(), [b.cuda() for b in betas], src.cuda(), dst.cuda(), cc.cuda()
                    )
                    if not _same(got.cpu(), torch_stream(state, betas, src, dst, cc)):
                        raise RuntimeError("the fused kernel fails its known answers")
                _state["gpu"] = gpu_stream
            except Exception:  # triton missing or unable to compile here: the torch form, same values
                _state["gpu"] = None
        return _state["gpu"] is not None


def _known_step(
    rows: int, atoms: int
) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """A small step with known answers (a fixed seed): -inf states, negative and zero betas, ties, a run
    of entries per column (sorted by column, as the engine's), int32 ids."""
    g = torch.Generator().manual_seed(1000 * rows + atoms)
    n, f = 12, 60
    levels = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])
    state = levels[torch.randint(0, 5, (rows, n), generator=g)] * 2 - 1
    state[torch.rand(rows, n, generator=g) < 0.25] = float("-inf")
    betas = [
        torch.tensor([-1.0, 0.0, 0.5, 1.5])[torch.randint(0, 4, (rows,), generator=g)] for _ in range(atoms)
    ]
    src = torch.randint(0, n, (f,), generator=g, dtype=torch.int32)
    dst = torch.sort(torch.randint(0, n, (f,), generator=g, dtype=torch.int32)).values
    cc = levels[torch.randint(0, 5, (atoms, f), generator=g)]
    return state, betas, src, dst, cc


def torch_stream(
    state: torch.Tensor, betas: list[torch.Tensor], src: torch.Tensor, dst: torch.Tensor, cc: torch.Tensor
) -> torch.Tensor:
    """(B, N): :func:`stream_max`'s values in torch's own operations, on any device: the torch form of
    maxplus._stream for few rows, and the reference of the compiled forms' known answers. index_select,
    not state[:, src]: the same gather ~4x faster (advanced indexing on dim 1)."""
    g = state.index_select(1, src)
    for beta, w in zip(betas, cc, strict=True):
        g.addcmul_(beta[:, None], w[None, :])
    out = torch.full(state.shape, float("-inf"), dtype=torch.float32, device=state.device)
    return out.scatter_reduce_(1, dst.long().expand(state.shape[0], -1), g, reduce="amax", include_self=True)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def _trusted(kernel: Any) -> bool:
    """Whether the compiled stream (through :func:`_cpu_stream`: one to five vectors of rows, the last
    pass over a run taking one to four of them; 1-3 atoms; the engine's int32 ids) and the compiled
    merge (int32 and int64 keys) give the known answers."""
    from pipeline.engine._stream_numba import merge_two

    for rows in (1, 3, 9, 17, 25, 40):
        for atoms in (1, 2, 3):
            step = _known_step(rows, atoms)
            if not _same(_cpu_stream(kernel, *step), torch_stream(*step)):
                return False
    for dtype in (np.int32, np.int64):  # the key types the engine merges (each its own compiled code)
        a = np.array([1, 3, 4, 8, 9, 15], dtype=dtype)
        b = np.array([0, 3, 8, 9, 10, 15, 16], dtype=dtype)
        pa, pb = np.zeros(6, dtype=np.int64), np.zeros(6, dtype=np.int64)
        k = _dispatch(merge_two, (a, b, pa, pb))  # its disk cache may be damaged too
        if not (k == 4 and pa[:k].tolist() == [1, 3, 4, 5] and pb[:k].tolist() == [1, 2, 3, 5]):
            return False
    for dtype in (torch.int32, torch.int64):  # the sparse rows, the index's id types
        state, b, s, params, ptr, dst, conf = _known_rows(dtype)
        out = torch.full(state.shape, float("-inf"))
        rows_max(state, b, s, params, ptr, dst, conf, out)
        if out.tolist() != [[2.5, 2.0, float("-inf")], [2.5, float("-inf"), 2.0]]:
            return False
        state, b, s, parts = _known_rows_two(dtype)
        out = torch.full(state.shape, float("-inf"))
        rows_max_two(state, b, s, parts, out)
        if out.tolist() != [[3.5, 2.5, 1.75], [3.0, float("-inf"), 4.0]]:
            return False
    return True


def _known_rows_two(dtype: torch.dtype) -> tuple:
    """A two-atom multi-edge step with answers by hand, on the facts of :func:`_known_rows` read by both
    atoms (alphas 0.1 and 0.2, betas 2 and 1 in row 0, 1 and 1 in row 1). Row 0: (s 0: o 1 at 0.5 -> 1 +
    (1 + 0.5), o 2 at 0.25 -> 1 + (0.5 + 0.25); s 2: o 0 at 1.0 -> 0.5 + (2 + 1)). Row 1: (s 0: o 2 at
    0.75 -> 0 + 1.5; s 1: o 0 at 0.5 -> 2 + 1, o 2 at 1.0 -> 2 + 2)."""
    from types import SimpleNamespace

    state, b, s, _, ptr, dst, conf = _known_rows(dtype)
    ori = SimpleNamespace(ptr=ptr, dst=dst, conf=conf)
    parts = [
        SimpleNamespace(ori=ori, params=SimpleNamespace(rel=torch.tensor([0, 1]), alpha=torch.tensor([a, a]),
                                                       beta=torch.tensor(w), neg=torch.tensor([False, False])))
        for a, w in ((0.1, [2.0, 1.0]), (0.2, [1.0, 1.0]))
    ]
    return state, b, s, parts


def _known_rows(dtype: torch.dtype) -> tuple:
    """A sparse step with answers by hand. Row 0: alpha 0.3, beta 2; x = (1, -inf, 0.5); its facts
    (s 0: o 1 at 0.5 -> 1 + 1, o 2 at 0.25 < alpha -> -inf; s 2: o 0 at 1.0 -> 0.5 + 2). Row 1: negated,
    alpha 0, beta 1; x = (0, 2, -inf); (s 0: o 2 at 0.75 -> 0 + 0.25; s 1: o 0 at 0.5 -> 2 + 0.5, o 2 at
    1.0 -> 2 + 0)."""
    from types import SimpleNamespace

    inf = float("inf")
    state = torch.tensor([[1.0, -inf, 0.5], [0.0, 2.0, -inf]])
    b, s = torch.tensor([0, 0, 1, 1]), torch.tensor([0, 2, 0, 1])
    params = SimpleNamespace(
        rel=torch.tensor([0, 1]), alpha=torch.tensor([0.3, 0.0]), beta=torch.tensor([2.0, 1.0]),
        neg=torch.tensor([False, True]),
    )
    ptr = torch.tensor([0, 2, 2, 3, 4, 6, 6])
    dst = torch.tensor([1, 2, 0, 2, 0, 2], dtype=dtype)
    conf = torch.tensor([0.5, 0.25, 1.0, 0.75, 0.5, 1.0])
    return state, b, s, params, ptr, dst, conf


def stream_max(
    state: torch.Tensor, betas: list[torch.Tensor], src: torch.Tensor, dst: torch.Tensor, cc: torch.Tensor
) -> torch.Tensor:
    """(B, N) contiguous: for each row b of state (B, N), max over the entries i of state[b, src_i] +
    sum_p betas[p][b] * cc[p, i] at column dst_i (one fused multiply-add per atom, in order); -inf where
    no entry lands. Call only where :func:`applies` (else the torch form, maxplus._stream). Uses torch's
    thread count (one in each forked answering worker): the entries are cut in that many parts, each
    maxed into its own output by a thread of its own, then the outputs are maxed together. Threads are
    started and joined here, so none outlives the call (the workers fork later). On a CUDA GPU: one
    fused triton kernel (pipeline/engine/_stream_triton.py), the same values."""
    if state.device.type == "cuda":
        return _state["gpu"](state, betas, src, dst, cc)
    return _cpu_stream(_state["kernel"], state, betas, src, dst, cc)


def _cpu_stream(
    kernel: Any,
    state: torch.Tensor,
    betas: list[torch.Tensor],
    src: torch.Tensor,
    dst: torch.Tensor,
    cc: torch.Tensor,
) -> torch.Tensor:
    """:func:`stream_max` on the CPU with the compiled ``kernel``."""
    bsz, n = state.shape
    width = padded_width(bsz)
    st_t = torch.empty((n, width), dtype=torch.float32)  # (N, W): an entry reads one run of W floats
    st_t[:, :bsz] = state.t()
    st_t[:, bsz:] = 0  # the padding rows' state
    st = st_t.numpy()
    beta_t = torch.zeros((len(betas), width), dtype=torch.float32)  # (P, W): padding columns' betas 0
    beta_t[:, :bsz] = torch.stack([b.to(torch.float32) for b in betas])
    beta = beta_t.numpy()
    conf, s, o = cc.detach().to(torch.float32).contiguous().numpy(), _np(src), _np(dst)
    f = s.shape[0]
    parts = max(1, min(torch.get_num_threads(), f * bsz // max(SPLIT_WORK, 1)))
    outs = [torch.full((n, width), float("-inf"), dtype=torch.float32) for _ in range(parts)]
    cuts = [f * k // parts for k in range(parts + 1)]
    jobs = [
        (st, s[a:b], o[a:b], conf[:, a:b], beta, out.numpy())
        for a, b, out in zip(cuts[:-1], cuts[1:], outs, strict=True)
    ]
    first = jobs[0]
    _dispatch(kernel, (st, s[:0], o[:0], conf[:, :0], beta, first[5]))  # this call's types, in this thread
    if parts == 1:
        kernel(*first)
    else:  # the entries cut in parts, one thread and one output each (the kernel releases the GIL); the
        # pool's threads are joined on leaving, and a part's error is raised (never a part left out)
        with ThreadPoolExecutor(parts) as pool:
            list(pool.map(lambda job: kernel(*job), jobs))
        for other in outs[1:]:
            torch.maximum(outs[0], other, out=outs[0])  # amax's rule: a NaN wins
    return outs[0][:, :bsz].t().contiguous()


def rows_max(
    state: torch.Tensor,
    b: torch.Tensor,
    s: torch.Tensor,
    params: Any,
    ptr: torch.Tensor,
    dst: torch.Tensor,
    conf: torch.Tensor,
    out: torch.Tensor,
) -> None:
    """The sparse rows of a max-plus step of one atom, compiled: out[b, o] = max(out[b, o], state[b, s] +
    value(c)) over the finite state entries (b[i], s[i]) and the facts (o, c) of their rows (ptr, dst,
    conf: one orientation of the index; params: the atom's AtomParams), value as AtomParams.value
    computes it. The values of maxplus._values' torch form (a ragged gather, the values, a scatter-max)
    without its temporaries. CPU tensors; call only where :func:`ready`."""
    from pipeline.engine._stream_numba import rows_max as kernel

    st = state.detach().contiguous()
    args = (
        st.numpy(),
        _np(b),
        _np(s),
        _np(params.rel),
        params.alpha.detach().to(torch.float32).contiguous().numpy(),
        params.beta.detach().to(torch.float32).contiguous().numpy(),
        params.neg.contiguous().numpy(),
        _np(ptr),
        _np(dst),
        conf.detach().to(torch.float32).contiguous().numpy(),
        st.shape[1],
        out.numpy(),
    )
    _dispatch(kernel, args)


def rows_max_two(state: torch.Tensor, b: torch.Tensor, s: torch.Tensor, parts: Any, out: torch.Tensor) -> None:
    """The sparse rows of a max-plus step of a two-atom multi-edge, compiled, for rows that need a fact of
    both atoms (``SumMatrix.intersecting``): out[b, o] = max(out[b, o], state[b, s] + (value_a + value_b))
    over the columns o stored in both atoms' rows (b[i], s[i]) with both values finite: the values of
    ``SumMatrix.finite_rows`` and the torch form's scatter-max, without their keys, merges and
    temporaries. parts: the two RelationMatrix. CPU tensors; call only where :func:`ready`."""
    from pipeline.engine._stream_numba import rows_max_two as kernel

    st = state.detach().contiguous()
    args: list[Any] = [st.numpy(), _np(b), _np(s)]
    for p in parts:
        args += [
            _np(p.params.rel),
            p.params.alpha.detach().to(torch.float32).contiguous().numpy(),
            p.params.beta.detach().to(torch.float32).contiguous().numpy(),
            p.params.neg.contiguous().numpy(),
            _np(p.ori.ptr),
            _np(p.ori.dst),
            p.ori.conf.detach().to(torch.float32).contiguous().numpy(),
        ]
    _dispatch(kernel, (*args, st.shape[1], out.numpy()))


def rows_cost(device: torch.device, rows: int, entries: int) -> float:
    """What streaming ``entries`` entries for ``rows`` rows costs, in the torch form's one-row streams
    (~3.3 ns per entry on one core): ``rows`` in the torch form (a gather and a scatter per row), and in
    the compiled form (loaded: :func:`ready`; from MIN_WORK entry-rows) ~0.6 per pass of up to four
    vectors of LANES rows, each vector after a pass's first adding a quarter (CN15k streams: 2.0, 2.5
    and 3.0 ns per entry for 8, 16 and 24 rows). For the engine's choice of path (maxplus._floor_pays),
    never its values."""
    if rows <= 0:
        return 0.0
    if device.type != "cpu" or rows * entries < MIN_WORK or not ready():  # never applies(): it rents
        return float(rows)
    vectors = -(-rows // _LANES)
    full, rest = divmod(vectors, 4)
    return 0.6 * (full * 1.75 + (1 + 0.25 * (rest - 1) if rest else 0.0))


def padded_width(rows: int) -> int:
    """The row count the compiled loop runs on for ``rows`` rows: a multiple of LANES (8), each block of
    8 rows one vector register (the padding rows have state 0 and betas 0; their results are dropped).
    One to eight rows cost the same per entry: on CN15k's 2m and 2p streams ~2 ns per entry, against
    2.1 (1 row), 3.3 (2) and 4.5 (4) for the loops over the rows it replaced (docs/studies/multi-edges-on-cn15k.md)."""
    return -(-max(rows, 1) // _LANES) * _LANES


def _dispatch(kernel: Any, args: tuple) -> Any:
    """Call the kernel on args of the types a step will pass (an empty step does nothing else), so that
    numba compiles or loads from its disk cache the code for those types here, in the calling thread.
    A damaged cache file (a flipped byte, a truncated write: numba reads it with pickle, unchecked; its
    files are sealed with CRC-32s here, pipeline/engine/_numba_cache.py, which turns most damage into
    a fresh compilation before this point) is never believed: numba's index for the kernel is emptied,
    so that the next process compiles and saves it again, and this process compiles it without the
    disk cache."""
    try:
        return kernel(*args)
    except Exception:
        from numba.core.caching import NullCache

        cache = getattr(kernel, "_cache", None)
        if cache is None or isinstance(cache, NullCache):
            raise
        try:
            cache.flush()
        except OSError:  # a read-only cache folder: this process still compiles afresh
            pass
        kernel._cache = NullCache()
        return kernel(*args)


def ready() -> bool:
    """Whether the compiled form is loaded and allowed (what :func:`applies` needs besides the size)."""
    return _state.get("kernel") is not None and mode() != "torch"


def shared_two(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The keys in both of two ascending, duplicate-free CPU arrays: (shared keys, position in a, position
    in b), int64 positions, ascending keys: what adjacency.shared_keys returns for two runs, by one
    two-pointer pass and no temporaries (its numpy form concatenates, sorts and compares 5-10M keys per
    CN15k relation pair: ~0.2 GB and 3x the time). Call only where :func:`ready`."""
    from pipeline.engine._stream_numba import merge_two

    na, nb = _np(a), _np(b)
    room = min(na.shape[0], nb.shape[0])
    pos_a, pos_b = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
    k = merge_two(na, nb, pos_a, pos_b)
    pa, pb = torch.from_numpy(pos_a[:k].copy()), torch.from_numpy(pos_b[:k].copy())
    return a.index_select(0, pa), pa, pb


def _np(x: torch.Tensor) -> Any:
    """x as a numpy array without a copy where its dtype is one the kernel takes (int32 or int64)."""
    return (x if x.dtype in (torch.int32, torch.int64) else x.long()).detach().numpy()


def _compile() -> Any:
    from pipeline.core.imports import import_whole

    import_whole("numba")  # a Ctrl-C during its first import would break numba for the whole process
    from pipeline.engine._stream_numba import stream  # imports numba: only here

    return stream
