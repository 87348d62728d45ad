"""No command waits on the store without a bound: a server that takes connections and answers nothing
(stopped with SIGSTOP, deadlocked) is named in one line within the bound, the embedded one is killed and
started again from its append-only file (nothing acknowledged lost), and ``store status`` tells loading,
busy, suspended, hung and down apart. The bound is made short here (3 s of silence instead of 15 s); a
safety timer continues a stopped server after a minute, so code without the bound fails instead of
hanging the suite."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.core.errors import StoreUnavailable
from pipeline.store import embedded, health, liveness, open_store
from tests.cli_checks import invoke

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def short_bound(monkeypatch):
    """A server silent for 3 s (probed every 0.5 s) has stopped answering."""
    monkeypatch.setattr(liveness, "HUNG_AFTER_S", 3.0)
    monkeypatch.setattr(liveness, "PROBE_AFTER_S", 0.5)
    monkeypatch.setattr(liveness, "PROBE_EVERY_S", 0.5)
    monkeypatch.setattr(liveness, "PROBE_TIMEOUT_S", 0.5)


class Stopped:
    """SIGSTOP a process; SIGCONT it when the scope ends or after ``safety_s`` at the latest."""

    def __init__(self, pid: int, safety_s: float = 60.0) -> None:
        self.pid = pid
        self.timer = threading.Timer(safety_s, self.cont)

    def cont(self) -> None:
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def __enter__(self) -> Stopped:
        os.kill(self.pid, signal.SIGSTOP)
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()
        self.cont()


def kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    while embedded.pid_alive(pid):
        embedded._reap(pid)


# ------------------------------------------------------------------------------------------ a call in flight
def test_a_call_to_a_stopped_server_ends_within_its_bound_and_the_store_comes_back(home, short_bound):
    store = open_store()
    store.run("CREATE (:Kept {v: 1})")
    first = embedded.status()
    with Stopped(first.pid):
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailable) as err:
            store.run("MATCH (k:Kept) RETURN k.v AS v")
        elapsed = time.monotonic() - t0
    line = str(err.value)
    assert elapsed < 30 and "\n" not in line
    assert f"the store (pid {first.pid}) stopped answering" in line and "stopped by a signal" in line
    now = embedded.status()
    assert now is not None and now.pid != first.pid and f"pid {now.pid}" in line  # restarted, and said so
    assert store.run("MATCH (k:Kept) RETURN k.v AS v") == [{"v": 1}]  # the same Store follows it, nothing lost
    store.close()


def test_a_server_continued_after_a_stop_answers_at_once_and_is_kept(home, short_bound):
    with open_store() as store:
        store.run("CREATE (:Kept {v: 2})")
        first = embedded.status()
        with Stopped(first.pid):
            time.sleep(1.0)  # stopped for less than the bound
        t0 = time.monotonic()
        assert store.run("MATCH (k:Kept) RETURN k.v AS v") == [{"v": 2}]
        assert time.monotonic() - t0 < 10 and embedded.status().pid == first.pid


# ------------------------------------------------------------------------------------------ the next command
def test_the_next_command_restarts_a_stopped_server_and_says_so(home, short_bound):
    assert invoke("cypher", "CREATE (:Kept {v: 3})").exit_code == 0
    first = embedded.status()
    with Stopped(first.pid):
        t0 = time.monotonic()
        done = invoke("cypher", "MATCH (k:Kept) RETURN k.v AS v", "--json")
        elapsed = time.monotonic() - t0
    assert done.exit_code == 0 and json.loads(done.stdout) == [{"v": 3}], done.output
    assert elapsed < 30
    assert f"the store (pid {first.pid}) stopped answering" in done.stderr and "started it again" in done.stderr
    assert embedded.status().pid != first.pid


def test_a_hung_server_is_told_from_a_stopped_one_and_restarted(home, short_bound, monkeypatch):
    """A deadlocked server: it takes connections, and its main thread waits (state S) without running.
    Made here by a stopped server whose main thread is reported as waiting."""
    assert invoke("cypher", "CREATE (:Kept {v: 4})").exit_code == 0
    first = embedded.status()
    real = health.main_thread
    monkeypatch.setattr(health, "main_thread",
                        lambda pid: health.Activity("S", 12345) if pid == first.pid else real(pid))
    with Stopped(first.pid):
        shown = embedded.server_state()
        assert (shown.state, shown.info.pid) == ("hung", first.pid) and "deadlocked" in shown.note
        done = invoke("cypher", "MATCH (k:Kept) RETURN k.v AS v", "--json")
    assert done.exit_code == 0 and json.loads(done.stdout) == [{"v": 4}]
    assert "deadlocked" in done.stderr and embedded.status().pid != first.pid


# ------------------------------------------------------------------------------------------ status
def test_status_tells_suspended_running_and_down_and_why_the_last_server_ended(home):
    info = embedded.start()
    with Stopped(info.pid):
        shown = invoke("store", "status")
        doc = json.loads(invoke("store", "status", "--json").stdout)
    assert shown.stdout.startswith(f"suspended: {info.uri} (pid {info.pid}") and "SIGSTOP" in shown.stdout
    assert doc["state"] == "suspended" and doc["running"] is False
    assert invoke("store", "status").stdout.startswith("running:")
    kill9(info.pid)
    down = invoke("store", "status").stdout
    assert down.startswith("not running") and f"its last server (pid {info.pid}) ended" in down
    assert "killed without a word in its log" in down


def test_the_log_tells_why_a_server_ended():
    pid = 4242
    oom = [f"{pid}:M 28 Nov 2026 13:37:14.728 # Out Of Memory allocating 22561046540 bytes!"]
    assert "memory cap of 1.0 GiB (X) (the allocation that failed: 22,561,046,540 bytes)" in health.ended_because(
        oom, "1.0 GiB (X)")
    crash = [f"{pid}:M x # === REDIS BUG REPORT START: Cut & paste starting from here ==="]
    assert "crashed" in health.ended_because(crash, "")
    aof = [f"{pid}:M x # Short write while writing to the AOF file: (nwritten=712, expected=3117)"]
    assert "append-only file" in health.ended_because(aof, "")
    assert "kill -9" in health.ended_because([f"{pid}:M x * Ready to accept connections tcp"], "")
    text = "\n".join([f"{pid}:M a", f"{pid + 1}:M b", f"{pid}:C c", "no prefix"])
    assert health.log_lines(text, pid) == [f"{pid}:M a", f"{pid}:C c"]


def test_a_processs_main_thread_is_read_as_waiting_stopped_or_running():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        assert health.sample(sleeper.pid, 0.5) == "idle"
        assert health.sample(spinner.pid, 0.5) == "running"
        os.kill(sleeper.pid, signal.SIGSTOP)
        assert health.sample(sleeper.pid, 0.1) == "suspended"
    finally:
        for p in (sleeper, spinner):
            p.kill()
            p.wait()


# ------------------------------------------------------------------------------------------ never twice
class _CountingServer:
    """Speaks just enough of the Redis protocol for a FalkorDB client to connect; counts the graph
    statements it receives and drops the connection on each without a reply (a lost reply)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.statements = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while True:
                    command, buf = _parse(buf)
                    if command is None:
                        break
                    name = command[0].upper()
                    if name.startswith(b"GRAPH."):
                        self.statements += 1
                        return  # no reply: the connection drops
                    if name == b"INFO":
                        body = b"# Server\r\nredis_mode:standalone\r\n"
                        conn.sendall(b"$%d\r\n%s\r\n" % (len(body), body))
                    elif name == b"PING":
                        conn.sendall(b"+PONG\r\n")
                    else:
                        conn.sendall(b"+OK\r\n")

    def close(self) -> None:
        self.sock.close()


