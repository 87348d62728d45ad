"""A store that comes back: how long the embedded store takes to start again after a
kill -9 that follows N write-backs of a CN15k test set's answers, with the append-only file compacted at
each writer's checkpoint (the default) and without (the log part only grows, as before).

    PIPELINE_DATA=../shared/data python benchmarks/bench_restart.py [--per-type 100] [--explain 3]
        [--rounds 10] [--work DIR]

Steps (each timed on the wall clock): CN15k into a throw-away embedded store, a test query set sampled
there (--per-type per type, alpha hybrid, beta random, seed 0), answered by SRC over the observed train
graph (an exact answer, no model needed) with the witnesses of each query's top --explain answers, then,
per configuration, in a fresh home: ingest, --rounds write-backs of those answers (each replaces the
previous one, as re-answering does), the append-only file's parts measured, kill -9 of the server, and
the restart timed until the server answers (``embedded.start``: it waits while the log replays). Prints a
markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path


def _aof(folder: Path) -> tuple[int, int]:
    d = folder / "appendonlydir"
    return (sum(p.stat().st_size for p in d.glob("*.base.*")), sum(p.stat().st_size for p in d.glob("*.incr.aof")))


def _kill(embedded) -> None:
    info = embedded.status()
    os.kill(info.pid, signal.SIGKILL)
    while embedded.pid_alive(info.pid):
        embedded._reap(info.pid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-type", type=int, default=100)
    ap.add_argument("--explain", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--work", default=None, help="Folder for the homes and files (default: a temporary one).")
    ap.add_argument("--configs", default="compact,mid,grow",
                    help="compact: kill after the last write-back; mid: kill in the middle of one more "
                         "write-back; grow: never compacted, as before compaction existed (its restart is long).")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_restart_"))
    from loaders import load
    from pipeline.core.kg import observed_graph
    from pipeline.formats.answers import read_answers
    from pipeline.formats.queryset import read_query_set
    from pipeline.formats.witnesses import read_witnesses
    from pipeline.methods.src import SRC
    from pipeline.stages.answer import AnswerOptions, answer_queries
    from pipeline.stages.options import SampleOptions
    from pipeline.stages.sample import sample_to_dir
    from pipeline.stages.writeback import write_back_to
    from pipeline.store import embedded, open_store
    from pipeline.store.ingest import ingest

    t = time.perf_counter()
    kg = load("cn15k")
    print(f"loaded cn15k in {time.perf_counter() - t:.1f} s", flush=True)

    os.environ["PIPELINE_HOME"] = str(work / "prep")
    t = time.perf_counter()
    with open_store() as store:
        ingest(kg, store, progress=False)
        ingest_s = time.perf_counter() - t
        t = time.perf_counter()
        done = sample_to_dir(kg, store, SampleOptions(out=work / "qs", split="test", types=None, per_type=args.per_type,
                             alpha="hybrid", beta="random", seed=0, browse=False, progress=False))
    sample_s = time.perf_counter() - t
    embedded.stop()
    qs = read_query_set(done["file"])
    t = time.perf_counter()
    method = SRC.over(observed_graph(kg, "train"), "cn15k", backbone="observed-train")
    report = answer_queries(qs, method, AnswerOptions(out=work / "ans", explain=args.explain, progress=False))
    answer_s = time.perf_counter() - t
    answers = read_answers(report["path"])
    witnesses = read_witnesses(report["witnesses"])[0]
    print(f"ingest {ingest_s:.1f} s, sample {len(qs)} queries {sample_s:.1f} s, answer + explain {answer_s:.1f} s",
          flush=True)

    rows = []
    configs = {"compact": ("compacted (default), killed after the last write-back", True, False),
               "mid": ("compacted (default), killed in the middle of one more write-back", True, True),
               "grow": ("never compacted (as before compaction existed), killed after the last write-back", False, False)}
    for key in args.configs.split(","):
        label, compact, mid = configs[key]
        home = work / f"home-{key}"
        shutil.rmtree(home, ignore_errors=True)
        os.environ["PIPELINE_HOME"] = str(home)
        saved = embedded.COMPACT_BYTES
        if not compact:
            embedded.COMPACT_BYTES = 1 << 62
        try:
            info = embedded.start()
            if not compact:  # the server's own rule off too, as before compaction existed
                creds = embedded.credentials(info)
                embedded._client(info.host, info.port, creds.admin_user, creds.admin_password, 10).config_set(
                    "auto-aof-rewrite-percentage", 0)
            with open_store() as store:
                ingest(kg, store, progress=False)
            t = time.perf_counter()
            written = {}
            for _ in range(args.rounds):
                written = write_back_to(None, answers, qs, witnesses=witnesses, query_nodes=True)
            wb_s = time.perf_counter() - t
            time.sleep(2)  # a compaction the last checkpoint asked for finishes in the server's background
            if mid:  # one more write-back, the server killed half way through it (half of one's time)
                import threading

                def again() -> None:
                    try:
                        write_back_to(None, answers, qs, witnesses=witnesses, query_nodes=True)
                    except Exception:  # noqa: BLE001 - the server dies under it, as intended
                        pass

                worker = threading.Thread(target=again, daemon=True)
                worker.start()
                time.sleep(wb_s / args.rounds / 2)
            base, incr = _aof(embedded.store_dir())
            _kill(embedded)
            if mid:
                worker.join(60)
            t = time.perf_counter()
            embedded.start()
            restart_s = time.perf_counter() - t
            with open_store() as store:
                n = store.run("MATCH (:Query {dataset: 'cn15k'})-[a:ANSWER]->() RETURN count(a) AS n")[0]["n"]
            embedded.stop()
        finally:
            embedded.COMPACT_BYTES = saved
        rows.append((label, wb_s, base, incr, restart_s, n, written))
        print(f"{label}: {args.rounds} write-backs {wb_s:.1f} s, AOF base {base:,} B, log {incr:,} B, "
              f"restart {restart_s:.1f} s, {n} ANSWER edges after it", flush=True)

    print()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {len(qs)} test queries ({args.per_type} per type), "
          f"each write-back {rows[0][6].get('answers')} ANSWER edges, {rows[0][6].get('witnesses')} witnesses, "
          f"{rows[0][6].get('atoms')} atoms")
    print()
    print("| append-only file | write-backs (s) | snapshot part (bytes) | log part (bytes) | restart after kill -9 (s) | answers kept |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, wb_s, base, incr, restart_s, n, _ in rows:
        print(f"| {label} | {wb_s:.1f} | {base:,} | {incr:,} | {restart_s:.1f} | {n:,} |")


if __name__ == "__main__":
    main()
