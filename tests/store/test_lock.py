"""The store's own lock (``with store.lock(name, purpose=...)``): a (:Lock) node taken by one atomic
compare-and-set query, so writers serialise even across machines. Exclusion under real contention (also
on a lock node created by racing first uses), re-entry, waiting then a one-line error naming the holder,
take-over of stale locks (dead local pid, lease past), renewal while held, and release."""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time

import pytest

from pipeline.core.errors import PipelineError
from pipeline.store.lock import StoreLocked, StoreLockLost


def _other(store):
    """A second connection (another client of the same graph), as another process would have."""
    s = store.fresh(store.graph)
    s.server = store.server
    return s


def _locks(store):
    """The locks held now (a lock node without owner is a free lock)."""
    return store.run(
        "MATCH (l:Lock) WHERE l.owner IS NOT NULL RETURN l.name AS name, l.owner AS owner, l.host AS host, l.pid AS pid, "
        "l.purpose AS purpose ORDER BY name"
    )


def test_lock_is_a_node_owned_while_held_and_free_after(fresh_store):
    with fresh_store.lock("dataset:tiny", purpose="ingest") as held:
        [row] = _locks(fresh_store)
        assert (row["name"], row["host"], row["pid"], row["purpose"]) == (
            "dataset:tiny",
            socket.gethostname(),
            os.getpid(),
            "ingest",
        )
        assert row["owner"] == held.owner
    assert _locks(fresh_store) == []


def test_reentry_on_the_same_store_does_not_wait(fresh_store):
    with fresh_store.lock("a", purpose="outer", timeout_s=0.2):
        with fresh_store.lock("a", purpose="inner", timeout_s=0.2):
            assert [r["purpose"] for r in _locks(fresh_store)] == ["outer"]
        assert len(_locks(fresh_store)) == 1  # the outer scope still holds it
    assert _locks(fresh_store) == []


def test_a_waiter_times_out_with_one_line_naming_the_holder(fresh_store):
    other = _other(fresh_store)
    try:
        with fresh_store.lock("dataset:ppi5k", purpose="ingest"):
            t0 = time.monotonic()
            with pytest.raises(StoreLocked) as err:
                with other.lock("dataset:ppi5k", purpose="write-back", timeout_s=0.5):
                    pass
            assert time.monotonic() - t0 >= 0.5
        msg = str(err.value)
        assert "\n" not in msg
        for needle in ("dataset:ppi5k", "ingest", f"pid {os.getpid()}", socket.gethostname(), "waited 0.5 s"):
            assert needle in msg
        with other.lock("dataset:ppi5k", purpose="write-back", timeout_s=0.5):  # free again
            assert _locks(other)[0]["purpose"] == "write-back"
    finally:
        other.close()


def test_different_names_do_not_exclude_each_other(fresh_store):
    other = _other(fresh_store)
    try:
        with (
            fresh_store.lock("dataset:a", purpose="ingest"),
            other.lock("dataset:b", purpose="ingest", timeout_s=0.2),
        ):
            assert [r["name"] for r in _locks(fresh_store)] == ["dataset:a", "dataset:b"]
    finally:
        other.close()


