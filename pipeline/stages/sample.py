"""The `pipeline sample` stage end to end: data set + store in, a query set file out (plus browsable
(:Query) nodes in the store). Its options are :class:`pipeline.stages.options.SampleOptions`."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.formats.queryset import read_query_set, write_query_set
from pipeline.stages.options import SampleOptions
from pipeline.stages.writeback import write_queries

# The literature's valid/test counts per type (CN15k 3,000, PPI5k and O*NET20k 2,000).
PAPER_PER_TYPE = {"cn15k": 3000, "ppi5k": 2000, "onet20k": 2000}


def set_name(dataset: str, split: str, alpha: str, beta: str) -> str:
    return f"{dataset}_{split}_{alpha}_{beta}"


def sample_to_dir(kg, store, options: SampleOptions) -> dict:
    """Sample, write ``options.out``/<dataset>_<split>_<alpha>_<beta>.parquet and (``options.browse``) MERGE
    the queries into the store. Returns a summary: the file, per-type reports and timings. types: None = the
    split's defaults, which skip the types the graph cannot hold (:func:`pipeline.sampling.sampler.sample_queries`)."""
    from pipeline.sampling.levels import store_alpha_table
    from pipeline.sampling.sampler import sample_queries
    from pipeline.store.ingest import content_key

    o = options
    split, alpha, beta, seed = o.split, o.alpha, o.beta, o.seed
    per_type = o.per_type if o.per_type is not None else PAPER_PER_TYPE.get(kg.name, 2000)
    t0 = time.perf_counter()
    table = store_alpha_table(store, kg.name, kg.n_relations)
    rows, reports = sample_queries(kg, store, split=split, types=list(o.types) if o.types else None, per_type=per_type,
                                   alpha_mode=alpha, beta_mode=beta, seed=seed, alpha_table=table, progress=o.output)
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
        "types": [r.type for r in reports if r.kept],
        "checksums": kg.checksums,
        # the graph it was sampled from (the store's load marker key): answering or writing it back
        # against another version of the data set is refused (pipeline.stages.writeback.check_version)
        "dataset_version": content_key(kg),
    }
    path = write_query_set(rows, Path(o.out) / f"{name}.parquet", meta)
    written = write_queries(store, read_query_set(path)) if o.browse else 0
    return {
        "file": str(path),
        "queries": len(rows),
        "seconds": round(seconds, 2),
        "browsable": written,
        "types": [r.summary() for r in reports],
    }


def sample_dataset(dataset: str, options: SampleOptions | None = None, /, **settings: Any) -> dict:
    """``pipeline sample DATASET``: check the options before the data and the store are touched, load the
    data set, sample over the store (:func:`sample_to_dir`). options: a :class:`SampleOptions`, or its
    fields as keywords (``settings``); types None = the split's defaults."""
    from loaders import dataset_name, load
    from pipeline.core.atomic import check_folder
    from pipeline.core.checks import check_text
    from pipeline.sampling.sampler import resolve_types
    from pipeline.store import open_store

    dataset = dataset_name(check_text(dataset, "dataset"))  # PPI5K is ppi5k: one spelling in paths and keys
    o = options if options is not None else SampleOptions(**settings)
    if o.out is None:  # beside the runs and exports, under PIPELINE_HOME (never the current folder)
        from pipeline.core.config import home

        o = replace(o, out=home() / "queries" / dataset)
    check_folder(o.out, "out")
    names = resolve_types(list(o.types), o.split) if o.types else None  # None: the defaults, skipping what cannot exist
    kg = load(dataset, source=o.source)
    with open_store(o.store) as store:
        return sample_to_dir(kg, store, replace(o, types=None if names is None else tuple(names)))
