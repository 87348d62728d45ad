"""``pl.run`` with its defaults on a small real graph, as a newcomer's first call."""

from __future__ import annotations

import os
import resource
import tempfile
import time
from pathlib import Path

from benchmarks.harness import BenchmarkError, Goal, Result, Table, benchmark


def lesmis_tsv(folder: Path) -> Path:
    """networkx's Les Miserables co-occurrences as a user KG file: head, relation, tail, confidence (both
    directions of each of the 254 weighted edges, weight / the largest weight, 4 decimals)."""
    import networkx as nx

    g = nx.les_miserables_graph()
    top = max(w for _, _, w in g.edges(data="weight"))
    rows = {}
    for u, v, w in g.edges(data="weight"):
        rows[(u, v)] = rows[(v, u)] = round(w / top, 4)
    path = folder / "lesmis.tsv"
    path.write_text(
        "head\trelation\ttail\tconfidence\n"
        + "".join(f"{h}\tco_occurs\t{t}\t{c}\n" for (h, t), c in rows.items()),
        encoding="utf-8",
    )
    return path


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@benchmark(
    "small-run",
    title="pl.run on a small graph",
    goals=[
        Goal(
            "wall_s", "pl.run with its defaults on Les Misérables (508 facts), the whole call", "<=", 60, "s"
        )
    ],
)
def small_run(*, work: Path | None = None, again: bool = False) -> Result:
    """networkx's Les Misérables co-occurrences (77 characters, 508 facts) ingested as a user KG, then
    ``pl.run`` with its defaults (sampling, training, export, SRC with none, D, L and D+L, the table) in this
    process: each stage's seconds (the experiment's ledger), the whole call's wall and CPU seconds (this
    process and its children: on a busy machine the CPU seconds are what a quiet one takes as wall time),
    the table it makes. ``--again`` runs the same call a second time (every stage reused). Set
    OMP_NUM_THREADS to choose torch's threads, as a user would. Uses PIPELINE_HOME's store."""
    try:
        import networkx  # noqa: F401
    except ImportError:
        raise BenchmarkError("networkx is not installed") from None
    folder = Path(work or tempfile.mkdtemp(prefix="bench-small-run-"))
    folder.mkdir(parents=True, exist_ok=True)
    import pipeline as pl

    kg = pl.ingest("lesmis", lesmis_tsv(folder), progress=False)
    tables, notes, first = [], [], None
    for attempt in range(2 if again else 1):
        t1, c1 = time.perf_counter(), _cpu()
        exp = pl.run(kg, out=folder / "exp", progress=False)
        wall, cpu = time.perf_counter() - t1, _cpu() - c1
        first = wall if first is None else first
        stages = exp.stages
        tables.append(
            Table(
                ["stage", "seconds"],
                [
                    [r.stage + (" (reused)" if r.skipped else ""), float(r.seconds)]
                    for r in stages.itertuples(index=False)
                ]
                + [["the whole call (wall)", wall], ["its CPU seconds", cpu]],
                title="The first call" if attempt == 0 else "The same call again",
                formats={"seconds": ".1f"},
            )
        )
        if attempt == 0:
            t = exp.table.round(1)
            tables.append(
                Table(
                    ["method", *map(str, t.columns)],
                    [[str(i), *row] for i, row in zip(t.index, t.values.tolist(), strict=True)],
                    title="The table it makes (x100)",
                )
            )
    notes.append(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}.")
    return Result(tables, {"wall_s": first}, notes)
