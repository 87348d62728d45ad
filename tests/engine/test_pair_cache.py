"""The pair cache: relation-pair arrays (shared entries, column fronts) written once per export
and memory-mapped by later processes. Answers bit for bit those of the engine without the cache and of the
frozen engine, with the cache cold, warm and corrupted; a damaged, truncated or stale file is rebuilt,
never believed; another export's identity never reads it; two processes building the same pair at once
leave one valid file."""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.engine.maxplus as mp
import tests.engine.reference.adjacency as ref_adj
import tests.engine.reference.evaluate as ref_eval
from pipeline.core import sealed_arrays
from pipeline.engine import Adjacency, search_batch
from pipeline.formats import pair_cache
from pipeline.formats.pair_cache import PairCache, export_identity, for_export, pair_name
from pipeline.softquery import Atom, Conjunction, Const, Query, Var
from tests.engine.test_multi_edges import batch, graphs
from tests.engine.test_oracle import graph_of

X, Y = Var("x"), Var("y")
PAIR = ((True, 0), (False, 1))


def dense_graph(n: int = 30, r: int = 3, seed: int = 0):
    """Relations that overlap on many entries (so shared entries and fronts are not trivial)."""
    g = torch.Generator().manual_seed(seed)
    facts = []
    for h in range(n):
        for rel in range(r):
            for t in range(n):
                if torch.rand((), generator=g) < 0.3:
                    facts.append((h, rel, t, round(float(torch.rand((), generator=g)), 2) or 0.5))
    return graph_of(n, r, facts)


def multi_edge_queries(n: int) -> list[Query]:
    """2m and im shapes at alpha 0 (floor states: the column fronts) in both orientations."""
    out = []
    for e in range(0, n, 3):
        out.append(
            Query(
                (
                    Conjunction(
                        (Atom(Const(e), 2, X, 0.0, 1.0), Atom(X, 0, Y, 0.0, 1.0), Atom(Y, 1, X, 0.0, 0.5))
                    ),
                )
            )
        )
        out.append(
            Query(
                (
                    Conjunction(
                        (
                            Atom(Const(e), 0, X, 0.0, 1.0),
                            Atom(Const((e + 1) % n), 1, X, 0.0, 1.0),
                            Atom(X, 1, Y, 0.0, 1.0),
                            Atom(X, 2, Y, 0.0, 2.0),
                        )
                    ),
                )
            )
        )
    return out


