"""The embedded FalkorDB server: start/status/stop under PIPELINE_HOME, data persisted across restarts,
and ``open_store("embedded")`` starting it on demand."""

from __future__ import annotations

import os

import pytest

from pipeline.store import embedded, open_store


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path))
    monkeypatch.delenv("PIPELINE_STORE", raising=False)
    yield tmp_path
    embedded.stop()  # never leave a server behind, whatever the test did


def test_start_status_stop_and_persistence(home):
    assert embedded.status() is None
    with open_store("embedded", graph="kept") as store:  # starts the server on demand
        store.run("CREATE (:Kept {v: $v})", {"v": "survives a restart"})
    info = embedded.status()
    assert info is not None and info.host == "127.0.0.1" and (home / "store" / "server.json").exists()
    assert embedded.start() == info  # already running: the same server
    assert embedded.stop() is True
    assert embedded.status() is None and not os.path.exists(home / "store" / "server.json")
    assert embedded.stop() is False

    again = embedded.start()
    assert again.pid != info.pid
    with open_store(graph="kept") as store:  # "embedded" is the default URI
        assert store.graph == "kept"
        assert store.run("MATCH (k:Kept) RETURN k.v AS v") == [{"v": "survives a restart"}]


def test_stale_server_file_is_not_a_running_server(home):
    folder = home / "store"
    folder.mkdir()
    (folder / "server.json").write_text(
        '{"pid": 999999, "host": "127.0.0.1", "port": 1, "bolt_port": null, "data_dir": "x"}'
    )
    assert embedded.status() is None
    assert embedded.stop() is False and not (folder / "server.json").exists()


def test_ingest_is_durable_even_if_the_server_dies(home):
    import signal

    from pipeline.store.ingest import ingest
    from pipeline.store.stats import dataset_stats
    from tests.store.kgs import make_kg

    with open_store() as store:
        ingest(make_kg("durable"), store, progress=False)  # ends with a checkpoint (synchronous SAVE)
    info = embedded.status()
    os.kill(info.pid, signal.SIGKILL)  # no SHUTDOWN SAVE: only the checkpoint can have kept the data
    while embedded._alive(info.pid):
        embedded._reap(info.pid)
    assert embedded.status() is None
    with open_store() as store:
        assert dataset_stats(store, "durable").facts == {"train": 3, "valid": 4, "test": 6}
