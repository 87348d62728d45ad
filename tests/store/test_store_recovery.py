"""A store that comes back: after a crash the embedded server replays its append-only
file before it answers; starting waits for that with a progress line, never signals the loading server,
and a writer's checkpoint compacts the log so the next replay is short. Real servers under throw-away
homes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.store import embedded, open_store

REPO = Path(__file__).resolve().parents[2]
# replicated into the log as the statement itself (not as its effects) and ~0.2 s to run: a log of a
# dozen of them replays for seconds, as a crashed write-back's does for minutes
SLOW_WRITE = (
    "UNWIND range(1, 2000) AS x MERGE (n:N {k: x % 500}) SET n.v = x + $i "
    "CREATE (n)-[:R {w: x}]->(:M {i: $i, x: x})"
)


def kill_server() -> embedded.ServerInfo:
    info = embedded.status()
    assert info is not None
    os.kill(info.pid, signal.SIGKILL)
    while embedded.pid_alive(info.pid):
        embedded._reap(info.pid)
    return info


def slow_log(n: int = 12) -> None:
    with open_store() as store:
        for i in range(n):
            store.run(SLOW_WRITE, {"i": i})
    log = next((embedded.store_dir() / embedded.AOF_DIR).glob("*.incr.aof")).read_bytes()
    assert log.count(b"GRAPH.QUERY") >= n  # the statements themselves: replayed one by one


def test_a_store_replaying_a_long_log_is_waited_for_and_never_signalled(home, monkeypatch, capfd):
    slow_log()
    dead = kill_server()
    # the old start gave a new server 30 s to answer PING, then signalled it (a 20 MB log took
    # 31 s): here a server that does not answer within 0.3 s while it replays seconds of statements
    monkeypatch.setattr(embedded, "START_WAIT_S", 0.3)
    info, started = embedded.ensure_running()
    assert started and info.pid != dead.pid
    assert "is loading its append-only file" in capfd.readouterr().err  # the progress line
    log = (embedded.store_dir() / embedded.LOG_FILE).read_text()
    assert "shutdown" not in log.split(f"{info.pid}:")[-1].lower()
    with open_store() as store:
        assert store.run("MATCH (m:M) RETURN count(m) AS n") == [{"n": 12 * 2000}]


def test_a_second_command_waits_for_the_loading_server_and_status_says_loading(home, monkeypatch):
    slow_log(15)
    kill_server()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "from pipeline.store import embedded; embedded.start()"
    first = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    folder = embedded.store_dir()
    deadline = time.monotonic() + 60
    state = embedded.server_state()
    while state.state not in ("loading", "busy") and time.monotonic() < deadline:
        if state.state == "running":
            pytest.skip("the log replayed before a second command looked")
        time.sleep(0.02)
        state = embedded.server_state()
    recorded = json.loads((folder / embedded.INFO_FILE).read_text())
    assert state.info is not None and state.info.pid == recorded["pid"]  # recorded as soon as spawned
    shown = CliRunner().invoke(__import__("pipeline.cli", fromlist=["cli"]).cli, ["store", "status"])
    assert shown.stdout.startswith(("loading:", "busy:", "running:")), shown.stdout
    monkeypatch.setattr(embedded, "START_WAIT_S", 0.3)
    second = embedded.start()  # waits for the same server: never a second one on the folder
    assert second.pid == recorded["pid"]
    assert first.wait(120) == 0, first.stderr.read()
    assert embedded.status() == second


def test_a_writers_checkpoint_compacts_a_grown_log(home, monkeypatch):
    aof = lambda pattern: sorted(p.name for p in (embedded.store_dir() / embedded.AOF_DIR).glob(pattern))  # noqa: E731
    with open_store() as store:
        store.run("CREATE (:Small {v: 1})")  # below COMPACT_BYTES: left as it is
    assert aof("*.base.*") == ["appendonly.aof.1.base.rdb"]
    monkeypatch.setattr(embedded, "COMPACT_BYTES", 0)
    with open_store() as store:
        store.run("UNWIND range(1, 100) AS i CREATE (:Row {i: i})")
    deadline = time.monotonic() + 60
    while aof("*.base.*") != ["appendonly.aof.2.base.rdb"] and time.monotonic() < deadline:
        time.sleep(0.05)  # the rewrite runs in the server's background
    assert aof("*.base.*") == ["appendonly.aof.2.base.rdb"]
    kill_server()
    with open_store() as store:
        assert store.run("MATCH (r:Row) RETURN count(r) AS n") == [{"n": 100}]
        assert store.run("MATCH (s:Small) RETURN s.v AS v") == [{"v": 1}]


def test_the_server_compacts_by_itself_and_snapshots_as_rdb(home):
    info = embedded.start()
    creds = embedded.credentials(info)
    admin = embedded._client(info.host, info.port, creds.admin_user, creds.admin_password, 5)
    got = admin.config_get("auto-aof-rewrite-*") | admin.config_get("aof-use-rdb-preamble")
    assert got["aof-use-rdb-preamble"] == "yes" and got["auto-aof-rewrite-percentage"] == "100"
    assert int(got["auto-aof-rewrite-min-size"]) == 64 << 20


def test_of_four_simultaneous_starts_one_says_started(home):
    """Four `store start` at once all printed `started:`; one server is started, and the
    others say it was running already."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "from pipeline.cli import main; import sys; sys.argv = ['pipeline', 'store', 'start']; main()"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(o.startswith("started:") for o in outs) == 1, outs
    assert sum(o.startswith("already running:") for o in outs) == 3, outs
    assert len({o.split("(pid ")[1].split(",")[0] for o in outs}) == 1  # one server