@pytest.fixture(params=["stream", "floor"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both multi-edge paths: the split stream (shared entries) and, with its costs at 0, the floor path
    (column fronts) for every row that allows it."""
    if request.param == "floor":
        monkeypatch.setattr(mp, "_FLOOR_COST", 0)
        monkeypatch.setattr(mp, "_FRONT_COST", 0.0)
    return str(request.param)


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= 0x20
    path.write_bytes(bytes(data))


def test_cold_warm_corrupt_answers_equal(tmp_path: Path, path: str) -> None:
    graph = dense_graph()
    queries = multi_edge_queries(graph.n_entities)
    plain = search_batch(queries, Adjacency.from_graph(graph))
    ref = ref_eval.evaluate_batch(queries, ref_adj.Adjacency.from_graph(graph))
    assert torch.equal(plain, ref)

    cache = PairCache(tmp_path, "export-a")
    cold = search_batch(queries, Adjacency.from_graph(graph).use_pair_cache(cache))
    files = sorted(tmp_path.glob("*.bin"))
    kinds = {f.name.split("-")[0] for f in files}
    assert kinds == ({"front"} if path == "floor" else {"shared"})  # a front alone keeps no shared entries

    warm_adj = Adjacency.from_graph(graph).use_pair_cache(cache)

    def no_build(*_: object) -> None:
        raise AssertionError("built, though the pair cache holds it")

    object.__setattr__(warm_adj, "_shared", no_build)
    object.__setattr__(warm_adj, "_front", no_build)
    warm = search_batch(queries, warm_adj)

    for i, f in enumerate(files):  # a flipped byte anywhere: header, checksums or arrays
        flip_byte(f, [10, 40, len(f.read_bytes()) - 3][i % 3])
    damaged = PairCache(tmp_path, "export-a")
    rebuilt = search_batch(queries, Adjacency.from_graph(graph).use_pair_cache(damaged))
    assert damaged.rebuilt == len(files)
    again = PairCache(tmp_path, "export-a")  # the rewritten files are valid
    assert all(again.load(*_key(f)) is not None for f in files) and again.rebuilt == 0
    for got in (cold, warm, rebuilt):
        assert torch.equal(got, plain)


def _key(f: Path) -> tuple[str, tuple[tuple[bool, int], ...]]:
    kind, *atoms = f.stem.split("-")
    return kind, tuple((a[0] == "h", int(a[1:])) for a in atoms)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.booleans())
def test_random_batches_equal_with_cache(data, floor: bool) -> None:
    """Random toy graphs x batches of multi-edge shapes: without the cache, cold and warm, the same
    utilities bit for bit, and the frozen engine's."""
    n, r, facts = data.draw(graphs())
    queries = data.draw(batch(n, r))
    graph = graph_of(n, r, facts)
    old = mp._FLOOR_COST, mp._FRONT_COST
    if floor:
        mp._FLOOR_COST, mp._FRONT_COST = 0, 0.0
    try:
        with tempfile.TemporaryDirectory() as d:
            cache = PairCache(d, "x")
            plain = search_batch(queries, Adjacency.from_graph(graph))
            cold = search_batch(queries, Adjacency.from_graph(graph).use_pair_cache(cache))
            warm = search_batch(queries, Adjacency.from_graph(graph).use_pair_cache(cache))
        ref = ref_eval.evaluate_batch(queries, ref_adj.Adjacency.from_graph(graph))
    finally:
        mp._FLOOR_COST, mp._FRONT_COST = old
    assert torch.equal(cold, plain) and torch.equal(warm, plain) and torch.equal(plain, ref)


def test_round_trip_and_memory_map(tmp_path: Path) -> None:
    cache = PairCache(tmp_path, "e")
    arrays = (
        torch.arange(5, dtype=torch.int32),
        torch.tensor([3, 1, 2], dtype=torch.int64),
        torch.rand(2, 5),
    )
    assert cache.store("shared", PAIR, arrays)
    got = cache.load("shared", PAIR)
    assert got is not None and all(
        torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(got, arrays, strict=True)
    )
    empty = (torch.zeros(0, dtype=torch.int32), torch.zeros(2, 0))
    assert cache.store("front", PAIR, empty)
    back = cache.load("front", PAIR)
    assert back is not None and back[1].shape == (2, 0)
    assert pair_name("shared", PAIR) == "shared-h0-t1.bin"


@pytest.mark.parametrize("damage", ["truncate", "stale", "format", "garbage", "empty"])
def test_bad_files_are_never_believed(tmp_path: Path, damage: str) -> None:
    cache = PairCache(tmp_path, "export-a")
    cache.store("shared", PAIR, (torch.arange(100, dtype=torch.int32), torch.rand(2, 100)))
    f = cache.path("shared", PAIR)
    if damage == "truncate":
        f.write_bytes(f.read_bytes()[:-50])
    elif damage == "stale":  # a valid file of another export at the same place
        other = PairCache(tmp_path / "b", "export-b")
        other.store("shared", PAIR, (torch.arange(100, dtype=torch.int32), torch.rand(2, 100)))
        f.write_bytes(other.path("shared", PAIR).read_bytes())
    elif damage == "format":
        data = f.read_bytes()
        f.write_bytes(data.replace(b"pair-cache/1", b"pair-cache/0"))
    elif damage == "garbage":
        f.write_bytes(b"not a pair file at all" * 10)
    else:
        f.write_bytes(b"")
    assert cache.load("shared", PAIR) is None
    assert cache.rebuilt == 1 and not f.exists()


def _settled_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[PairCache, Path, tuple]:
    """A pair file whose times are settled (sealed_arrays._SETTLED shortened to 50 ms, then waited for)."""
    monkeypatch.setattr(sealed_arrays, "_SETTLED", 0.05)
    monkeypatch.delenv("PIPELINE_VERIFY", raising=False)
    arrays = (torch.arange(5000, dtype=torch.int32), torch.rand(2, 5000))
    PairCache(tmp_path, "export-a").store("shared", PAIR, arrays)
    time.sleep(0.1)
    return PairCache(tmp_path, "export-a"), PairCache(tmp_path, "export-a").path("shared", PAIR), arrays


def test_a_checked_file_is_not_summed_again_until_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first open of a settled file checks every array and records the file's stamp beside it; a later
    process opens it with its header checked only, the same arrays; any write to it (even one that puts
    the mtime back) changes its ctime, so the next open checks in full again and a flipped byte is found."""
    first, f, arrays = _settled_file(tmp_path, monkeypatch)
    got = first.load("shared", PAIR)
    assert got is not None and first.summed == 1 and f.with_name(f.name + ".ok").is_file()
    later = PairCache(tmp_path, "export-a")
    again = later.load("shared", PAIR)
    assert again is not None and later.summed == 0
    assert all(torch.equal(a, b) for a, b in zip(again, arrays, strict=True))

    before = f.stat()
    flip_byte(f, f.stat().st_size - 3)  # in the last array's bytes: only the full check sees it
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))  # the mtime put back; the ctime cannot be
    assert f.stat().st_mtime_ns == before.st_mtime_ns and f.stat().st_ctime_ns != before.st_ctime_ns
    damaged = PairCache(tmp_path, "export-a")
    assert damaged.load("shared", PAIR) is None
    assert damaged.summed == 1 and damaged.rebuilt == 1
    assert not f.exists() and not f.with_name(f.name + ".ok").exists()


def test_a_record_vouches_for_its_own_file_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record beside another file (copied there, or the file replaced by a valid one), an unsettled file
    and PIPELINE_VERIFY=always all mean a full check."""
    first, f, _ = _settled_file(tmp_path, monkeypatch)
    assert first.load("shared", PAIR) is not None and first.summed == 1
    record = f.with_name(f.name + ".ok")
    monkeypatch.setenv("PIPELINE_VERIFY", "always")
    always = PairCache(tmp_path, "export-a")
    assert always.load("shared", PAIR) is not None and always.summed == 1
    monkeypatch.delenv("PIPELINE_VERIFY")

    kept = record.read_bytes()
    data = f.read_bytes()
    f.unlink()
    f.write_bytes(data)  # the same bytes in a new file (another inode, other times)
    record.write_bytes(kept)
    moved = PairCache(tmp_path, "export-a")
    assert moved.load("shared", PAIR) is not None and moved.summed == 1
    time.sleep(0.1)  # the rewritten file settles (_SETTLED is 50 ms here)
    for garbage in (b"\xff\xfe not json", b"[]", b'{"ino": 1}'):  # a damaged or foreign record vouches for nothing
        record.write_bytes(garbage)
        damaged = PairCache(tmp_path, "export-a")
        assert damaged.load("shared", PAIR) is not None and damaged.summed == 1
        assert json.loads(record.read_bytes())["ino"] == f.stat().st_ino  # and is replaced by a true one
    monkeypatch.setattr(sealed_arrays, "_SETTLED", 3600.0)  # a file younger than that: never recorded
    record.unlink()
    young = PairCache(tmp_path, "export-a")
    assert young.load("shared", PAIR) is not None and young.summed == 1 and not record.exists()


def _young_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, tuple]:
    """A pair file just written (younger than a record needs: every open checks it in full)."""
    monkeypatch.setattr(sealed_arrays, "_SETTLED", 3600.0)
    monkeypatch.delenv("PIPELINE_VERIFY", raising=False)
    arrays = (torch.arange(5000, dtype=torch.int32), torch.rand(2, 5000))
    PairCache(tmp_path, "export-a").store("shared", PAIR, arrays)
    return PairCache(tmp_path, "export-a").path("shared", PAIR), arrays


def test_a_young_file_checked_ahead_is_opened_on_that_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first answer after an export: the files it will read are checked in a background thread before
    it needs them; the open then uses that check (it waits for it, never sums again) and its map."""
    f, arrays = _young_file(tmp_path, monkeypatch)
    sums: list[int] = []
    real = sealed_arrays._crcs
    monkeypatch.setattr(sealed_arrays, "_crcs", lambda *a, **k: sums.append(1) or real(*a, **k))
    thread = sealed_arrays.check_ahead([f], pair_cache.MAGIC)
    assert thread is not None
    thread.join()
    assert sums == [1]
    cache = PairCache(tmp_path, "export-a")
    got = cache.load("shared", PAIR)
    assert got is not None and sums == [1] and cache.summed == 1  # summed once, by the check ahead
    assert all(torch.equal(a, b) for a, b in zip(got, arrays, strict=True))
    again = PairCache(tmp_path, "export-a")  # a later open of the same young file: checked again, in full
    assert again.load("shared", PAIR) is not None and sums == [1, 1]
    assert sealed_arrays.check_ahead([tmp_path / "none.bin", f.with_name("x.bin")], pair_cache.MAGIC) is None


def test_a_damaged_file_checked_ahead_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f, _ = _young_file(tmp_path, monkeypatch)
    flip_byte(f, f.stat().st_size - 3)
    assert sealed_arrays.check_ahead([f], pair_cache.MAGIC) is not None
    cache = PairCache(tmp_path, "export-a")
    assert cache.load("shared", PAIR) is None and cache.rebuilt == 1 and not f.exists()


def test_a_fork_during_a_check_ahead_waits_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker forked while the check runs would otherwise wait forever for a thread it does not have."""
    f, arrays = _young_file(tmp_path, monkeypatch)
    real = sealed_arrays._crcs

    def slow(*a: Any, **k: Any) -> list[int]:
        time.sleep(0.5)
        return real(*a, **k)

    monkeypatch.setattr(sealed_arrays, "_crcs", slow)
    sealed_arrays.check_ahead([f], pair_cache.MAGIC)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_load_sum, (str(tmp_path),)).get(timeout=60)
    assert got == pytest.approx(float(arrays[1].sum()), rel=1e-5)


