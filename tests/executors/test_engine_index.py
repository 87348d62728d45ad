"""The export's engine index in the pair cache: built once from the relation files, then
memory-mapped by every later process; the same arrays as indexing the export anew; a flipped byte or a
changed export means a rebuild, never a different answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import pipeline.formats.engine_index as engine_index
from pipeline.engine import as_adjacency, search_batch
from pipeline.formats.adjacency import load_adjacency
from pipeline.formats.queryset import read_query_set


def _arrays(adj) -> list[torch.Tensor]:
    return [*engine_index._arrays(adj)]


def test_index_built_once_then_mapped(
    toy_pipeline: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIPELINE_PAIR_CACHE", str(tmp_path / "pairs"))
    export = toy_pipeline["export"]
    graph, _ = load_adjacency(export)
    plain = as_adjacency(graph)
    queries = read_query_set(toy_pipeline["test"]).queries()
    expected = search_batch(queries, plain)

    built, manifest = engine_index.load_engine_index(export, "toy")
    files = list((tmp_path / "pairs").rglob("index.bin"))
    assert len(files) == 1 and manifest["dataset"] == "toy"

    def no_read(*_: object, **__: object) -> None:
        raise AssertionError("read the relation files, though the index file is valid")

    monkeypatch.setattr(engine_index, "load_adjacency", no_read)
    mapped, _ = engine_index.load_engine_index(export, "toy")
    assert mapped.pair_cache is not None
    for a, b in zip(_arrays(plain), _arrays(mapped), strict=True):
        assert torch.equal(a, b) and a.dtype == b.dtype
    assert torch.equal(search_batch(queries, mapped), expected)
    assert torch.equal(search_batch(queries, built), expected)

    monkeypatch.setattr(engine_index, "load_adjacency", load_adjacency)
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0x01  # a flipped bit in the arrays
    files[0].write_bytes(bytes(data))
    rebuilt, _ = engine_index.load_engine_index(export, "toy")
    assert torch.equal(search_batch(queries, rebuilt), expected)
    assert files[0].read_bytes() != bytes(data)  # rewritten whole


def test_off_and_other_sizes(toy_pipeline: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.core.errors import ArtifactError

    monkeypatch.setenv("PIPELINE_PAIR_CACHE", "off")
    adj, _ = engine_index.load_engine_index(toy_pipeline["export"])
    assert adj.pair_cache is None
    with pytest.raises(ArtifactError, match="not 'other'"):
        engine_index.load_engine_index(toy_pipeline["export"], "other")
