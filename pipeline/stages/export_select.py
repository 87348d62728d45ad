"""Which scored (h, t) pairs of one relation an export keeps: a threshold, and optionally a per-head top-k.

With ``top_k = K`` a head keeps its K best-scored tails that also pass the threshold, so an export holds at
most |R| x |E| x K facts whatever the model; ties at the K-th score go to the lower tail id, so the choice is
exact and deterministic (no dependence on torch.topk's order). What is not kept takes the atom's default in
the engine (confidence 0), as for a threshold alone.

The size guard (:func:`machine_budget`, :func:`projected_bytes`) bounds what an export may keep in bytes
against what the machine has (a share of the memory available and of the free disk), not as a share of all
pairs: a 32-entity graph's dense matrix is 12 KB, whatever share of it a model keeps.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch


def select_block(
    scores: torch.Tensor, threshold: float, top_k: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores: (b, n) float, the block's heads against all n tails. Returns (rows, tails, values): the kept
    pairs as 1-D tensors sorted by (row, tail), rows relative to the block."""
    keep = scores >= threshold
    if top_k is not None and top_k < scores.shape[1]:
        # exact top-k with ties by tail id: keep everything above the K-th value, then the first (lowest
        # tail id) of the entries equal to it until K are kept; O(n) per row like topk itself
        kth = torch.topk(scores, top_k, dim=1, sorted=True).values[:, -1:]
        above = scores > kth
        equal = scores == kth
        room = top_k - above.sum(dim=1, keepdim=True)
        keep &= above | (equal & (equal.cumsum(dim=1) <= room))
    # nonzero() walks row-major, so the pairs come out sorted by (head, tail)
    rows, tails = keep.nonzero(as_tuple=True)
    return rows, tails, scores[rows, tails]


def check_top_k(top_k: int | None) -> int | None:
    from pipeline.core.errors import PipelineError, option

    if top_k is not None and top_k < 1:
        raise PipelineError(f"{option('top_k', top_k)}: must be at least 1")
    return top_k


# ------------------------------------------------------------------------------------ the size guard
# What one kept fact costs: head int32 + tail int32 + score float32, in the Arrow files and again in the
# engine's arrays once loaded.
BYTES_PER_FACT = 12
# An export may take at most this share of the memory available when it starts (the engine holds it in
# memory, with its index and pair cache beside: about 2-3x the files) ...
MEMORY_SHARE = 0.25
# ... and of the free disk space where it is written.
DISK_SHARE = 0.5


@dataclass(frozen=True)
class SizeBudget:
    """The most bytes an export may take, and why (``"a quarter of the 12.3 GB of memory available"``)."""

    bytes: int
    why: str


def human_bytes(n: float) -> str:
    """1234567 -> '1.2 MB' (decimal units, as `df -H` and the CLI's MB)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def available_memory() -> int:
    """Bytes of memory available to a new allocation now (Linux MemAvailable; else free pages)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def machine_budget(out: Path) -> SizeBudget:
    """The size budget of an export written to ``out`` on this machine now: the smaller of MEMORY_SHARE of
    the memory available and DISK_SHARE of the free disk space under ``out``'s nearest existing folder."""
    memory = available_memory()
    there = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    disk = shutil.disk_usage(there).free
    by_memory, by_disk = int(MEMORY_SHARE * memory), int(DISK_SHARE * disk)
    if by_memory <= by_disk:
        return SizeBudget(by_memory, f"a quarter of the {human_bytes(memory)} of memory available")
    return SizeBudget(by_disk, f"half of the {human_bytes(disk)} free on the disk of {there}")


def projected_bytes(kept: int, scored: int, step_pairs: int, all_pairs: int) -> int:
    """The export's size as far as it can be told: the facts kept so far, extrapolated to all pairs once a
    block and 2% of all pairs are scored (so an unselective model fails in seconds), in bytes."""
    early = scored >= min(all_pairs, max(step_pairs, all_pairs // 50))
    facts = kept * all_pairs / scored if early and scored else kept
    return int(max(facts, kept) * BYTES_PER_FACT)
