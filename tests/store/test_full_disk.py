"""A write is acknowledged only when it is durable (design section 4): with the store's home on a full
disk, Redis answered "OK" to a write it could not append to its file, and a kill -9 then lost it (2,000
acknowledged nodes gone). Now a write is refused while the disk is full, one that fills it anyway is not
acknowledged (its server is stopped, so nothing of it remains), reads go on, and the next command names the
disk. Real servers on a small tmpfs (needs root to mount one; skipped otherwise)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from pipeline.core.errors import StoreUnavailable
from pipeline.store import embedded, open_store, recovery
from tests.cli_checks import invoke, one_line_error

PAD = "x" * 3000  # a statement's parameter: its log entry needs a new page of the file


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    """PIPELINE_HOME on a 64 MB tmpfs of its own (unmounted afterwards); yields the mount point."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small file system")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    monkeypatch.setenv("PIPELINE_HOME", str(mnt / "home"))
    monkeypatch.setenv(embedded.MEMORY_ENV, "1")
    monkeypatch.delenv("PIPELINE_STORE", raising=False)
    try:
        yield mnt
    finally:
        info = embedded.status()
        if info is not None:
            os.kill(info.pid, signal.SIGKILL)
            while embedded.pid_alive(info.pid):
                embedded._reap(info.pid)
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(mnt: Path) -> Path:
    filler = mnt / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass
    return filler


def kill_server() -> None:
    info = embedded.status()
    assert info is not None
    os.kill(info.pid, signal.SIGKILL)
    while embedded.pid_alive(info.pid):
        embedded._reap(info.pid)


def count(label: str) -> int:
    return json.loads(invoke("cypher", f"MATCH (n:{label}) RETURN count(n) AS n", "--json").stdout)[0]["n"]


def test_a_write_on_a_full_disk_is_refused_in_one_line_and_reads_go_on(small_disk):
    assert invoke("cypher", "CREATE (:Before {v: 1})").exit_code == 0
    filler = fill(small_disk)
    one_line_error(invoke("cypher", "UNWIND range(1, 20000) AS i CREATE (:Fill {i: i})"),
                   "is full", "nothing was written", str(embedded.store_dir()))
    assert count("Before") == 1  # reads are answered meanwhile
    kill_server()
    filler.unlink()
    assert (count("Fill"), count("Before")) == (0, 1)
    assert invoke("cypher", "CREATE (:After)").exit_code == 0  # space again: writes again


def test_no_write_is_acknowledged_that_a_kill_9_then_loses(small_disk, monkeypatch):
    """The disk fills between the check and the write (another program took the space): each write is
    acknowledged only once it is in the append-only file; the one that is not stops the server."""
    monkeypatch.setattr(recovery, "MIN_FREE_BYTES", -(1 << 30))  # no check before: only the one after
    store = open_store()
    store.run("CREATE (:Before {v: 1})")
    filler = fill(small_disk)
    acknowledged, refused = 0, None
    for _ in range(50):
        try:
            store.run("UNWIND range(1, 100) AS i CREATE (:Fill {i: i, pad: $p})", {"p": PAD})
            acknowledged += 1
        except StoreUnavailable as exc:
            refused = str(exc)
            break
    assert refused is not None and "nothing of this write was kept" in refused and "\n" not in refused
    store._disconnect()
    assert embedded.status() is None  # stopped by the refused write; a kill -9 can lose nothing more
    filler.unlink()
    assert count("Fill") == 100 * acknowledged and count("Before") == 1


def test_stats_and_every_stored_read_are_answered_on_a_full_disk(small_disk):
    """`pipeline stats` was refused like a write: its statements name ``$dataset``, and the old test for a
    write found "SET " in "$DATASET RETURN". Now a read is told by its clauses, and it is answered."""
    from pipeline.store.ingest import ingest
    from tests.store.kgs import make_kg

    with open_store() as store:
        ingest(make_kg("tiny"), store, progress=False)
    fill(small_disk)
    result = invoke("stats", "tiny", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["facts"] == {"train": 3, "valid": 4, "test": 6}
    one_line_error(invoke("cypher", "MATCH (n:Entity) SET n.seen = 1"), "is full", "nothing was written")


def test_a_stopped_server_on_a_full_disk_is_one_line_and_no_server_is_left_unrecorded(small_disk):
    """A server cannot record itself on a full disk: the start is refused in one line, and the process
    spawned before the record failed is gone (an unrecorded one would get a second server beside it)."""
    assert invoke("cypher", "CREATE (:Before {v: 1})").exit_code == 0
    kill_server()
    filler = fill(small_disk)
    folder = embedded.store_dir()
    one_line_error(invoke("stats", "tiny"), "is full", "cannot be started", str(folder))
    assert not [pid for pid in _servers() if os.readlink(f"/proc/{pid}/cwd") == str(folder)]
    filler.unlink()
    assert count("Before") == 1  # space again: started again, nothing lost


def _servers() -> list[int]:
    """The pids of the redis-server processes on this machine (by their executable's name)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == "redis-server":
                    found.append(int(entry))
            except OSError:
                pass
    return found
