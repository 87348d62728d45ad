"""What the first `pipeline answer` on an export would build, built by `pipeline export` instead.

A fresh export has an empty pair cache (:mod:`pipeline.formats.pair_cache`), so the first answering
process after it used to pay for:

- the engine's index of the export (:mod:`pipeline.formats.engine_index`: the relation files decoded and
  checked, the rows by tail sorted, 24 bytes per fact written as the cache's index file);
- the multi-edge arrays of each relation pair its queries join on the same two variables (2m, im):
  the entries stored in both relations (:meth:`Adjacency.shared_facts`) and the points covering each
  column's front (:meth:`Adjacency.column_front`), built inside the answering step of the first batch
  that needs them.

:func:`prepare_answering` builds them right after the export is in place, through the very calls answering
makes (``load_engine_index``, ``shared_facts``, ``column_front``), so the files are the ones answering would
write (the same identity, names and bytes) and every answer is bit for bit that of a first answer that
built them itself. Which pairs: the ordered relation pairs ``(a, b)``, ``a != b``, that share an (h, t)
somewhere in the data set's observed graph (train, valid and test facts), with both atoms read from their
head side (``r_a(x, y) & r_b(x, y)``: the multi-edge of 2m and im); a sampled query's multi-edge is an
observed one, so this covers every benchmark query. Most shared first, until ``seconds`` have passed or
``max_bytes`` of pair files are written (the index comes first, whatever the budget). A data set that
cannot be loaded (a toy graph in a test) gives every ordered pair. Only the CPU's answering reads the pair
cache (a GPU answers from the export it loads onto the device); with the cache off
(``PIPELINE_PAIR_CACHE=off``) nothing is built.

Cost measured on PPI5k (30-epoch UKGE logi, T = 0.1, 1.3M facts; docs/studies/fresh-answer-cache-and-workers.md): 2.2-2.7 s
more per export (index 0.23-0.29 s, the data set's graph 0.96-1.16 s, 42 pairs 0.75-1.07 s) and 101 MiB in
the pair cache (the index 30 MiB, the pairs 70 MiB), which the first answer wrote before (67-101 MiB).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

# seconds the pairs may take after the index (PPI5k: all 42 pairs of its 7 relations in 0.75-1.07 s on a
# shared 2-core machine, 30-epoch UKGE logi at T = 0.1; CN15k: 560 ordered pairs share an (h, t), unmeasured:
# the budget bounds it)
PREPARE_SECONDS = 60.0
# bytes of pair files (beyond the index) written at most: PPI5k's 42 pairs take 70 MiB
PREPARE_BYTES = 1 << 30

Key = tuple[tuple[bool, int], tuple[bool, int]]


def multi_edge_pairs(graph: pd.DataFrame) -> list[tuple[int, int]]:
    """Ordered relation pairs (a, b), a != b, that hold a fact on the same (h, t) in ``graph`` (columns h,
    r, t), the pairs sharing most (h, t) first (ties by (a, b))."""
    g = graph[["h", "r", "t"]].drop_duplicates()
    multi = g[g.duplicated(["h", "t"], keep=False)]
    if multi.empty:
        return []
    both = multi.merge(multi, on=["h", "t"], suffixes=("_a", "_b"))
    both = both[both["r_a"] != both["r_b"]]
    counts = both.groupby(["r_a", "r_b"]).size().reset_index(name="n")
    counts = counts.sort_values(["n", "r_a", "r_b"], ascending=[False, True, True], kind="stable")
    return [(int(a), int(b)) for a, b in zip(counts["r_a"], counts["r_b"], strict=True)]


def candidate_keys(n_relations: int, graph: pd.DataFrame | None) -> list[Key]:
    """The pair-cache keys to build (module docstring): from the observed graph when given, else every
    ordered pair of distinct relations."""
    if graph is not None:
        pairs = multi_edge_pairs(graph)
    else:
        pairs = [(a, b) for a in range(n_relations) for b in range(n_relations) if a != b]
    return [((True, a), (True, b)) for a, b in pairs]


def observed_graph(dataset: str) -> pd.DataFrame | None:
    """The data set's test graph (every split's facts), or None when it cannot be loaded."""
    from loaders import load

    try:
        return load(dataset).graph("test")
    except Exception:  # noqa: BLE001 — any failure (an unregistered toy, a moved mirror) means: every pair
        return None


def prepare_answering(
    folder: str | Path, dataset: str | None = None, *, seconds: float = PREPARE_SECONDS,
    max_bytes: int = PREPARE_BYTES,
) -> dict[str, Any]:
    """Build the export's engine index and its likely relation pairs into its pair cache (module
    docstring), the pairs until ``seconds`` have passed or ``max_bytes`` of pair files are written.
    Returns what was done: {index_s, pairs, pairs_left, pairs_s, graph_s, seconds, bytes}
    (bytes: the cache folder's pair and index files), or {"skipped": reason}."""
    import torch

    from pipeline.formats import pair_cache
    from pipeline.formats.engine_index import load_engine_index

    t0 = time.perf_counter()
    cache = pair_cache.for_export(folder)
    if cache is None:
        return {"skipped": "pair cache off (PIPELINE_PAIR_CACHE)"}
    adj, manifest = load_engine_index(folder, device="cpu")
    index_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    graph = observed_graph(dataset or str(manifest["dataset"])) if seconds > 0 else None
    graph_s = time.perf_counter() - t1
    keys = candidate_keys(adj.n_relations, graph) if seconds > 0 else []
    done = 0
    t2 = time.perf_counter()
    base = cache.used()
    with torch.no_grad():
        for key in keys:
            if time.perf_counter() - t2 >= seconds or cache.used() - base >= max_bytes:
                break
            adj.shared_facts(key)
            adj.column_front(key)
            done += 1
    pairs_s = time.perf_counter() - t2
    return {
        "index_s": round(index_s, 3),
        "graph_s": round(graph_s, 3),
        "pairs": done,
        "pairs_left": len(keys) - done,
        "pairs_s": round(pairs_s, 3),
        "seconds": round(time.perf_counter() - t0, 3),
        "bytes": int(sum(p.stat().st_size for p in cache.folder.glob("*.bin"))) if cache.folder.is_dir() else 0,
        "folder": str(cache.folder),
    }

