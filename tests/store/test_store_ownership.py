"""Ownership before trust: a store folder or file of another OS user, a symlink
where the store keeps its folder or a file, and a pid in server.json that is not the server are refused or
left alone: no password goes to them, nothing of theirs is used, nothing of a victim's is written, no decoy
process is signalled. Real servers; files of another owner made with os.chown where the test runs as root."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pipeline.store import auth, embedded, open_store
from pipeline.store.private import UnsafeStorePath
from tests.cli_checks import invoke, one_line_error

NOBODY = 65534


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PIPELINE_STORE", raising=False)
    yield tmp_path / "home"
    try:
        embedded.stop()
    except UnsafeStorePath:
        pass


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make files of another owner (os.chown)")


# ------------------------------------------------------------------------------------------ another owner
def test_a_store_folder_made_by_another_user_with_planted_passwords_is_refused(home):
    needs_root()
    folder = home / "store"
    folder.mkdir(parents=True)
    planted = {"user": "pipeline", "password": "planted", "admin_user": "admin", "admin_password": "planted"}
    (folder / auth.CREDENTIALS_FILE).write_text(json.dumps(planted))
    os.chmod(folder / auth.CREDENTIALS_FILE, 0o600)
    for p in (folder, folder / auth.CREDENTIALS_FILE):
        os.chown(p, NOBODY, NOBODY)
    with pytest.raises(UnsafeStorePath, match="owned by uid 65534"):
        embedded.start()
    one_line_error(invoke("store", "start"), str(folder), "owned by uid 65534")
    one_line_error(invoke("cypher", "RETURN 1"), "owned by uid 65534")
    one_line_error(invoke("store", "status"), "owned by uid 65534")  # not "not running" (item 16)
    assert os.stat(folder).st_mode & 0o777 == 0o755  # not chmodded, nothing started there
    assert sorted(os.listdir(folder)) == [auth.CREDENTIALS_FILE]


@pytest.mark.parametrize("name", [auth.CREDENTIALS_FILE, "server.json", "port", "server.log", "appendonlydir"])
def test_a_file_of_another_user_in_the_store_folder_is_refused(home, name):
    needs_root()
    embedded.start()
    embedded.stop()
    path = home / "store" / name
    if not path.exists():
        path.write_text("{}")
    os.chown(path, NOBODY, NOBODY)
    with pytest.raises(UnsafeStorePath, match=f"{name}: owned by uid 65534"):
        embedded.start()
    os.chown(path, os.geteuid(), os.getegid())  # given back: the store starts again, its data kept
    assert embedded.start().pid > 0


# ------------------------------------------------------------------------------------------ symlinks
def test_a_symlinked_store_folder_is_refused_and_the_victim_untouched(home, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    os.chmod(victim, 0o755)
    (victim / "keep.txt").write_text("mine")
    home.mkdir()
    (home / "store").symlink_to(victim)
    one_line_error(invoke("store", "start"), "symbolic link")
    with pytest.raises(UnsafeStorePath, match="symbolic link"):
        embedded.start()
    assert os.stat(victim).st_mode & 0o777 == 0o755  # never chmodded
    assert sorted(os.listdir(victim)) == ["keep.txt"]  # no credentials, log or data written there


@pytest.mark.parametrize("name", ["server.err", "port", "server.json", auth.CREDENTIALS_FILE, "server.log"])
def test_a_symlinked_file_in_the_store_folder_is_refused_and_its_target_untouched(home, tmp_path, name):
    embedded.start()
    embedded.stop()
    victim = tmp_path / "victimfile"
    victim.write_text("precious\n")
    path = home / "store" / name
    path.unlink(missing_ok=True)
    path.symlink_to(victim)
    with pytest.raises(UnsafeStorePath, match="symbolic link"):
        embedded.start()
    one_line_error(invoke("store", "start"), name, "symbolic link")
    assert victim.read_text() == "precious\n"  # neither truncated nor overwritten


def test_an_entry_that_vanishes_during_the_check_is_no_error(tmp_path, monkeypatch):
    """A running server creates and removes temporaries in its folder (its AOF rewrite's
    temp-rewriteaof-PID.aof): one listed and gone before its stat is skipped, not reported as missing (a CI
    run's fourth simultaneous `store start` failed with "temp-rewriteaof-32007.aof: No such file or
    directory"); what is there is still checked."""
    from pipeline.store import private

    folder = private.private_folder(tmp_path / "store")
    (folder / "sub").mkdir(mode=0o700)
    listdir = os.listdir

    def with_ghosts(fd):
        return [*listdir(fd), "temp-rewriteaof-1.aof", "gone-folder"]

    monkeypatch.setattr(private.os, "listdir", with_ghosts)
    assert private.private_folder(folder) == folder
    (folder / "sub" / "planted").symlink_to(tmp_path)
    with pytest.raises(UnsafeStorePath, match="symbolic link"):
        private.private_folder(folder)


# ------------------------------------------------------------------------------------------ stale pids
class Listener:
    """Another program on the remembered port: records every byte a client sends it."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.received = b""
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.settimeout(0.5)
            try:
                while chunk := conn.recv(4096):
                    self.received += chunk
                    conn.sendall(b"-ERR who are you\r\n")
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_a_decoy_pid_is_never_signalled_and_its_port_never_gets_the_password(home, monkeypatch):
    # (a credentials file named by the user for URIs without a password is theirs to send: not this case)
    monkeypatch.delenv("PIPELINE_STORE_CREDENTIALS", raising=False)
    info = embedded.start()
    creds = embedded.credentials(info)
    os.kill(info.pid, 9)
    while embedded.pid_alive(info.pid):
        embedded._reap(info.pid)
    decoy = subprocess.Popen(["sleep", "300"])
    listener = Listener(info.port)
    try:
        record = json.dumps({**json.loads((home / "store" / "server.json").read_text()), "pid": decoy.pid})
        (home / "store" / "server.json").write_text(record)
        assert embedded.status() is None
        status = invoke("store", "status").stdout
        assert status.startswith("not running")
        assert f"names pid {decoy.pid}, which is not its server: it is another program: `sleep 300`" in status
        assert invoke("store", "stop").stdout.strip() == "not running"
        assert decoy.poll() is None  # the decoy survives `store stop`
        # the URI `store status` printed before the crash: no password for whoever listens there now
        by_uri = invoke("cypher", "RETURN 1", "--store", f"falkordb://127.0.0.1:{info.port}")
        assert by_uri.exit_code == 2 and "Traceback" not in by_uri.output
        (home / "store" / "server.json").write_text(record)  # (`store stop` forgot it)
        ran = invoke("cypher", "RETURN 1 AS one", "--json")  # starts a new server elsewhere
        assert ran.exit_code == 0, ran.output and json.loads(ran.stdout) == [{"one": 1}]
        assert "had ended" not in ran.stderr and "which is not its server" in ran.stderr, ran.stderr
        assert "`sleep 300`, started " in ran.stderr and "the record was stale" in ran.stderr
        assert creds.password.encode() not in listener.received
        assert creds.admin_password.encode() not in listener.received
        assert b"AUTH" not in listener.received.upper()
        assert embedded.status().port != info.port
        assert decoy.poll() is None
    finally:
        listener.close()
        decoy.kill()
        decoy.wait()


def test_a_server_of_another_folder_is_not_taken_for_ours(home, tmp_path):
    """A live redis-server of this user, but working in another folder (another home's store): not ours."""
    other, proc = embedded.launch(tmp_path / "other", persist=False)
    try:
        folder = home / "store"
        auth.ensure(folder)
        (folder / "server.json").write_text(json.dumps({**other.__dict__, "data_dir": str(folder)}))
        assert not embedded.is_our_server(embedded._recorded(folder))
        assert embedded.stranger(embedded._recorded(folder)).startswith("it is a server of another folder: `")
        assert embedded.stop() is False and proc.poll() is None  # not signalled
        started = embedded.start()
        assert started.pid != other.pid
    finally:
        embedded.shutdown(other)
        proc.wait(30)


def test_a_record_naming_pid_1_says_what_runs_there_and_starts_the_server(home):
    """The init process is alive and never the store's server: the record is stale, not "had ended"."""
    info = embedded.start()
    embedded.stop()
    (home / "store" / "server.json").write_text(json.dumps({**info.__dict__, "pid": 1}))
    os.chmod(home / "store" / "server.json", 0o600)
    said = embedded.stranger(embedded.ServerInfo(**{**info.__dict__, "pid": 1}))
    owner = "another program" if os.stat("/proc/1").st_uid == os.geteuid() else "another user's (uid "
    assert said.startswith(f"it is {owner}") and ", started 2" in said
    ran = invoke("cypher", "RETURN 1 AS one", "--json")
    assert ran.exit_code == 0 and json.loads(ran.stdout) == [{"one": 1}], ran.output
    assert f"names pid 1, which is not its server: {said}; the record was stale" in ran.stderr
    assert embedded.status().pid not in (1, info.pid)
    assert embedded.stranger(embedded.ServerInfo(**{**info.__dict__, "pid": info.pid})) is None  # it ended


@pytest.mark.parametrize("record", ["pid 1", "removed"])
def test_a_running_server_its_record_lost_is_recorded_again_never_doubled(home, record):
    """The record edited to name pid 1, or removed, while the folder's server runs: the next command
    finds that server (its working folder, its listening port), records it again and uses it; a second
    server beside it would append to the same file. `store stop` stops it all the same."""
    info = embedded.start()
    path = home / "store" / "server.json"
    if record == "removed":
        path.unlink()
    else:
        path.write_text(json.dumps({**info.__dict__, "pid": 1}))
    assert invoke("store", "status").stdout.startswith(f"running: {info.uri} (pid {info.pid}")
    ran = invoke("cypher", "RETURN 1 AS one", "--json")
    assert ran.exit_code == 0 and json.loads(ran.stdout) == [{"one": 1}], ran.output
    said = "is missing" if record == "removed" else "names pid 1, which is not its server: it is "
    assert said in ran.stderr and f"its server runs as pid {info.pid} (port {info.port}): recorded it again" in ran.stderr
    assert embedded._recorded(home / "store") == info and embedded.status() == info
    assert [pid for pid in _redis_pids() if os.readlink(f"/proc/{pid}/cwd") == str(home / "store")] == [info.pid]
    path.unlink()
    assert embedded.stop() is True  # the unrecorded server is stopped, not left running
    for _ in range(300):  # (a child of this process: a zombie until reaped; SHUTDOWN ends it soon after)
        embedded._reap(info.pid)
        if not embedded.pid_alive(info.pid):
            break
        time.sleep(0.1)
    assert not embedded.pid_alive(info.pid)


def _redis_pids() -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == "redis-server":
                    out.append(int(entry))
            except OSError:
                pass
    return out


# ------------------------------------------------------------------------------------------ as nobody
def _runuser() -> str:
    runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
    if os.geteuid() != 0 or runuser is None:
        pytest.skip("needs root and runuser to act as a second OS user")
    return runuser


def test_another_user_planting_the_store_in_a_shared_home_gains_nothing(tmp_path, monkeypatch):
    """The issue's case end to end: `nobody` pre-creates PIPELINE_HOME/store with its own passwords in a
    home both can write to; our start refuses it, so nobody's AUTH admin <planted> reaches no server."""
    runuser = _runuser()
    shared = Path(tempfile_dir())
    try:
        home = shared / "home"
        home.mkdir()
        os.chmod(home, 0o777)
        monkeypatch.setenv("PIPELINE_HOME", str(home))
        monkeypatch.delenv("PIPELINE_STORE", raising=False)
        plant = (
            f"import json, os; os.makedirs('{home}/store', 0o700); "
            f"open('{home}/store/credentials.json', 'w').write(json.dumps({{'user': 'pipeline', 'password': 'p', "
            f"'admin_user': 'admin', 'admin_password': 'planted'}})); os.chmod('{home}/store/credentials.json', 0o600)"
        )
        res = subprocess.run([runuser, "-u", "nobody", "--", "/usr/bin/python3", "-c", plant],
                             capture_output=True, text=True, timeout=60, cwd="/tmp")
        if res.returncode != 0:
            pytest.skip(f"user nobody cannot run a system python3 here: {res.stderr[-200:]}")
        one_line_error(invoke("store", "start"), "owned by uid 65534")
        with pytest.raises(UnsafeStorePath):
            open_store()
        assert not any(p.name == "server.json" for p in (home / "store").iterdir())
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def tempfile_dir() -> str:
    import tempfile

    d = tempfile.mkdtemp(prefix="owner-", dir="/tmp")
    os.chmod(d, 0o755)
    return d
