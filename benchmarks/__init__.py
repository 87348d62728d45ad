"""The benchmark suite: named benchmarks, each with its goals, run by one runner that writes the JSON the
documentation's tables are generated from.

    python -m benchmarks list
    python -m benchmarks run engine explain --quick --json /tmp/b.json
    python -m benchmarks run cold-answer --adjacency EXPORT --queries TEST.parquet --label ppi5k-first

Why a small harness of our own rather than pytest-benchmark or asv: what these benchmarks measure is rarely
one function timed in a loop. Most run fresh processes as a user meets them (``pipeline answer`` in a new
interpreter, a Jupyter kernel, a store killed with ``kill -9``), report many figures per run (queries/s per
query type, peak memory of a process tree, seconds per stage) and hold them against goals in several units
(q/s, seconds, MiB, counts of lost writes). pytest-benchmark times a callable's repetitions and stores its
own statistics; asv builds an environment per commit and keeps its own result database, neither of which
works offline on a lent GPU machine for 15 minutes. The harness is ~600 lines (harness.py, render.py,
__main__.py): a registry of named functions with keyword options and goals, the machine recorded with every
run, and one JSON file merged per benchmark, rendered by the same code that prints a run's result.

Each module holds the benchmarks of one area; ``processes.py`` and ``queries.py`` are shared helpers.
"""
