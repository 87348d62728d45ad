"""Fault injection against the embedded store (design section 4, "What the store promises"): another OS
user, other clients, kill -9 of the server mid-work, `store stop` mid-work. Each test starts its own
embedded server under a throw-away PIPELINE_HOME (the real configuration: ACL, append-only file)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import redis

from pipeline.core.errors import StoreUnavailable
from pipeline.store import auth, cypher_text, embedded, open_store

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = (
    ("FLUSHALL",), ("FLUSHDB",), ("CONFIG", "GET", "dir"), ("CONFIG", "SET", "dir", "/tmp"), ("DEBUG", "SLEEP", "0"),
    ("MODULE", "LIST"), ("SHUTDOWN",), ("SAVE",), ("BGREWRITEAOF",), ("ACL", "LIST"), ("KEYS", "*"),
    ("DEL", "pipeline"), ("GRAPH.CONFIG", "SET", "TIMEOUT", "1"), ("REPLICAOF", "127.0.0.1", "1"),
)  # fmt: skip


def client(port: int, **login) -> redis.Redis:
    """A plain Redis client that fails at once (redis-py retries a refused login for seconds)."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(port=port, retry=Retry(NoBackoff(), 0), **login)


def kill_server() -> None:
    info = embedded.status()
    assert info is not None
    os.kill(info.pid, signal.SIGKILL)
    while embedded.pid_alive(info.pid):
        embedded._reap(info.pid)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ------------------------------------------------------------------------------------------ who gets in
def test_password_file_and_data_folder_are_private_and_the_rest_keeps_the_umask(home):
    old = os.umask(0o022)
    try:
        info = embedded.start()
    finally:
        os.umask(old)
    folder = Path(info.data_dir)
    assert mode(folder) == 0o700
    assert mode(folder / auth.CREDENTIALS_FILE) == 0o600 and mode(folder / auth.ACL_FILE) == 0o600
    assert mode(home) == 0o755  # PIPELINE_HOME itself: the user's umask
    creds = embedded.credentials(info)
    assert len(creds.password) >= 32 and creds.password != creds.admin_password
    # the server's own files and its command line (readable by everyone in /proc) hold no password
    assert creds.password not in (folder / auth.ACL_FILE).read_text()
    cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().decode()
    assert creds.password not in cmdline and creds.admin_password not in cmdline
    assert creds.password not in repr(creds)


def test_status_says_how_to_log_in_and_never_prints_the_password(home):
    from click.testing import CliRunner

    from pipeline.cli import cli

    info = embedded.start()
    creds = embedded.credentials(info)
    doc = json.loads(CliRunner().invoke(cli, ["store", "status", "--json"]).stdout)
    assert {k: doc[k] for k in ("running", "pid", "host", "port", "bolt_port", "data_dir")} == {
        "running": True, "pid": info.pid, "host": "127.0.0.1", "port": info.port, "bolt_port": None,
        "data_dir": info.data_dir,
    }  # fmt: skip
    assert doc["auth"] == {"user": "pipeline", "credentials_file": str(Path(info.data_dir) / "credentials.json")}
    text = CliRunner().invoke(cli, ["store", "status"]).stdout
    for out in (json.dumps(doc), text):
        assert creds.password not in out and creds.admin_password not in out
    assert "credentials.json" in text and "'pipeline'" in text


def test_the_server_listens_on_loopback_only_where_status_says(home):
    if shutil.which("ss") is None:
        pytest.skip("no `ss` on this machine")
    info = embedded.start()
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    mine = [line.split()[3] for line in out.splitlines() if f"pid={info.pid}," in line]
    assert mine == [f"127.0.0.1:{info.port}"]  # one socket, loopback, no Bolt listener


def test_clients_without_the_password_get_nothing(home):
    info = embedded.start()
    with pytest.raises(redis.exceptions.RedisError):
        client(info.port).execute_command("GRAPH.QUERY", "pipeline", "RETURN 1")
    with pytest.raises(redis.exceptions.AuthenticationError):
        client(info.port, username="pipeline", password="guess").ping()
    with pytest.raises(redis.exceptions.AuthenticationError):
        client(info.port, username="default", password="x").ping()
    # the project's own URI of the server finds the credentials by itself
    with open_store(f"falkordb://127.0.0.1:{info.port}/other") as store:
        assert store.run("RETURN 1 AS one") == [{"one": 1}]