def _parse(buf: bytes) -> tuple[list[bytes] | None, bytes]:
    """One RESP array of bulk strings from the front of ``buf`` (None when incomplete)."""
    if not buf.startswith(b"*") or b"\r\n" not in buf:
        return None, buf
    head, rest = buf.split(b"\r\n", 1)
    items = []
    for _ in range(int(head[1:])):
        if b"\r\n" not in rest:
            return None, buf
        size, rest = rest.split(b"\r\n", 1)
        n = int(size[1:])
        if len(rest) < n + 2:
            return None, buf
        items.append(rest[:n])
        rest = rest[n + 2 :]
    return items, rest


def test_a_statement_whose_reply_is_lost_is_never_sent_again():
    """redis-py re-sent a command after a lost reply (the store's retry of one reconnect): a write could
    run twice. Now it is sent once and the loss is one line that says its fate is not known."""
    from pipeline.store.falkordb_store import FalkorDBStore

    server = _CountingServer()
    try:
        store = FalkorDBStore("127.0.0.1", server.port)
        with pytest.raises(StoreUnavailable, match="whether it was applied is not known"):
            store.run("CREATE (:Once)")
        assert server.statements == 1
        store.close()
    finally:
        server.close()


# ------------------------------------------------------------------------------------------ Bolt
@pytest.mark.neo4j
def test_a_bolt_call_to_a_stopped_server_ends_within_its_bound(tmp_path, monkeypatch, short_bound):
    from tests.conftest import launch_bolt_server

    info, proc = launch_bolt_server(tmp_path / "bolt")
    monkeypatch.setenv("NEO4J_AUTH", "none")
    try:
        store = open_store(f"bolt://127.0.0.1:{info.bolt_port}")
        assert store.run("RETURN 1 AS one") == [{"one": 1}]
        with Stopped(proc.pid):
            t0 = time.monotonic()
            with pytest.raises(StoreUnavailable, match="stopped answering"):
                store.run("RETURN 2 AS two")
            assert time.monotonic() - t0 < 30
    finally:
        proc.kill()
        proc.wait()
