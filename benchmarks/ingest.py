"""Ingest of whole data sets into the graph store, and what the store's safety costs on a loaded graph."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.harness import Goal, Result, Table, benchmark, progress


@benchmark(
    "ingest",
    title="Ingest into the graph store",
    goals=[Goal("bulk_facts_per_s", "facts/s of the bulk path (the slowest run)", ">=", 50_000, "facts/s")],
    quick={"datasets": ("ppi5k",), "methods": ("bulk",), "repeat": 1, "overheads": False},
)
def ingest(
    *,
    datasets: tuple[str, ...] = ("cn15k", "ppi5k"),
    methods: tuple[str, ...] = ("bulk", "cypher"),
    repeat: int = 1,
    batch_size: int = 10_000,
    store: str | None = None,
    overheads: bool = True,
) -> Result:
    """One relationship per distinct (h, r, t) with its confidence in train/valid/test, into a fresh graph of a
    throw-away embedded FalkorDB server (or ``--store URI``), timed on the wall clock: content hashing,
    validation, the data set lock, the load, the final count and checksum check. ``bulk`` is FalkorDB's
    binary GRAPH.BULK load (the embedded default), ``cypher`` the portable UNWIND path Neo4j uses (batches
    of ``--batch-size``). Loading the files into tables is not timed (the ``load`` benchmark). With
    ``--overheads``, also on the loaded graph: an uncontended store lock, the count check alone and a re-run
    that finds the data set complete."""
    from loaders import load
    from pipeline.store import open_store
    from pipeline.store.embedded import launch, shutdown
    from pipeline.store.embedded import login as embedded_login
    from pipeline.store.ingest import ingest as ingest_kg

    rows, extra_rows, bulk_rates = [], [], []
    server = None
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        if store is None:
            server, proc = launch(Path(tmp) / "store")
            # the throw-away server requires its password like the embedded one: name it in the URI
            login = embedded_login(server)
            uri = f"falkordb://{login['username']}:{login['password']}@{server.host}:{server.port}"
        else:
            uri = store
        try:
            with progress(len(datasets) * len(methods) * repeat, "ingest", "load") as bar:
                for name in datasets:
                    kg = load(name)
                    for method in methods:
                        for rep in range(repeat):
                            with open_store(uri, graph=f"bench_{name}_{method}_{rep}") as st:
                                st.drop()
                                st.bulk = method == "bulk"
                                t0 = time.perf_counter()
                                report = ingest_kg(kg, st, batch_size=batch_size, progress=False)
                                wall = time.perf_counter() - t0
                                if overheads and rep == 0:
                                    extra_rows.append([name, report.method, *_overheads(st, kg, name)])
                                st.drop()
                                st.checkpoint()  # the drop needs no saving: a throw-away graph
                            rows.append(
                                [name, report.method, rep + 1, report.facts, wall, report.facts / wall]
                            )
                            if method == "bulk":
                                bulk_rates.append(report.facts / wall)
                            bar.update(1)
        finally:
            if server is not None:
                shutdown(server)
                proc.wait(timeout=30)
    tables = [Table(["data set", "method", "run", "facts", "wall s", "facts/s"], rows)]
    if extra_rows:
        tables.append(
            Table(
                [
                    "data set",
                    "method",
                    "uncontended lock ms",
                    "count check s",
                    "re-run that finds it complete s",
                ],
                extra_rows,
                title="What the store's safety costs on the loaded graph",
            )
        )
    return Result(tables, {"bulk_facts_per_s": min(bulk_rates) if bulk_rates else None})


def _overheads(store, kg, name: str) -> list[float]:
    """An uncontended lock (take + release) in ms, then in seconds the count check (one status query) and a
    re-run that finds the data set complete (hash, lock, counts)."""
    from pipeline.store.ingest import ingest as ingest_kg
    from pipeline.store.status import dataset_status

    t0 = time.perf_counter()
    with store.lock(f"bench:{name}", purpose="benchmark"):
        pass
    t1 = time.perf_counter()
    dataset_status(store, name)
    t2 = time.perf_counter()
    again = ingest_kg(kg, store, progress=False)
    t3 = time.perf_counter()
    assert again.skipped, "a second ingest must find the data set complete"
    return [(t1 - t0) * 1e3, t2 - t1, t3 - t2]
