"""Ingest of full data sets into FalkorDB: wall time and facts/s, GRAPH.BULK path vs the portable UNWIND
Cypher path (the one Neo4j uses). Each run loads into a fresh graph of a throw-away server (or --store).

    python benchmarks/bench_ingest.py [--datasets cn15k,ppi5k] [--methods bulk,cypher] [--repeat 1]

Loading the files into tables is not timed here (see bench_load.py); content hashing, validation, the
data set lock and the final count check are. On FalkorDB it also times the safety overheads on the loaded
graph: an uncontended store lock, the count check alone, a re-run that finds the data set complete, and a
synchronous SAVE (what closing a store that wrote costs on the embedded server).
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="cn15k,ppi5k")
    ap.add_argument("--methods", default="bulk,cypher")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=10_000)
    ap.add_argument("--store", default=None, help="falkordb://host:port (default: a throw-away server)")
    args = ap.parse_args()

    from loaders import load
    from pipeline.store import open_store
    from pipeline.store.embedded import launch, shutdown
    from pipeline.store.embedded import login as embedded_login
    from pipeline.store.ingest import ingest

    server = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.store is None:
            server, proc = launch(Path(tmp) / "store")
            # the throw-away server requires its password like the embedded one: name it in the URI
            login = embedded_login(server)
            uri = f"falkordb://{login['username']}:{login['password']}@{server.host}:{server.port}"
        else:
            uri = args.store
        rows = []
        try:
            for name in args.datasets.split(","):
                kg = load(name)
                for method in args.methods.split(","):
                    for rep in range(args.repeat):
                        with open_store(uri, graph=f"bench_{name}_{method}_{rep}") as store:
                            store.drop()
                            store.bulk = method == "bulk"
                            t0 = time.perf_counter()
                            report = ingest(kg, store, batch_size=args.batch_size, progress=False)
                            wall = time.perf_counter() - t0
                            extra = _overheads(store, kg, name) if "snapshot" not in store.cannot else {}
                            store.drop()
                            store.checkpoint()  # the drop needs no saving: it is a throw-away graph
                        rows.append(
                            {
                                "dataset": name,
                                "method": report.method,
                                "run": rep + 1,
                                "facts": report.facts,
                                "entities": report.entities,
                                "wall s": f"{wall:.2f}",
                                "facts/s": f"{report.facts / wall:,.0f}",
                                **extra,
                            }
                        )
                        print(*rows[-1].values(), sep="\t", flush=True)
        finally:
            if server is not None:
                shutdown(server)
                proc.wait(timeout=30)
    print(
        f"\n# ingest into FalkorDB ({uri.split('//')[0]}//...), {platform.node()}, {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}"
    )
    _table(rows)


def _overheads(store, kg, name: str) -> dict[str, str]:
    """What the store's safety costs on the loaded graph: an uncontended lock (take + release), the
    count check (one status query), a re-run that finds the data set complete (hash, lock, counts) and
    one synchronous SAVE of the server (what the embedded store does when a writing store closes)."""
    from pipeline.store.ingest import ingest
    from pipeline.store.status import dataset_status

    t0 = time.perf_counter()
    with store.lock(f"bench:{name}", purpose="benchmark"):
        pass
    t1 = time.perf_counter()
    dataset_status(store, name)
    t2 = time.perf_counter()
    again = ingest(kg, store, progress=False)
    t3 = time.perf_counter()
    assert again.skipped, "a second ingest must find the data set complete"
    store.snapshot_on_checkpoint = True
    store.checkpoint()
    t4 = time.perf_counter()
    store.snapshot_on_checkpoint = False
    return {
        "lock ms": f"{(t1 - t0) * 1000:.1f}",
        "count check s": f"{t2 - t1:.3f}",
        "re-run s": f"{t3 - t2:.2f}",
        "SAVE s": f"{t4 - t3:.2f}",
    }


def _table(rows: list[dict]) -> None:
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print(" | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)))


if __name__ == "__main__":
    main()
