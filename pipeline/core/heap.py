"""How this process' malloc treats the memory it frees (glibc; nothing elsewhere).

The engine allocates and frees tensors of a few MB per step (states, outputs, gathers). By default
glibc maps each large one afresh and unmaps it on free, or trims the heap's top, so every step pays the
kernel's page faults and zeroing again. :func:`keep_freed_heap` keeps that memory for the next
allocations; :func:`release_heap` hands it back at a moment of the caller's choosing (a worker, after
each task)."""

from __future__ import annotations

import ctypes
from typing import Any

# glibc's malloc (mallopt parameters): allocations up to 32 MiB from the heap, never returned by mmap
# /munmap one by one; freed memory at the heap's top kept up to 1 GiB (and 64 MiB more asked each time)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_HEAP = ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 64 << 20))


def keep_freed_heap() -> bool:
    """Make this process' malloc keep the memory it frees for its next allocations (glibc only; False
    elsewhere). The engine allocates and frees tensors of a few MB per step (states, outputs, gathers);
    by default glibc maps each large one afresh and unmaps it on free, or trims the heap's top, so every
    step pays the kernel's page faults and zeroing again: a forked worker spent 0.1-0.3 s of system time
    per 50 CN15k 2m queries. Kept, the heap stays at its peak until :func:`release_heap` (the answering
    workers call it after each task; `pipeline answer` answering in its own process keeps it to the
    end). Process-wide and permanent: the library never calls it in a notebook's process."""
    mallopt = _libc("mallopt")
    if mallopt is None:
        return False
    return all(mallopt(param, value) == 1 for param, value in _HEAP)


def release_heap() -> None:
    """Hand the freed heap back to the system now (glibc's malloc_trim; nothing elsewhere): a worker
    does it after each task, so that what :func:`keep_freed_heap` keeps lasts one batch, and the
    workers' memory together stays what it was (CN15k's test set, 2 workers: peak 3.5 GiB warm)."""
    trim = _libc("malloc_trim")
    if trim is not None:
        trim(0)


def _process_symbols() -> Any:
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):
        return None


# The process' own symbols (dlopen of NULL), opened when this module is imported, i.e. in the parent
# before any worker forks: no search for the C library's file (ctypes.util.find_library spawns ldconfig,
# which hung a forked pool worker), and no dlopen in a forked child of a threaded parent
_PROCESS = _process_symbols()


def _libc(symbol: str) -> Any:
    """A function of the C library this process runs on, or None where it has none (not glibc)."""
    return getattr(_PROCESS, symbol, None) if _PROCESS is not None else None
