"""``pl.run`` with its defaults on a small real graph: networkx's Les Miserables co-occurrences (77 characters,
508 facts: both directions of 254 weighted edges, weights over the largest), as a newcomer's first call.

    PIPELINE_HOME=/tmp/h OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_small_run.py [--repeat]

Prints each stage's seconds (the experiment's ledger), the whole call's wall time and CPU time (this process
and its children: on a busy shared machine the CPU seconds are what a quiet one would take as wall time, one
thread) and the result table; ``--repeat`` runs the same call again (every stage reused). The graph is written
to the work folder.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path


def lesmis_tsv(folder: Path) -> Path:
    """Les Miserables as a user KG file: head, relation, tail, confidence (weight / max weight, 4 decimals)."""
    import networkx as nx

    g = nx.les_miserables_graph()
    top = max(w for _, _, w in g.edges(data="weight"))
    rows = {}
    for u, v, w in g.edges(data="weight"):
        rows[(u, v)] = rows[(v, u)] = round(w / top, 4)
    path = folder / "lesmis.tsv"
    path.write_text("head\trelation\ttail\tconfidence\n"
                    + "".join(f"{h}\tco_occurs\t{t}\t{c}\n" for (h, t), c in rows.items()), encoding="utf-8")
    return path


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=None, help="Work folder (default: a new temporary folder).")
    ap.add_argument("--repeat", action="store_true", help="Run the same call again (every stage reused).")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="small-run-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    import pipeline as pl

    kg = pl.ingest("lesmis", lesmis_tsv(work), progress=False)
    print(f"threads {os.environ.get('OMP_NUM_THREADS', 'all')}, load average {os.getloadavg()[0]:.1f}; "
          f"ingest {time.perf_counter() - t0:.1f} s")
    for attempt in range(2 if args.repeat else 1):
        t1, c1 = time.perf_counter(), _cpu()
        exp = pl.run(kg, out=work / "exp", progress=False)
        wall, cpu = time.perf_counter() - t1, _cpu() - c1
        print(f"\npl.run #{attempt + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU (load average {os.getloadavg()[0]:.1f})")
        print(exp.stages.to_string(index=False))
        print(exp.table.round(1).to_string())


if __name__ == "__main__":
    main()
