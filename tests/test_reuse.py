"""In one Python process (a notebook), a second ``pl.query`` or ``pl.answer`` reuses what the first one
loaded (the parsed data set, the graph's or the export's engine index) and answers exactly as a fresh
process would; a data set re-ingested with other facts, or an export replaced in its folder, is noticed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pipeline as pl
from loaders import parsed
from pipeline.formats import engine_index
from tests.store.test_user_kg import toy_kg

TEXT = "links(node_00, ?x) & feeds(?x, ?y)"
OTHER = "links(node_00, ?y, 0.2) | blocks(?y, node_03)"


@pytest.fixture
def tiny(fresh_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PIPELINE_STORE", fresh_store.uri)
    f = tmp_path / "kg.tsv"
    f.write_text(toy_kg())
    pl.ingest("tiny", source=f, progress=False)
    run = pl.train("tiny", model="ukge_logi", out=tmp_path / "run", epochs=3, dim=8, device="cpu", progress=False)
    adj = pl.export(run, threshold=0.3, out=tmp_path / "adj", progress=False)
    qs = pl.sample("tiny", split="test", alpha="zero", beta="equal", per_type=5, seed=0, types="1p,2m",
                   out=tmp_path / "q", browse=False, progress=False)
    return {"run": run, "adj": adj, "qs": qs, "tmp": tmp_path, "tsv": f}


class Counts:
    """How often the costly steps of a query ran: parsing the data set's files, reading its parsed tables
    back, building an observed graph's index, loading an export's index."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = {"parse": 0, "read back": 0, "graph index": 0, "export index": 0}
        for key, owner, name in (("parse", "loaders.base", "parse_dataset"), ("read back", parsed, "read"),
                                 ("graph index", engine_index, "as_adjacency"), ("export index", engine_index, "_load")):
            self._spy(monkeypatch, key, owner, name)

    def _spy(self, monkeypatch: pytest.MonkeyPatch, key: str, owner: object, name: str) -> None:
        import importlib

        mod = importlib.import_module(owner) if isinstance(owner, str) else owner
        real = getattr(mod, name)

        def counted(*a: object, **k: object) -> object:
            self.n[key] += 1
            return real(*a, **k)

        monkeypatch.setattr(mod, name, counted)

    def take(self) -> dict[str, int]:
        got, self.n = dict(self.n), dict.fromkeys(self.n, 0)
        return got


def fresh_process() -> None:
    """What a new process starts without: nothing kept loaded (the files on disk stay)."""
    parsed.forget_loaded()
    engine_index.forget_kept()


def frame(text: str, **source: object) -> pd.DataFrame:
    return pl.query(text, dataset="tiny", top=None, **source).frame


def test_a_second_query_reuses_what_the_first_loaded(tiny: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    adj = tiny["adj"]
    fresh_process()
    counts = Counts(monkeypatch)
    for source in ({"adjacency": adj}, {"graph": "test"}):
        first = frame(TEXT, **source)
        counts.take()
        second = frame(OTHER, **source)
        assert counts.take() == {"parse": 0, "read back": 0, "graph index": 0, "export index": 0}, source
        fresh_process()  # the same answers as a process that starts afresh
        pd.testing.assert_frame_equal(frame(TEXT, **source), first)
        pd.testing.assert_frame_equal(frame(OTHER, **source), second)
        assert counts.take()["read back"] == 1  # the new process read the tables back, parsed nothing
    qs, out = tiny["qs"], tiny["tmp"] / "answers"
    a = pl.answer(qs, adjacency=adj, out=out, workers=1, progress=False).frame
    counts.take()
    b = pl.answer(qs, adjacency=adj, out=out, workers=1, progress=False).frame
    assert counts.take()["export index"] == 0
    pd.testing.assert_frame_equal(a, b)


def test_a_replaced_export_and_a_reingested_data_set_are_noticed(tiny: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    adj, run = tiny["adj"], tiny["run"]
    before = frame(OTHER, adjacency=adj)
    pl.export(run, threshold=0.6, out=adj.path, overwrite=True, progress=False)  # the same folder, other facts
    after = frame(OTHER, adjacency=adj)
    fresh_process()
    pd.testing.assert_frame_equal(frame(OTHER, adjacency=adj), after)
    assert not after.equals(before)

    graph_before = frame(TEXT, graph="test")
    f = tiny["tsv"]
    lines = f.read_text().splitlines()
    head, rest = lines[0], [ln.split("\t") for ln in lines[1:]]
    changed = [[h, r, t, "0.05" if h == "node_00" else c] for h, r, t, c in rest]
    f.write_text("\n".join([head, *("\t".join(x) for x in changed)]) + "\n")
    pl.ingest("tiny", source=f, progress=False)
    graph_after = frame(TEXT, graph="test")
    fresh_process()
    pd.testing.assert_frame_equal(frame(TEXT, graph="test"), graph_after)
    assert not graph_after.equals(graph_before)