def _load_sum(folder: str) -> float:
    got = PairCache(folder, "export-a").load("shared", PAIR)
    assert got is not None
    return float(got[1].sum())


def test_identity_keys_the_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two exports (or one rewritten) never share pair files; PIPELINE_PAIR_CACHE=off disables the cache."""
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(tmp_path / "cache"))
    a, b = tmp_path / "a", tmp_path / "b"
    for d, thr in ((a, 0.1), (b, 0.2)):
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"threshold": thr}))
        (d / "rel-0000.arrow").write_bytes(b"x" * 10)
    ca, cb = for_export(a), for_export(b)
    assert ca is not None and cb is not None and ca.identity != cb.identity and ca.folder != cb.folder
    salted = for_export(a, salt="L:1")
    assert salted is not None and salted.identity != ca.identity
    before = export_identity(a)
    (a / "rel-0000.arrow").write_bytes(b"x" * 11)  # a relation file of another size
    assert export_identity(a) != before
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", "off")
    assert for_export(a) is None


def test_calibrated_confidences_never_read_the_exports_pairs(tmp_path: Path) -> None:
    """dataclasses.replace (calibration L's new confidences) starts without the pair cache."""
    from dataclasses import replace

    adj = Adjacency.from_graph(dense_graph()).use_pair_cache(PairCache(tmp_path, "e"))
    assert adj.pair_cache is not None
    assert replace(adj, fwd=replace(adj.fwd, conf=adj.fwd.conf * 0.5)).pair_cache is None


def _build(
    folder: str, seed: int, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue
) -> None:
    adj = Adjacency.from_graph(dense_graph(seed=seed)).use_pair_cache(PairCache(folder, "same"))
    barrier.wait()
    for _ in range(5):  # race: build, write and replace the same file again and again
        adj._memo.clear()
        object.__setattr__(adj, "_pairs", PairCache(folder, "same"))
        adj._pairs.path("shared", PAIR).unlink(missing_ok=True)
        out.put([x.tolist() for x in adj.shared_facts(PAIR)])


def _race(target: Any, *args: Any, results: int) -> list:
    """Two forked processes running target(*args, barrier, out) from one barrier: the `results` items
    they put on `out`, once both have exited cleanly."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in range(results)]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return got


def test_concurrent_builders_leave_one_valid_file(tmp_path: Path) -> None:
    results = _race(_build, str(tmp_path), 0, results=10)
    files = [f.name for f in tmp_path.iterdir() if not f.name.endswith(".lock")]  # the build locks stay
    assert not list(tmp_path.glob("*.tmp")) and files == [pair_name("shared", PAIR)]
    cache = PairCache(tmp_path, "same")
    got = cache.load("shared", PAIR)
    expected = Adjacency.from_graph(dense_graph(seed=0)).shared_facts(PAIR)
    assert got is not None and cache.rebuilt == 0
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    assert all(r == results[0] for r in results)


def _build_once(
    folder: str, log: str, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue
) -> None:
    adj = Adjacency.from_graph(dense_graph(seed=0)).use_pair_cache(PairCache(folder, "same"))
    real = adj._shared

    def counted(parts):
        with open(log, "a") as f:  # one line per build, appended by whichever process builds
            f.write(f"{os.getpid()}\n")
        time.sleep(0.3)  # a slow build: the other process asks for the pair meanwhile
        return real(parts)

    object.__setattr__(adj, "_shared", counted)
    barrier.wait()
    out.put([x.tolist() for x in adj.shared_facts(PAIR)])


def test_processes_needing_the_same_pair_build_it_once(tmp_path: Path) -> None:
    """Two forked processes ask for the same missing pair at once: one builds it under the pair's lock,
    the other waits and reads its file (16 workers cutting the same types otherwise built each pair up to
    16 times, each copy in its own memory). Both get the same arrays."""
    log = tmp_path / "builds.log"
    results = _race(_build_once, str(tmp_path / "pairs"), str(log), results=2)
    assert len(log.read_text().split()) == 1  # built by one process only
    assert results[0] == results[1]
    expected = Adjacency.from_graph(dense_graph(seed=0)).shared_facts(PAIR)
    assert results[0] == [x.tolist() for x in expected]
