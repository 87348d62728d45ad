"""How many threads, processes and requests in flight one command may start, and how much memory it may
give the store: every count an option, an API keyword or an environment variable takes is bounded here,
tied to this machine, so no value makes one command exhaust the machine (``train-qe --threads 100000``
once started 32,212 threads, made no progress, and left no thread to any other process).

- threads and processes that compute (torch's threads, ``--threads``, the processes executor's and a
  local Ray cluster's ``--workers``, ``OMP_NUM_THREADS`` and its kin): at most :data:`CPU_FACTOR` per core
  this process may run on. Beyond a core each, a thread only waits for one; a few per core is still
  legitimate (a worker that waits on a file, a test of the scheduling on a small machine);
- threads that wait on the network (``llm-eval --concurrency``): at most :data:`IO_FACTOR` per core;
- the store's memory cap (``PIPELINE_STORE_MEMORY``): at most the machine's memory.

A value above its bound is refused in one line naming the option as the caller wrote it, the value and the
bound (never a silent clamp: a count the user chose and did not get would be a silent result).
"""

from __future__ import annotations

import os
from typing import Any

CPU_FACTOR = 4  # threads or processes that compute, per core
IO_FACTOR = 32  # threads that wait on the network, per core
# the environment variables of the libraries underneath that set how many threads they start
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it, else every core)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def compute_bound() -> int:
    """The most threads or processes that compute one command may start: :data:`CPU_FACTOR` per core."""
    return CPU_FACTOR * cores()


def io_bound() -> int:
    """The most threads that wait on the network one command may start: :data:`IO_FACTOR` per core."""
    return IO_FACTOR * cores()


def memory_bytes() -> int:
    """The machine's physical memory in bytes (8 GiB where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def bound(kind: str) -> int:
    """The bound of ``kind``: ``compute`` (:func:`compute_bound`) or ``io`` (:func:`io_bound`)."""
    return compute_bound() if kind == "compute" else io_bound()


def why(kind: str) -> str:
    """Where the bound of ``kind`` comes from, for a message."""
    n = cores()
    per = CPU_FACTOR if kind == "compute" else IO_FACTOR
    what = "beyond a core each, they only wait for one another" if kind == "compute" else "requests in flight"
    return f"{per} per core x {n} core{'s' if n != 1 else ''} this process may run on; {what}"


def check_count(name: str, value: Any, kind: str | None = "compute", shown: str | None = None) -> int:
    """``value`` (threads, processes or requests of option ``name``, its Python keyword) as an int from 1
    up to the bound of ``kind`` (``compute``, ``io``; None: no bound here, the caller bounds it where it is
    known, e.g. a Ray cluster's CPUs); one PipelineError naming the option as the caller's front end spells
    it (``shown`` instead, for an environment variable) otherwise.

    >>> check_count("threads", 2)
    2
    >>> check_count("threads", 10**9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pipeline.core.errors.PipelineError: threads=1000000000: at most ... on this machine (4 per core x ...)
    """
    from pipeline.core.checks import as_int, number_kind
    from pipeline.core.errors import PipelineError, option

    label = shown if shown is not None else option(name, value)
    number = as_int(value)
    if number is None:
        raise PipelineError(f"{label}: expected an integer, not {number_kind(value)}")
    if number < 1:
        raise PipelineError(f"{label}: must be at least 1")
    if kind is not None and number > bound(kind):
        raise PipelineError(f"{label}: at most {bound(kind)} on this machine ({why(kind)})")
    return number


def check_thread_variables() -> None:
    """``OMP_NUM_THREADS`` and its kin (:data:`THREAD_VARIABLES`) at most the compute bound: torch, numpy's
    BLAS and numba start that many threads at their first parallel step. Each level of a nested OpenMP
    list (``4,2``) is checked, from 1; a value that is no integer is left to its library."""
    for name in THREAD_VARIABLES:
        raw = os.environ.get(name)
        if raw is None or not raw.strip():
            continue
        for part in raw.split(","):
            try:
                number = int(part.strip())
            except ValueError:
                continue
            if not 1 <= number <= compute_bound():
                check_count(name, number, "compute", shown=f"{name}={raw}")
