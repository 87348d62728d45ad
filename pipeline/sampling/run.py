"""The `pipeline sample` and `pipeline import-squk` stages end to end: data set + store in, query set
files out (plus browsable (:Query) nodes in the store)."""

from __future__ import annotations

import time
from pathlib import Path

from pipeline.formats.queryset import read_query_set, write_query_set
from pipeline.stages.writeback import write_queries

# The literature's valid/test counts per type (CN15k 3,000, PPI5k and O*NET20k 2,000).
PAPER_PER_TYPE = {"cn15k": 3000, "ppi5k": 2000, "onet20k": 2000}


def set_name(dataset: str, split: str, alpha: str, beta: str) -> str:
    return f"{dataset}_{split}_{alpha}_{beta}"


def sample_to_dir(
    kg,
    store,
    out_dir: str | Path,
    *,
    split: str = "test",
    types: list[str] | None = None,
    per_type: int | None = None,
    alpha: str = "zero",
    beta: str = "equal",
    seed: int = 0,
    browse: bool = True,
    progress: bool = True,
) -> dict:
    """Sample, write out_dir/<dataset>_<split>_<alpha>_<beta>.parquet and (browse) MERGE the queries into
    the store. Returns a summary: the file, per-type reports and timings."""
    from pipeline.sampling.levels import store_alpha_table
    from pipeline.sampling.sampler import sample_queries
    from pipeline.store.ingest import content_key

    per_type = per_type if per_type is not None else PAPER_PER_TYPE.get(kg.name, 2000)
    t0 = time.perf_counter()
    table = store_alpha_table(store, kg.name, kg.n_relations)
    rows, reports = sample_queries(kg, store, split=split, types=types, per_type=per_type, alpha_mode=alpha, beta_mode=beta, seed=seed, alpha_table=table, progress=progress)
    seconds = time.perf_counter() - t0
    name = set_name(kg.name, split, alpha, beta)
    meta = {
        "dataset": kg.name,
        "split": split,
        "alpha": alpha,
        "beta": beta,
        "source": "sampled",
        "seed": int(seed),
        "per_type": per_type,
        "types": [r.type for r in reports],
        "checksums": kg.checksums,
        # the graph it was sampled from (the store's load marker key): answering or writing it back
        # against another version of the data set is refused (pipeline.stages.writeback.check_version)
        "dataset_version": content_key(kg),
    }
    path = write_query_set(rows, Path(out_dir) / f"{name}.parquet", meta)
    written = write_queries(store, read_query_set(path)) if browse else 0
    return {
        "file": str(path),
        "queries": len(rows),
        "seconds": round(seconds, 2),
        "browsable": written,
        "types": [r.summary() for r in reports],
    }


def sample_dataset(
    dataset: str,
    out_dir: str | Path,
    *,
    split: str = "test",
    types: list[str] | None = None,
    per_type: int | None = None,
    alpha: str = "zero",
    beta: str = "equal",
    seed: int = 0,
    store_uri: str | None = None,
    source: str | None = None,
    browse: bool = True,
    progress: bool = True,
) -> dict:
    """``pipeline sample DATASET``: check the options before the data and the store are touched, load the
    data set, sample over the store (:func:`sample_to_dir`). types: None = the split's defaults."""
    from loaders import load
    from pipeline.core.atomic import check_folder
    from pipeline.core.checks import check_int, check_seed, check_text
    from pipeline.sampling.sampler import SamplingError, resolve_types
    from pipeline.store import open_store

    check_text(dataset, "dataset")
    check_seed(seed, "--seed")
    check_folder(out_dir, "--out")
    names = resolve_types(types, split)
    if per_type is not None:
        if isinstance(per_type, int) and not isinstance(per_type, bool) and per_type < 1:
            raise SamplingError(f"--per-type must be at least 1, got {per_type}")
        check_int(per_type, "--per-type", 1, 10**7)
    kg = load(dataset, source=source)
    with open_store(store_uri) as store:
        return sample_to_dir(kg, store, out_dir, split=split, types=names, per_type=per_type, alpha=alpha, beta=beta, seed=seed, browse=browse, progress=progress)
