"""The store contract (tests/cases.py ``StoreCase``) on every registered backend, each against a real server:

- ``embedded``: the project's own FalkorDB server, started on demand under a PIPELINE_HOME of its own;
- ``falkordb``: the session's FalkorDB server through ``falkordb://`` URIs (password from
  PIPELINE_STORE_CREDENTIALS, as for any FalkorDB launched elsewhere);
- ``neo4j``: the official neo4j driver over Bolt. No Neo4j 5 server can run here (neither the server
  nor a JVM build of it is on the registries this machine reaches), so its Bolt server is FalkorDB's
  experimental Bolt port (tests/conftest.py ``bolt_server``), the one Bolt server that can.
"""

from __future__ import annotations

import os
import uuid

import pytest

from pipeline.store import open_store
from pipeline.store.embedded import free_port
from tests.cases import StoreCase


@pytest.fixture(scope="module")
def embedded_home(tmp_path_factory: pytest.TempPathFactory):
    """A PIPELINE_HOME of its own for the embedded server these tests start (stopped afterwards)."""
    from pipeline.store import embedded

    home = tmp_path_factory.mktemp("embedded_contract_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PIPELINE_HOME", str(home))
        mp.delenv("PIPELINE_STORE", raising=False)
        try:
            yield home
        finally:
            embedded.stop(home)


class TestEmbeddedStore(StoreCase):
    name = "embedded"
    unreachable_reason = "the embedded server is started on demand: `embedded` is never unreachable"

    @pytest.fixture
    def store(self, embedded_home):
        with open_store("embedded", graph=f"contract_{uuid.uuid4().hex[:8]}") as store:
            try:
                yield store
            finally:
                store.drop()


class TestFalkorDBStore(StoreCase):
    name = "falkordb"
    unreachable_uri = f"falkordb://127.0.0.1:{free_port()}"

    @pytest.fixture
    def store(self, falkordb_store):
        port = falkordb_store.server.port
        with open_store(f"falkordb://127.0.0.1:{port}/contract_{uuid.uuid4().hex[:8]}") as store:
            try:
                yield store
            finally:
                store.drop()


@pytest.mark.neo4j
class TestNeo4jStore(StoreCase):
    name = "neo4j"
    unreachable_uri = f"bolt://127.0.0.1:{free_port()}"
    # FalkorDB's Bolt port formats string parameters into the query without escaping quotes ("An unknown
    # error occurred" on the default text); Neo4j binds them. The text still holds Cypher, unquoted.
    text_parameter = "}) DETACH DELETE n //"

    @pytest.fixture
    def store(self, bolt_store):
        return bolt_store

    @pytest.fixture(autouse=True)
    def _no_auth(self, monkeypatch):
        monkeypatch.setenv("NEO4J_AUTH", os.environ.get("NEO4J_AUTH", "none"))
