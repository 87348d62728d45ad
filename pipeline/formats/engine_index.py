"""An export as the engine's index, built once per export and memory-mapped by every later process.

:func:`load_engine_index` returns the :class:`~pipeline.engine.Adjacency` of an export with its pair cache
attached (:mod:`pipeline.formats.pair_cache`). The first process reads the relation files
(:func:`~pipeline.formats.adjacency.load_adjacency`: manifest, digests, ranges and order checked), indexes
them both ways and writes the index's arrays (rows by head, rows by tail, the diagonal: 24 bytes per fact)
as one file of the pair cache; every later process maps that file instead: no Arrow decoding, no checks
of order and range (done when it was built), no sort for the rows by tail, and one copy of the pages in
the page cache for all processes on the machine (forked workers, spawned ones, Ray actors). The file's
CRC-32s are checked in full on its first open after any write to it (about 4 GB/s; a verification
record beside it covers later opens while its stamp holds: :mod:`pipeline.formats.pair_cache`), so a
flipped byte means a rebuild from the export, never a wrong answer; the cache folder is keyed by the
export's identity, so another or a rewritten export never reads it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

from pipeline.core import sealed_arrays
from pipeline.engine import Adjacency, as_adjacency, kernels
from pipeline.engine.adjacency import Oriented
from pipeline.formats import pair_cache
from pipeline.formats.adjacency import checked_manifest, load_adjacency

_FIELDS = 11  # fwd src/dst/conf/ptr, bwd src/dst/conf/ptr, diag ent/conf/off, then the sizes


def load_engine_index(
    folder: str | Path,
    dataset: str | None = None,
    device: str | torch.device = "cpu",
    n_entities: int | None = None,
    n_relations: int | None = None,
) -> tuple[Adjacency, dict[str, Any]]:
    """The export at ``folder`` indexed for the engine, and its manifest (checked as load_adjacency
    checks it). On the CPU with the pair cache on (PIPELINE_PAIR_CACHE not ``off``): the index file of
    the cache, written by the first process that needs it.

    Kept in this process (:data:`KEEP`, the last used): a later call on the same export returns the same
    index, with the relation-pair work it has memoised (a notebook's next ``pl.query``), as long as the
    export is unchanged (its identity: the manifest's bytes, each relation file's size and mtime,
    :func:`~pipeline.formats.pair_cache.export_identity`) and so is the index file it maps (its stamp)."""
    manifest = checked_manifest(folder, dataset, n_entities, n_relations)
    from pipeline.core import config

    key = (str(Path(folder).resolve()), pair_cache.export_identity(folder), str(config.pair_cache_root()),
           str(torch.device(device)), dataset, n_entities, n_relations)
    hit = _kept(key)
    if hit is not None:
        return hit, dict(manifest)
    # a large export: the compiled stream loads in the background from now on, beside the index's load
    # and check, so that it is ready (or nearly) when the first large step comes
    kernels.prepare(sum(int(rel["nnz"]) for rel in manifest["relations"]), device)
    adj, manifest = _load(folder, manifest, dataset, device, n_entities, n_relations)
    _keep(key, adj)
    return adj, manifest


def load_kernels_ahead(folder: str | Path, device: str | None = None, queries: str | Path | None = None) -> None:
    """Start loading the compiled engine steps for the export at ``folder`` answered on ``device`` (None:
    the default device) in the background now (:func:`~pipeline.engine.kernels.prepare`, by the manifest's
    fact count and the number of queries in the query set file ``queries``, read from its footer), as
    :func:`load_engine_index` would later: ``pipeline answer`` calls it before reading its query set and
    building its method, so that the load (0.2-0.35 s of CPU from numba's disk cache) runs beside them
    instead of inside the first large step's time (CN15k: the first batch, im, waited 0.4-0.6 s for it).
    Nothing where the manifest cannot be read or the device is not valid: the command reports those
    where it meets them; a query set that cannot be read counts as none."""
    from pipeline.core import config
    from pipeline.core.errors import PipelineError

    try:
        manifest = checked_manifest(folder)
        n_facts = sum(int(rel["nnz"]) for rel in manifest["relations"])
        kernels.prepare(n_facts, config.select_device(device), _query_count(queries))
    except (OSError, ValueError, KeyError, TypeError, PipelineError):
        return


def _query_count(path: str | Path | None) -> int:
    """The rows of a query set's Parquet file by its footer (no column read); 0 where it cannot be read
    (the answering stage reports that when it reads the file)."""
    if path is None:
        return 0
    try:
        import pyarrow.parquet as pq

        return int(pq.read_metadata(str(path)).num_rows)
    except Exception:  # not a Parquet file, missing, damaged: no query counted
        return 0


KEEP = 2  # exports whose index this process keeps (mapped pages: the page cache's, not the heap's)
_KEPT: OrderedDict[tuple, tuple[Adjacency, sealed_arrays.Stamp | None]] = OrderedDict()
_KEPT_LOCK = threading.Lock()


def _index_stamp(adj: Adjacency) -> sealed_arrays.Stamp | None:
    """The stamp of the index file ``adj`` maps (None: an index in memory, or no such file now)."""
    cache = adj.pair_cache
    if not isinstance(cache, pair_cache.PairCache):
        return None
    try:
        return sealed_arrays.file_stamp(os.stat(cache.path("index", ())))
    except OSError:
        return None


def _kept(key: tuple) -> Adjacency | None:
    with _KEPT_LOCK:
        got = _KEPT.get(key)
    if got is None:
        return None
    adj, stamp = got
    # a rewritten index file would change the pages this process maps (a private map reads the file
    # until a page is written): never reuse it then
    if stamp is not None and _index_stamp(adj) != stamp:
        with _KEPT_LOCK:
            _KEPT.pop(key, None)
        return None
    with _KEPT_LOCK:
        if key in _KEPT:
            _KEPT.move_to_end(key)
    return adj


def _keep(key: tuple, adj: Adjacency) -> None:
    with _KEPT_LOCK:
        _KEPT[key] = (adj, _index_stamp(adj))
        _KEPT.move_to_end(key)
        while len(_KEPT) > KEEP:
            _KEPT.popitem(last=False)


def forget_kept() -> None:
    """Drop every index this process keeps (tests; a notebook that wants the memory back)."""
    with _KEPT_LOCK:
        _KEPT.clear()


def _load(
    folder: str | Path,
    manifest: dict[str, Any],
    dataset: str | None,
    device: str | torch.device,
    n_entities: int | None,
    n_relations: int | None,
) -> tuple[Adjacency, dict[str, Any]]:
    cache = pair_cache.for_export(folder)
    if cache is None or torch.device(device).type != "cpu":
        graph, manifest = load_adjacency(folder, dataset, device, n_entities, n_relations)
        return as_adjacency(graph).use_pair_cache(cache), manifest
    got = cache.load("index", ())
    if got is not None and _sizes_match(got, manifest):
        return _from_arrays(got, str(manifest["dataset"])).use_pair_cache(cache), manifest
    graph, manifest = load_adjacency(folder, dataset, device, n_entities, n_relations)
    adj = as_adjacency(graph)
    del graph
    if cache.store("index", (), _arrays(adj)):
        # the file's pages instead of this process' copy (freed first, so the two never coexist): the
        # memory of every later process, and the pages the workers forked from this one share
        dataset_name = adj.dataset
        del adj
        _release_freed_memory()
        got = cache.load("index", ())
        if got is not None:
            return _from_arrays(got, dataset_name).use_pair_cache(cache), manifest
        graph, manifest = load_adjacency(
            folder, dataset, device, n_entities, n_relations
        )  # unreadable: rebuild
        adj = as_adjacency(graph)
    return adj.use_pair_cache(cache), manifest


def _release_freed_memory() -> None:
    """Hand the heap freed by decoding and indexing (the Arrow buffers, the sort's temporaries: ~1 GiB
    on CN15k) back to the system before answering: Arrow's memory pool and glibc's malloc keep freed
    pages for reuse, and answering workers forked from this process would otherwise start beside that
    dead heap (the first process after an export peaked at 4.4 GiB with two workers)."""
    import pyarrow as pa

    from pipeline.core.heap import release_heap

    pa.default_memory_pool().release_unused()
    release_heap()


def _arrays(adj: Adjacency) -> tuple[torch.Tensor, ...]:
    sizes = torch.tensor([adj.n_entities, adj.n_relations], dtype=torch.int64)
    return (
        *(adj.fwd.src, adj.fwd.dst, adj.fwd.conf, adj.fwd.ptr),
        *(adj.bwd.src, adj.bwd.dst, adj.bwd.conf, adj.bwd.ptr),
        *(adj.diag_ent, adj.diag_conf, adj.diag_off),
        sizes,
    )


def _sizes_match(arrays: tuple[torch.Tensor, ...], manifest: dict[str, Any]) -> bool:
    if len(arrays) != _FIELDS + 1:
        return False
    n, r = arrays[-1].tolist()
    nnz = sum(int(rel["nnz"]) for rel in manifest["relations"])
    return n == int(manifest["n_entities"]) and r == int(manifest["n_relations"]) and arrays[0].numel() == nnz


def _from_arrays(a: tuple[torch.Tensor, ...], dataset: str) -> Adjacency:
    n, r = a[-1].tolist()
    return Adjacency(n, r, Oriented(*a[0:4]), Oriented(*a[4:8]), a[8], a[9], a[10], dataset)


# bump when the index's arrays change (Oriented, the diagonal): the files kept with a data set's tables
OBSERVED_INDEX = "engine-index-{graph}-v1"


def observed_index(kg: Any, graph: str, device: str | torch.device = "cpu") -> Adjacency:
    """The engine's index of the observed graph train|valid|test of a loaded data set
    (:class:`loaders.KGData`): on the CPU, built once per version of the data set's files and kept with
    its parsed tables (:mod:`loaders.parsed`: the same arrays, mapped by every later process), and the
    same object for every call of this process while the data set stays loaded."""
    from pipeline.core.kg import observed_graph

    if torch.device(device).type != "cpu":
        return as_adjacency(observed_graph(kg, graph, device))
    name = OBSERVED_INDEX.format(graph=graph)
    adj = kg.memo.get(name)
    if adj is None:
        arrays = kg.derived_arrays(name, lambda: tuple(a.numpy() for a in _arrays(as_adjacency(observed_graph(kg, graph)))))
        adj = _from_arrays(tuple(torch.from_numpy(a) for a in arrays), kg.name)
        kg.memo[name] = adj
    return adj
