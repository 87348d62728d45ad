"""What a store reports as written survives a kill -9 of the embedded server: the server's append-only
file has every acknowledged write (tests/store/test_faults_store.py kills it mid-work), so a store closed,
a lock released or a process that never closed its store all find their writes after a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.store import embedded, open_store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path))
    monkeypatch.delenv("PIPELINE_STORE", raising=False)
    yield tmp_path
    embedded.stop()


def kill_server() -> None:
    """kill -9 the embedded server: no SHUTDOWN SAVE, only what was saved before survives."""
    info = embedded.status()
    assert info is not None
    os.kill(info.pid, signal.SIGKILL)
    while embedded._alive(info.pid):
        embedded._reap(info.pid)
    assert embedded.status() is None


def count(label: str) -> int:
    with open_store() as store:  # restarts the server from its saved data
        return store.run(f"MATCH (n:{label}) RETURN count(n) AS n")[0]["n"]


def test_writes_survive_a_kill_once_the_store_is_closed(home):
    with open_store() as store:
        store.run("CREATE (:Written {i: 0})")
        store.run_batches("UNWIND $rows AS row CREATE (:Written {i: row})", list(range(1, 600)), 100)
    kill_server()
    assert count("Written") == 600


def test_writes_under_a_lock_are_saved_when_the_lock_is_released(home):
    store = open_store()
    try:
        with store.lock("answers", purpose="write-back"):
            store.run("UNWIND range(1, 3) AS i CREATE (:Answer {i: i})")
        kill_server()  # the store is still open: the lock's release saved the writes
    finally:
        try:
            store.close()
        except Exception:  # noqa: BLE001 - the server is gone; only the saved state matters here
            pass
    assert count("Answer") == 3


def test_a_process_that_never_closes_its_store_still_saves_on_exit(home):
    code = "from pipeline.store import open_store\nopen_store().run('CREATE (:Forgotten {v: 1})')\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True, timeout=120)
    kill_server()
    assert count("Forgotten") == 1
