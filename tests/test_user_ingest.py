"""Concurrent writers: a temporary of a live writer is never removed by another writer of the
same destination (only a dead writer's are), and two `pipeline ingest NAME --from FILE` of one user KG at
the same time both end cleanly: one records it, the other waits and finds it done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pipeline.core import atomic
from tests.store.test_user_kg import toy_kg

REPO = Path(__file__).resolve().parents[1]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "PIPELINE_HOME": str(home), "PYTHONPATH": str(REPO)}


def test_only_dead_writers_temporaries_are_removed(tmp_path: Path) -> None:
    dest = tmp_path / "out.json"
    live = Path(atomic.temp_dir(dest))  # this process: alive
    assert live.name.startswith(f".out.json.p{os.getpid()}-")
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(done.stdout)
    dead = tmp_path / f".out.json.p{dead_pid}-1.abcd.part"
    dead.mkdir()
    recycled = tmp_path / f".out.json.p{os.getpid()}-1.efgh.part"  # our pid, another start time
    recycled.write_text("x")
    legacy = tmp_path / ".out.json.k3j9x.part"  # written before writers were recorded
    legacy.write_text("x")
    assert atomic.remove_stale(dest) == 3
    assert live.is_dir() and not dead.exists() and not recycled.exists() and not legacy.exists()
    atomic.write_json(dest, {"a": 1})  # a write beside the live temporary leaves it alone
    assert live.is_dir() and json.loads(dest.read_text()) == {"a": 1}


def test_a_second_process_waits_for_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / ".x.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pipeline.core.atomic import exclusive\n"
         f"with exclusive({str(lock)!r}, 'x'):\n    print('held', flush=True); time.sleep(1.5)"],
        stdout=subprocess.PIPE, text=True, env=_env(tmp_path),
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    t0 = time.perf_counter()
    waiter = subprocess.run(
        [sys.executable, "-c", f"from pipeline.core.atomic import exclusive\nwith exclusive({str(lock)!r}, 'the test lock'):\n    pass"],
        capture_output=True, text=True, env=_env(tmp_path),
    )
    assert holder.wait() == 0 and waiter.returncode == 0
    assert time.perf_counter() - t0 > 0.5  # it did wait for the holder
    assert waiter.stderr.startswith("waiting for the test lock")


def test_two_concurrent_ingests_of_one_user_kg_both_end_cleanly(fresh_store, tmp_path: Path) -> None:
    home = tmp_path / "home"
    f = tmp_path / "kg.tsv"
    f.write_text(toy_kg())
    cmd = [sys.executable, "-m", "pipeline.cli", "ingest", "twice", "--from", str(f), "--store", fresh_store.uri,
           "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(home))
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    reports = [json.loads(out) for out, _ in outs]
    assert sorted(r["unchanged"] for r in reports) == [False, True]  # one recorded it, one found it done
    assert reports[0]["checksum"] == reports[1]["checksum"]
    record = home / "datasets" / "twice"
    assert (record / "spec.json").is_file()
    leftovers = [p.name for p in (home / "datasets").iterdir() if p.name.endswith(atomic.PART)]
    assert leftovers == []
