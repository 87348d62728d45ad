"""`pipeline export` builds what the first `pipeline answer` would: the engine index and the
multi-edge relation pairs, as the very files answering writes (byte for byte), so answers are bit for bit
those of a first answer that built them itself; within a time budget; nothing with the cache off."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from pipeline.core import sealed_arrays
from pipeline.engine import search_batch
from pipeline.formats import pair_cache
from pipeline.formats.engine_index import load_engine_index
from pipeline.formats.pair_cache import for_export
from pipeline.softquery import Atom, Conjunction, Const, Query, Var
from pipeline.stages.export_prepare import candidate_keys, multi_edge_pairs, prepare_answering
from tests.export.test_export import _train, export_adjacency

X, Y = Var("x"), Var("y")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory.mktemp("prep") / "logi", "ukge_logi")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.bin"))}


def test_multi_edge_pairs_by_hand() -> None:
    """Ordered pairs of distinct relations sharing an (h, t), most shared first; a repeated fact and a
    relation alone on its (h, t) add nothing."""
    g = pd.DataFrame(
        [(0, 0, 1), (0, 1, 1), (0, 2, 1), (2, 0, 3), (2, 1, 3), (2, 1, 3), (4, 2, 5), (6, 3, 7)],
        columns=["h", "r", "t"],
    )
    # (0, 1) on (0, 1) and (2, 3); (0, 2) and (1, 2) on (0, 1) only
    assert multi_edge_pairs(g) == [(0, 1), (1, 0), (0, 2), (1, 2), (2, 0), (2, 1)]
    assert multi_edge_pairs(g[g["h"] > 3]) == []
    assert candidate_keys(3, None) == [((True, a), (True, b)) for a in range(3) for b in range(3) if a != b]
    assert candidate_keys(9, g.iloc[3:5]) == [((True, 0), (True, 1)), ((True, 1), (True, 0))]


def _multi_edge_queries(n: int) -> list[Query]:
    """2m and im on the toy's two relations, both orders, one at alpha > 0 (the stream path's filter)."""
    out = []
    for e in range(0, n, 4):
        out.append(Query((Conjunction((Atom(Const(e), 0, X), Atom(X, 0, Y), Atom(X, 1, Y, 0.0, 0.5))),)))
        out.append(
            Query(
                (
                    Conjunction(
                        (
                            Atom(Const(e), 1, X),
                            Atom(Const((e + 1) % n), 0, X),
                            Atom(X, 1, Y, 0.2, 1.0),
                            Atom(X, 0, Y, 0.0, 2.0),
                        )
                    ),
                )
            )
        )
    return out


def test_export_builds_the_files_a_first_answer_would_and_the_same_answers(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = tmp_path / "prepared"
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(prepared))
    man = export_adjacency(run, threshold=0.3, out=tmp_path / "exp", progress=False)
    done = man["prepared"]
    assert done["pairs"] == 2 and done["pairs_left"] == 0 and done["bytes"] > 0  # toy: every ordered pair
    folder = for_export(tmp_path / "exp").folder
    assert folder.parent == prepared
    built = _files(folder)
    assert {"index.bin", "shared-h0-h1.bin", "shared-h1-h0.bin", "front-h0-h1.bin", "front-h1-h0.bin"} == set(built)
    # the next `pipeline answer` checks these young files in a background thread from its start
    ahead = pair_cache.check_ahead(tmp_path / "exp")
    assert ahead is not None and {p.name for p in sealed_arrays._AHEAD} >= set(built)
    ahead.join()

    # the first answer on a copy of the export (same identity: same manifest, sizes and mtimes) with an
    # empty cache builds the same files, byte for byte, through answering alone
    shutil.copytree(tmp_path / "exp", tmp_path / "copy")
    cold_root = tmp_path / "cold"
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(cold_root))
    assert for_export(tmp_path / "copy").identity == for_export(tmp_path / "exp").identity
    adj, _ = load_engine_index(tmp_path / "copy")
    queries = _multi_edge_queries(adj.n_entities)
    cold = search_batch(queries, adj)
    for key in candidate_keys(adj.n_relations, None):  # answering's own calls, for whatever it skipped
        adj.shared_facts(key)
        adj.column_front(key)
    assert _files(cold_root / folder.name) == built

    # answers on the prepared export: bit for bit those of the cold first answer and of no cache at all
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(prepared))
    warm_adj, _ = load_engine_index(tmp_path / "exp")
    assert warm_adj.pair_cache is not None and warm_adj.has_front(((True, 0), (True, 1)))
    warm = search_batch(queries, warm_adj)
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", "off")
    plain_adj, _ = load_engine_index(tmp_path / "exp")
    assert plain_adj.pair_cache is None
    plain = search_batch(queries, plain_adj)
    assert torch.equal(warm, cold) and torch.equal(warm, plain)
    assert torch.isfinite(warm).any()


def test_budget_index_first_then_pairs_and_nothing_with_the_cache_off(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(tmp_path / "pairs"))
    man = export_adjacency(run, threshold=0.3, out=tmp_path / "exp", progress=False, prepare_seconds=0)
    assert man["prepared"]["pairs"] == 0 and man["prepared"]["pairs_left"] == 0
    assert set(_files(for_export(tmp_path / "exp").folder)) == {"index.bin"}  # the index whatever the budget
    # the same export again (cached): prepared on the way out, now with its pairs
    again = export_adjacency(run, threshold=0.3, out=tmp_path / "exp", progress=False)
    assert again["cached"] and again["prepared"]["pairs"] == 2
    assert len(_files(for_export(tmp_path / "exp").folder)) == 5
    # no preparation asked: no key; the cache off: nothing written, said so
    none = export_adjacency(run, threshold=0.3, out=tmp_path / "exp2", progress=False, prepare_seconds=None)
    assert "prepared" not in none and not for_export(tmp_path / "exp2").folder.exists()
    # a byte budget: the pairs stop once their files pass it (checked before each pair)
    capped = prepare_answering(tmp_path / "exp2", max_bytes=1)
    assert capped["pairs"] == 1 and capped["pairs_left"] == 1
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", "off")
    off = export_adjacency(run, threshold=0.3, out=tmp_path / "exp3", progress=False)
    assert "PIPELINE_PAIR_CACHE" in off["prepared"]["skipped"]
    assert prepare_answering(tmp_path / "exp3")["skipped"] == off["prepared"]["skipped"]
    assert os.listdir(tmp_path / "exp3")  # the export itself is complete either way


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cuda_answer_reads_the_prepared_pairs_and_writes_the_same_files(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU the first answer after export copies the prepared pairs to the device (nothing built: the
    builders are made to fail) and answers as the CPU does; with an empty cache it builds them on the
    device and writes, from host copies, the files the export writes, byte for byte."""
    from pipeline.engine.adjacency import Adjacency

    prepared = tmp_path / "prepared"
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(prepared))
    export_adjacency(run, threshold=0.3, out=tmp_path / "exp", progress=False)
    built = _files(for_export(tmp_path / "exp").folder)
    cpu_adj, _ = load_engine_index(tmp_path / "exp")
    queries = _multi_edge_queries(cpu_adj.n_entities)
    on_cpu = search_batch(queries, cpu_adj)

    def refuse(*_a, **_k):
        raise AssertionError("a prepared pair was built again")

    with monkeypatch.context() as m:
        m.setattr(Adjacency, "_shared", refuse)
        m.setattr(Adjacency, "_front", refuse)
        gpu_adj, _ = load_engine_index(tmp_path / "exp", device="cuda")
        assert gpu_adj.pair_cache is not None and gpu_adj.has_front(((True, 0), (True, 1)))
        on_gpu = search_batch(queries, gpu_adj).cpu()
    assert torch.equal(torch.isneginf(on_cpu), torch.isneginf(on_gpu))
    fin = torch.isfinite(on_cpu)
    assert torch.allclose(on_cpu[fin], on_gpu[fin], atol=1e-5)

    shutil.copytree(tmp_path / "exp", tmp_path / "copy")
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(tmp_path / "cold"))
    adj, _ = load_engine_index(tmp_path / "copy", device="cuda")
    for key in candidate_keys(adj.n_relations, None):
        adj.shared_facts(key)
        adj.column_front(key)
    cold = _files(for_export(tmp_path / "copy").folder)
    assert {k: v for k, v in cold.items() if k != "index.bin"} == {k: v for k, v in built.items() if k != "index.bin"}