def test_writers_under_the_lock_never_lose_an_update(fresh_store):
    # read-modify-write in two round trips with a pause between: without mutual exclusion, the threads
    # overwrite each other's increments (checked below with the lock left out)
    fresh_store.run("CREATE (:Counter {name: 'c', v: 0})")

    def bump(store, times: int, locked: bool) -> None:
        for _ in range(times):
            if locked:
                with store.lock("counter", purpose="bump"):
                    _increment(store)
            else:
                _increment(store)

    def run_threads(locked: bool) -> int:
        fresh_store.run("MATCH (c:Counter) SET c.v = 0")
        stores = [_other(fresh_store) for _ in range(4)]
        threads = [threading.Thread(target=bump, args=(s, 5, locked)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in stores:
            s.close()
        return fresh_store.run("MATCH (c:Counter) RETURN c.v AS v")[0]["v"]

    assert run_threads(locked=True) == 20
    assert run_threads(locked=False) < 20  # the test can tell a missing lock


def _increment(store) -> None:
    v = store.run("MATCH (c:Counter {name: 'c'}) RETURN c.v AS v")[0]["v"]
    time.sleep(0.01)
    store.run("MATCH (c:Counter {name: 'c'}) SET c.v = $v", {"v": v + 1})


def _dead_pid() -> int:
    proc = multiprocessing.get_context("spawn").Process(target=int)
    proc.start()
    proc.join()
    return proc.pid


def _plant(store, **props) -> None:
    """A lock node as another (possibly dead) client left it; times in ms since the epoch."""
    now = int(time.time() * 1000)
    base = dict(
        name="dataset:x",
        owner="someone",
        host=socket.gethostname(),
        pid=os.getpid(),
        purpose="ingest",
        since=now,
        expires=now + 3_600_000,
    )
    store.run("CREATE (l:Lock) SET l = $p", {"p": {**base, **props}})


def test_a_lock_of_a_dead_local_process_is_taken_over(fresh_store):
    _plant(fresh_store, pid=_dead_pid())  # lease far in the future: only the dead pid frees it
    with fresh_store.lock("dataset:x", purpose="ingest", timeout_s=0.5):
        [row] = _locks(fresh_store)
        assert row["pid"] == os.getpid() and row["owner"] != "someone"
    assert _locks(fresh_store) == []


def test_a_live_local_holder_or_a_remote_one_within_its_lease_is_waited_for(fresh_store):
    _plant(fresh_store)  # this very process, another owner: alive
    with pytest.raises(StoreLocked, match="someone"):
        with fresh_store.lock("dataset:x", purpose="ingest", timeout_s=0.3):
            pass
    fresh_store.run("MATCH (l:Lock) DETACH DELETE l")
    _plant(fresh_store, host="elsewhere.example", pid=_dead_pid())  # a pid on another machine says nothing
    with pytest.raises(StoreLocked, match="elsewhere.example"):
        with fresh_store.lock("dataset:x", purpose="ingest", timeout_s=0.3):
            pass


def test_a_lock_past_its_lease_is_taken_over(fresh_store):
    _plant(fresh_store, host="elsewhere.example", expires=int(time.time() * 1000) - 1)
    with fresh_store.lock("dataset:x", purpose="ingest", timeout_s=0.5):
        assert _locks(fresh_store)[0]["host"] == socket.gethostname()


def test_the_holder_renews_its_lease_while_working(fresh_store):
    other = _other(fresh_store)
    try:
        with fresh_store.lock("slow", purpose="long job", lease_s=0.6):
            deadline = time.monotonic() + 1.5  # well past the first lease
            while time.monotonic() < deadline:
                with pytest.raises(StoreLocked):
                    with other.lock("slow", purpose="impatient", timeout_s=0.1):
                        pass
    finally:
        other.close()


def test_losing_the_lock_is_reported_when_the_scope_ends(fresh_store):
    with pytest.raises(StoreLockLost, match="dataset:x"):
        with fresh_store.lock("dataset:x", purpose="ingest"):
            fresh_store.run("MATCH (l:Lock) SET l.owner = 'usurper'")
    assert _locks(fresh_store)[0]["owner"] == "usurper"  # not ours to delete


def test_bad_lock_arguments(fresh_store):
    with pytest.raises(PipelineError, match="timeout"):
        fresh_store.lock("x", purpose="p", timeout_s=-1)
    with pytest.raises(PipelineError, match="name"):
        fresh_store.lock("", purpose="p")


def test_first_uses_racing_on_a_new_lock_still_exclude(fresh_store):
    # every round a lock name nobody used yet: the racing MERGEs may create two nodes of it, and the
    # compare-and-set must still let exactly one thread in at a time
    fresh_store.run("CREATE (:Counter {name: 'c', v: 0})")
    stores = [_other(fresh_store) for _ in range(4)]
    try:
        for k in range(5):
            start = threading.Barrier(len(stores))

            def once(store, name=f"new-{k}", start=start):
                start.wait()
                with store.lock(name, purpose="race"):
                    _increment(store)

            threads = [threading.Thread(target=once, args=(s,)) for s in stores]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert fresh_store.run("MATCH (c:Counter) RETURN c.v AS v")[0]["v"] == 5 * len(stores)
    finally:
        for s in stores:
            s.close()


def test_duplicate_lock_nodes_are_taken_together(fresh_store):
    _plant(fresh_store, name="dup")  # held by a live owner (this pid, another token)
    fresh_store.run("CREATE (:Lock {name: 'dup'})")  # a free copy beside it
    with pytest.raises(StoreLocked, match="someone"):
        with fresh_store.lock("dup", purpose="ingest", timeout_s=0.2):
            pass
    fresh_store.run("MATCH (l:Lock {name: 'dup'}) REMOVE l.owner")
    with fresh_store.lock("dup", purpose="ingest", timeout_s=0.2) as held:
        owners = fresh_store.run("MATCH (l:Lock {name: 'dup'}) RETURN l.owner AS o")
        assert [r["o"] for r in owners] == [held.owner, held.owner]
    assert _locks(fresh_store) == []


def test_the_default_timeout_comes_from_the_environment(fresh_store, monkeypatch):
    other = _other(fresh_store)
    try:
        monkeypatch.setenv("PIPELINE_LOCK_TIMEOUT", "0.3")
        with fresh_store.lock("env", purpose="holder"):
            with pytest.raises(StoreLocked, match="waited 0.3 s"):
                with other.lock("env", purpose="waiter"):
                    pass
        for bad in ("soon", "-1", "nan"):
            monkeypatch.setenv("PIPELINE_LOCK_TIMEOUT", bad)
            with pytest.raises(PipelineError, match="PIPELINE_LOCK_TIMEOUT"):
                other.lock("env", purpose="waiter")
    finally:
        other.close()