def test_the_data_user_cannot_wipe_or_reconfigure_the_server(home):
    with open_store() as store:
        store.run("CREATE (:Kept {v: 1})")
    info = embedded.status()
    creds = embedded.credentials(info)
    r = client(info.port, username=creds.user, password=creds.password)
    for command in FORBIDDEN:
        with pytest.raises(redis.exceptions.ResponseError, match="no permissions|not allowed"):
            r.execute_command(*command)
    assert embedded.status() == info  # still running
    with open_store() as store:
        assert store.run("MATCH (k:Kept) RETURN count(k) AS n") == [{"n": 1}]
    admin = client(info.port, username=creds.admin_user, password=creds.admin_password)
    assert admin.config_get("appendonly") == {"appendonly": "yes"}
    assert admin.config_get("appendfsync") == {"appendfsync": "everysec"}


def _as_nobody(code: str) -> subprocess.CompletedProcess:
    # sbin is not on every PATH (a CI runner's may lack it): look there too
    runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
    if os.geteuid() != 0 or runuser is None:
        pytest.skip("needs root and runuser to act as a second OS user")
    # the system's python: a virtual environment under root's home may not be executable by others
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)
    probe = [runuser, "-u", "nobody", "--", python or "", "-c", "pass"]
    if python is None or subprocess.run(probe, capture_output=True, timeout=60).returncode != 0:
        pytest.skip("user nobody cannot run a system python3 here")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    return subprocess.run([runuser, "-u", "nobody", "--", python, "-c", code], capture_output=True,
                          text=True, env=env, timeout=60, cwd="/tmp")


def test_another_os_user_cannot_read_the_password_or_the_data_nor_use_the_server(tmp_path, monkeypatch):
    import tempfile

    # a home the other user can reach (pytest's own folders are private to us): only the modes the store
    # sets may keep it out, and a file that keeps the umask shows that it does get that far
    shared = Path(tempfile.mkdtemp(prefix="faults-", dir="/tmp"))
    os.chmod(shared, 0o755)
    monkeypatch.setenv("PIPELINE_HOME", str(shared))
    monkeypatch.delenv("PIPELINE_STORE", raising=False)
    try:
        info = embedded.start()
        folder = Path(info.data_dir)
        (shared / "umask.txt").write_text("anyone\n")
        os.chmod(shared / "umask.txt", 0o644)
        code = f"""
import json, os, socket, time
out = {{}}
for name, path in (("credentials", {str(folder / "credentials.json")!r}), ("control", {str(shared / "umask.txt")!r})):
    try:
        open(path).read()
        out[name] = "read"
    except PermissionError:
        out[name] = "denied"
try:
    os.listdir({str(folder)!r})
    out["listing"] = "read"
except PermissionError:
    out["listing"] = "denied"
s = socket.create_connection(("127.0.0.1", {info.port}), timeout=5)
s.sendall(b"*1\\r\\n$8\\r\\nFLUSHALL\\r\\n*3\\r\\n$11\\r\\nGRAPH.QUERY\\r\\n$8\\r\\npipeline\\r\\n$8\\r\\nRETURN 1\\r\\n")
time.sleep(0.5)
out["server"] = s.recv(4096).decode(errors="replace")
print(json.dumps(out))
"""
        res = _as_nobody(code)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["control"] == "read"
        assert out["credentials"] == "denied" and out["listing"] == "denied"
        assert out["server"].count("-NOAUTH") == 2, out["server"]
    finally:
        embedded.stop()
        shutil.rmtree(shared, ignore_errors=True)


# ------------------------------------------------------------------------------------------ what survives
def test_an_acknowledged_write_survives_kill_9_without_any_save(home):
    store = open_store()
    store.run("CREATE (:Acked {v: 1})")  # no close, no lock: only the append-only file has it
    kill_server()
    with open_store() as again:  # restarts from the append-only file
        assert again.run("MATCH (a:Acked) RETURN a.v AS v") == [{"v": 1}]
    store._disconnect()


def test_lock_releases_survive_kill_9_and_a_dead_holder_is_recognised(home):
    with open_store() as store:
        with store.lock("dataset:x", purpose="test", timeout_s=0):
            pass
    kill_server()
    code = (
        "import os, signal\nfrom pipeline.store import open_store\ns = open_store()\n"
        "s.lock('dataset:y', purpose='doomed').__enter__()\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    kill_server()
    with open_store() as store:
        held = store.run("MATCH (l:Lock) WHERE l.owner IS NOT NULL RETURN l.name AS name")
        assert held == [{"name": "dataset:y"}]  # the release of x survived; y's holder died holding it
        with store.lock("dataset:x", purpose="again", timeout_s=0), store.lock("dataset:y", purpose="take", timeout_s=0):
            pass  # y: its holder's pid is gone on this host, taken over at once


def test_a_store_from_before_the_append_only_file_keeps_its_data(home):
    folder = embedded.store_dir()
    info, proc = embedded.launch(folder, persist=False)  # RDB only, as stores were made before
    creds = embedded.credentials(info)
    r = client(info.port, username=creds.admin_user, password=creds.admin_password)
    r.execute_command("GRAPH.QUERY", "pipeline", "CREATE (:Old {v: 7})")
    r.save()
    embedded.shutdown(info)
    proc.wait(30)
    assert not (folder / "appendonlydir").exists()
    embedded.start()  # migrates: starts from the RDB, then writes the AOF
    kill_server()  # from now on the AOF alone must hold it
    with open_store() as store:
        assert store.run("MATCH (o:Old) RETURN o.v AS v") == [{"v": 7}]


def test_a_server_that_refuses_our_credentials_is_never_joined_by_a_second_one(home):
    info = embedded.start()
    creds_file = auth.credentials_path(Path(info.data_dir))
    creds_file.unlink()  # e.g. deleted by hand while the server runs
    with pytest.raises(StoreUnavailable, match=f"pid {info.pid}.*does not answer"):
        embedded.start()
    os.kill(info.pid, signal.SIGKILL)
    while embedded.pid_alive(info.pid):
        embedded._reap(info.pid)
    assert embedded.start().pid != info.pid  # new credentials; the data stays (AOF)


def test_a_grown_append_only_file_is_compacted_at_start_and_keeps_everything(home, monkeypatch):
    with open_store() as store:
        store.run("UNWIND range(1, 200) AS i CREATE (:Row {i: i})")
        store.run("MATCH (r:Row) WHERE r.i > 100 DELETE r")
    embedded.stop()
    aof = embedded.store_dir() / "appendonlydir"
    assert sorted(p.name for p in aof.glob("*.base.*")) == ["appendonly.aof.1.base.rdb"]
    monkeypatch.setattr(embedded, "COMPACT_BYTES", 0)  # any log part counts as grown
    embedded.start()
    assert sorted(p.name for p in aof.glob("*.base.*")) == ["appendonly.aof.2.base.rdb"]
    kill_server()
    with open_store() as store:
        assert store.run("MATCH (r:Row) RETURN count(r) AS n, max(r.i) AS top") == [{"n": 100, "top": 100}]


def test_the_port_is_remembered_unless_taken_and_can_be_chosen(home):
    first = embedded.start()
    embedded.stop()
    assert embedded.start().port == first.port
    embedded.stop()
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the port may be in TIME_WAIT
        squatter.bind(("127.0.0.1", first.port))
        squatter.listen()
        moved = embedded.start()
        assert moved.port != first.port
        embedded.stop()
        with pytest.raises(StoreUnavailable, match=f"port {first.port} .* taken"):
            embedded.start(port=first.port)
    from click.testing import CliRunner

    from pipeline.cli import cli

    chosen = embedded.free_port()
    started = CliRunner().invoke(cli, ["store", "start", "--port", str(chosen)])
    assert started.exit_code == 0 and started.stdout.startswith(f"started: falkordb://127.0.0.1:{chosen} ")
    assert embedded.remembered_port() == chosen
    moved = CliRunner().invoke(cli, ["store", "start", "--port", str(first.port)])  # running elsewhere
    assert moved.exit_code == 2 and f"runs on port {chosen}" in moved.stderr and "store stop" in moved.stderr


# ------------------------------------------------------------------------------------------ write-back
def _toy_write_backs(tmp_path: Path):
    """(query set, [(answers, top, witnesses)] for generations A and B): same set and method, different
    top and witness K, so a reader can tell A from B."""
    from tests.answer.test_writeback import _answers
    from tests.answer.test_writeback_witnesses import witnesses_of

    answers, qs = _answers(tmp_path, "SRC")
    return qs, [(answers, 3, witnesses_of(answers, qs, 2)), (answers, 10, witnesses_of(answers, qs, 1))]


def _visible(store, qs, method: str) -> dict:
    """Everything a reader of the set sees, through the readers' own statements."""
    from pipeline.stages.writeback import read_back, set_id

    sid = set_id(qs)
    qids = [r["qid"] for r in store.run(cypher_text("stored_queries_read"), {"dataset": "toy", "set": sid})]
    seen: dict = {"queries": qids, "sets": store.run(cypher_text("stored_queries_sets"), {"dataset": "toy"})}
    for q in qids:
        seen[q] = [(r["eid"], r["rank"], r["utility"]) for r in read_back(store, "toy", sid, q, method)]
        rows = store.run(cypher_text("browse_query"), {"dataset": "toy", "set": sid, "qid": q})
        seen[q + "/browse"] = sorted(
            (r["rank"], (r["witness"] or {}).get("answer"), len(r["atoms"])) for r in rows if r["rank"] is not None
        )
        found = store.run(cypher_text("browse_find"), {"qid": q, "dataset": "toy", "set": sid})
        seen[q + "/methods"] = [r["methods"] for r in found]
    return seen


def _prepare(graph: str):
    from tests.answer.toy import N_ENTITIES

    store = open_store(graph=graph)
    store.ensure_index("Entity", "eid")
    store.create_entities("toy", np.arange(N_ENTITIES), [f"e{i}" for i in range(N_ENTITIES)])
    return store


class Interrupt:
    """Counts a store's round trips through its method ``method`` (``_execute``: every Cypher statement;
    ``_call``: also GRAPH.BULK and its checks) and, after the ``at``-th, kills (``kill``) or stops
    (``stop``) the server."""

    def __init__(self, store, at: int, how: str, method: str = "_execute") -> None:
        self.n, self.at, self.how = 0, at, how
        inner = getattr(store, method)

        def counted(*args, **kwargs):
            out = inner(*args, **kwargs)
            self.n += 1
            if self.n == self.at:
                kill_server() if self.how == "kill" else embedded.stop()
            return out

        setattr(store, method, counted)


def _after_restart(graph: str, qs, b, before: dict, after: dict, what: str) -> str:
    """Restart the server, check that readers see exactly ``before`` or ``after`` ('old' / 'new'), then that
    the next write-back removes every leftover."""
    from pipeline.stages import writeback

    method = b[0].label
    with open_store(graph=graph) as again:  # restarts the server from its append-only file
        # the interrupted writer (this very process, still alive) never released the data set's lock; a
        # real one is gone and its lock taken over at once (test_lock_releases_survive_...)
        again.run("MATCH (l:Lock) DETACH DELETE l")
        seen = _visible(again, qs, method)
        assert seen in (before, after), f"{what}: a mixture"
        writeback.write_back(again, b[0], qs, top=b[1], witnesses=b[2])
        assert _visible(again, qs, method) == after
        n = again.run("MATCH ()-[a:ANSWER]->() RETURN count(a) AS n")[0]["n"]
        w = again.run("MATCH (w:Witness) RETURN count(w) AS n")[0]["n"]
        assert (n, w) == (14, 3)
    return "new" if seen == after else "old"


@pytest.mark.parametrize("previous", [True, False], ids=["replacing", "first"])
def test_write_back_is_all_or_nothing_when_the_server_dies_at_any_point(home, tmp_path, monkeypatch, previous):
    from pipeline.stages import writeback
    from pipeline.store.falkordb_store import FalkorDBStore

    # more statements, so more points to kill at (the batch sizes are the backend's own declaration)
    monkeypatch.setattr(FalkorDBStore, "write_batch", 10)
    monkeypatch.setattr(FalkorDBStore, "witness_batch", 1)
    qs, (a, b) = _toy_write_backs(tmp_path)
    method = a[0].label
    # the two complete states, and how many round trips B's write-back makes
    with _prepare("reference") as store:
        empty = _visible(store, qs, method)
        if previous:
            writeback.write_back(store, a[0], qs, top=a[1], witnesses=a[2])
        before = _visible(store, qs, method)
        probe = Interrupt(store, at=0, how="none")
        writeback.write_back(store, b[0], qs, top=b[1], witnesses=b[2])
        statements = probe.n
        after = _visible(store, qs, method)
    assert before != after and (previous or before == empty) and len(after["queries"]) == 3
    outcomes = []
    for at in range(1, statements + 1):
        how = "stop" if at % 5 == 0 else "kill"  # `pipeline store stop` at some points, kill -9 at the rest
        store = _prepare(f"trial{at}")
        if previous:
            writeback.write_back(store, a[0], qs, top=a[1], witnesses=a[2])
        Interrupt(store, at, how)
        try:  # fails, or (stopped after its last round trip) returns: what a reader sees decides
            writeback.write_back(store, b[0], qs, top=b[1], witnesses=b[2])
        except StoreUnavailable:
            pass
        store._disconnect()
        outcomes.append(_after_restart(f"trial{at}", qs, b, before, after, f"{how} after round trip {at} of {statements}"))
    # killed before the commit: the old state; from the commit on: the new one; never a third state
    first_new = outcomes.index("new")
    assert outcomes == ["old"] * first_new + ["new"] * (statements - first_new) and 0 < first_new < statements
    print(f"\n{'replacing' if previous else 'first'} write-back: {statements} kill points: {outcomes}")


def test_write_back_is_all_or_nothing_when_killed_at_random_moments(home, tmp_path, monkeypatch):
    """kill -9 from another thread at seeded random times: some land inside a statement, not between."""
    import random
    import threading
    import time

    from pipeline.stages import writeback
    from pipeline.store.falkordb_store import FalkorDBStore

    monkeypatch.setattr(FalkorDBStore, "write_batch", 10)
    monkeypatch.setattr(FalkorDBStore, "witness_batch", 1)
    qs, (a, b) = _toy_write_backs(tmp_path)
    with _prepare("reference") as store:
        writeback.write_back(store, a[0], qs, top=a[1], witnesses=a[2])
        before = _visible(store, qs, a[0].label)
        t0 = time.perf_counter()
        writeback.write_back(store, b[0], qs, top=b[1], witnesses=b[2])
        took = time.perf_counter() - t0
        after = _visible(store, qs, a[0].label)
    rng, outcomes = random.Random(29), []
    for trial in range(8):
        store = _prepare(f"random{trial}")
        writeback.write_back(store, a[0], qs, top=a[1], witnesses=a[2])
        delay = rng.uniform(0, took)
        timer = threading.Timer(delay, kill_server)
        timer.start()
        try:
            writeback.write_back(store, b[0], qs, top=b[1], witnesses=b[2])
        except StoreUnavailable:
            pass
        timer.join()
        store._disconnect()
        outcomes.append(_after_restart(f"random{trial}", qs, b, before, after, f"kill at {delay:.4f} s"))
    print(f"\nrandom kills within {took:.3f} s: {outcomes}")


# ------------------------------------------------------------------------------------------ stale versions
def test_a_set_made_from_another_version_of_the_data_set_is_refused(fresh_store, tmp_path):
    from pipeline.stages.stored_queries import read_stored_queries
    from pipeline.stages.writeback import StaleDataset, set_id, write_back, write_queries
    from tests.answer.conftest import VOCAB

    store = fresh_store  # the toy's named entities and relations, as ingest leaves them, and a load marker
    store.ensure_index("Entity", "eid")
    store.create_entities("toy", np.arange(len(VOCAB.entities)), VOCAB.entities)
    store.run("UNWIND $rows AS row CREATE (:Relation {dataset: 'toy', rid: row.rid, name: row.name})",
              {"rows": [{"rid": i, "name": n} for i, n in enumerate(VOCAB.relations)]})
    store.run("CREATE (:Dataset {name: 'toy', key: 'version-one-key', complete: true})")
    qs, ((answers, top, witnesses), _) = _toy_write_backs(tmp_path)
    write_back(store, answers, qs, top=top, witnesses=witnesses)
    sid = set_id(qs)
    versions = store.run("MATCH (q:Query {set: $s}) RETURN DISTINCT q.dataset_version AS v", {"s": sid})
    pointer = store.run("MATCH (c:WriteBack) RETURN c.dataset_version AS v")
    assert versions == [{"v": "version-one-key"}] and pointer == [{"v": "version-one-key"}]
    assert read_stored_queries(store, "toy", sid, tmp_path / "out").path is not None  # same version: fine
    # the data set is re-ingested with other content: its marker carries another key
    store.run("MATCH (d:Dataset {name: 'toy'}) SET d.key = 'version-two-key'")
    texts = store.run("MATCH (q:Query {set: $s}) RETURN q.qid AS qid, q.query AS query ORDER BY qid", {"s": sid})
    from pipeline.stages.browse import find_query

    for attempt in (
        lambda: find_query(store, "q1", "toy"),  # pipeline browse
        lambda: read_stored_queries(store, "toy", sid, tmp_path / "out"),  # answer --from-store --set
        lambda: write_back(store, answers, qs, top=top, witnesses=witnesses),
        lambda: write_queries(store, qs),
    ):
        with pytest.raises(StaleDataset, match=r"another version of 'toy' \(content key version-one.*pipeline sample"):
            attempt()
    # refused before anything changed: the stored texts were not re-parsed against the new names
    assert store.run("MATCH (q:Query {set: $s}) RETURN q.qid AS qid, q.query AS query ORDER BY qid", {"s": sid}) == texts
    # a query set file that says which version it was sampled from is refused as well
    qs.meta["dataset_version"] = "version-one-key"
    store.run("MATCH (q:Query) DETACH DELETE q")
    with pytest.raises(StaleDataset, match=f"the query set {qs.path}"):
        write_queries(store, qs)
