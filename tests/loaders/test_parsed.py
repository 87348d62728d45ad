"""A data set read once (loaders.parsed): the tables read back from their sealed binary file are the
parsed ones, frame for frame; a second load in one process is the same object; a changed source file is
noticed (in this process and in the next); a tampered binary file is refused; the data-version key is
kept beside the tables once computed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest

from loaders import parsed
from loaders.base import DatasetSpec, FileSpec, KGData, md5sum, parse_dataset
from loaders.parsed import load_dataset
from pipeline.core import sealed_arrays
from pipeline.store import ingest
from tests.conftest import require_data

FRAMES = ("entities", "relations", "rows", "test_negatives", "softlogic")


def spec_of(name: str = "tiny") -> DatasetSpec:
    files = tuple(FileSpec(role, f"{role}.tsv", "", None) for role in ("train", "val", "test"))
    return DatasetSpec(name, "test", "a hand-made named KG", files, 0, 0, "names")


def write_kg(folder: Path, conf: str = "0.9") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.tsv").write_text(f"ann\tknows\tbob\t{conf}\nbob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\n"
                                      "ann\tknows\tbob\t0.5\n")
    (folder / "val.tsv").write_text("cid\tknows\tann\t0.7\n")
    (folder / "test.tsv").write_text("bob\tlikes\tann\t0.4\ncid\tlikes\tbob\t0.0\n")
    return folder


def assert_same(a: KGData, b: KGData) -> None:
    for f in FRAMES:
        x, y = getattr(a, f), getattr(b, f)
        if x is None:
            assert y is None
            continue
        pd.testing.assert_frame_equal(x, y, check_exact=True)
    assert a.checksums == b.checksums and a.name == b.name


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty parsed cache of this test; nothing kept loaded from earlier tests."""
    monkeypatch.setenv("PIPELINE_PARSED_CACHE", str(tmp_path / "parsed"))
    parsed.forget_loaded()
    monkeypatch.setattr(parsed, "_MD5S", {})
    yield tmp_path / "parsed"
    parsed.forget_loaded()


def _parse(spec: DatasetSpec, folder: Path) -> KGData:
    paths = {f.role: folder / f.filename for f in spec.files}
    return parse_dataset(spec, paths, {f.filename: md5sum(folder / f.filename) for f in spec.files})


def test_the_tables_read_back_are_the_parsed_ones(cache: Path, tmp_path: Path) -> None:
    spec, folder = spec_of(), write_kg(tmp_path / "kg")
    first = load_dataset(spec, folder, verify=False)
    assert [p.name for p in cache.rglob("*.bin")] == [parsed.TABLES]
    parsed.forget_loaded()
    again = load_dataset(spec, folder, verify=False)
    assert again is not first
    assert_same(again, _parse(spec, folder))
    assert again.graph("test").equals(_parse(spec, folder).graph("test"))
    # the hand-computed mean of ann-knows-bob's two train rows, and the test negative kept apart
    g = again.graph("train")
    assert g.loc[(g["h"] == 0) & (g["r"] == 0) & (g["t"] == 1), "conf"].tolist() == [pytest.approx(0.7)]
    assert again.test_negatives[["h", "r", "t"]].values.tolist() == [[2, 1, 1]]


@pytest.mark.parametrize("name", ["ppi5k", "cn15k"])
def test_a_benchmark_read_back_is_the_parsed_one(cache: Path, name: str) -> None:
    from loaders import get_spec, load

    folder = require_data(name)
    spec = get_spec(name)
    load(name)
    parsed.forget_loaded()
    back = load(name)
    assert_same(back, parse_dataset(spec, {f.role: folder / f.filename for f in spec.files}, back.checksums))


def test_a_second_load_in_one_process_is_the_same_object(cache: Path, tmp_path: Path) -> None:
    spec, folder = spec_of(), write_kg(tmp_path / "kg")
    first = load_dataset(spec, folder, verify=False)
    first.graph("valid")
    again = load_dataset(spec, folder, verify=False)
    assert again is first and "valid" in again._graphs  # the merged graph comes along


def test_a_changed_source_file_is_noticed_in_this_process_and_the_next(cache: Path, tmp_path: Path) -> None:
    spec, folder = spec_of(), write_kg(tmp_path / "kg")
    before = load_dataset(spec, folder, verify=False)
    st = (folder / "train.tsv").stat()
    write_kg(folder, conf="0.1")  # the same size; its mtime put back below: only the ctime tells
    os.utime(folder / "train.tsv", ns=(st.st_atime_ns, st.st_mtime_ns))
    after = load_dataset(spec, folder, verify=False)
    assert after is not before
    assert_same(after, _parse(spec, folder))
    assert after.rows["conf"].iloc[0] == 0.1 and before.rows["conf"].iloc[0] == 0.9
    parsed.forget_loaded()  # the next process: the tables of the changed files, from their own file
    assert_same(load_dataset(spec, folder, verify=False), after)
    assert len(list(cache.rglob(parsed.TABLES))) == 2


def test_a_settled_files_md5_is_recorded_and_summed_again_after_a_write(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sealed_arrays, "_SETTLED", 0.05)
    f = tmp_path / "a.tsv"
    f.write_text("x\tr\ty\t0.5\n")
    time.sleep(0.1)  # settled
    want = md5sum(f)
    assert parsed.file_md5(f) == want
    sums: list[Path] = []
    monkeypatch.setattr("loaders.base.md5sum", lambda p: sums.append(p) or "summed")
    assert parsed.file_md5(f) == want  # this process' memo
    monkeypatch.setattr(parsed, "_MD5S", {})
    assert parsed.file_md5(f) == want and sums == []  # another process: the record on disk
    st = f.stat()
    with open(f, "r+b") as fh:  # one byte changed in place, the mtime put back
        fh.write(b"z")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert parsed.file_md5(f) == "summed" and len(sums) == 1


def test_a_tampered_tables_file_is_refused_and_parsed_again(cache: Path, tmp_path: Path) -> None:
    spec, folder = spec_of(), write_kg(tmp_path / "kg")
    truth = load_dataset(spec, folder, verify=False)
    (path,) = cache.rglob(parsed.TABLES)
    opened = sealed_arrays.open_checked(path, parsed.MAGIC, {})
    conf_at = int(opened.head["arrays"][7]["offset"])  # rows' conf: 0.9 becomes another float
    del opened
    with open(path, "r+b") as fh:
        fh.seek(conf_at + 7)
        fh.write(b"\x00")
    with pytest.raises(sealed_arrays.Invalid):
        sealed_arrays.open_checked(path, parsed.MAGIC, {})
    parsed.forget_loaded()
    again = load_dataset(spec, folder, verify=False)
    assert_same(again, truth)
    assert again.rows["conf"].iloc[0] == 0.9
    sealed_arrays.open_checked(path, parsed.MAGIC, {})  # parsed again and rewritten whole


def test_the_version_key_is_kept_beside_the_tables(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, folder = spec_of(), write_kg(tmp_path / "kg")
    want = ingest._content_key(_parse(spec, folder))
    assert ingest.content_key(load_dataset(spec, folder, verify=False)) == want
    parsed.forget_loaded()  # a later process reads it instead of computing it

    def no(kg: object) -> str:
        raise AssertionError("computed again")

    monkeypatch.setattr(ingest, "_content_key", no)
    assert ingest.content_key(load_dataset(spec, folder, verify=False)) == want
    write_kg(folder, conf="0.2")  # another version of the files: another key, computed afresh
    monkeypatch.undo()
    monkeypatch.setenv("PIPELINE_PARSED_CACHE", str(cache))
    assert ingest.content_key(load_dataset(spec, folder, verify=False)) == ingest._content_key(_parse(spec, folder))
    assert ingest._content_key(_parse(spec, folder)) != want


def test_the_cache_can_be_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPELINE_PARSED_CACHE", "off")
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    parsed.forget_loaded()
    spec, folder = spec_of(), write_kg(tmp_path / "kg")
    assert_same(load_dataset(spec, folder, verify=False), _parse(spec, folder))
    assert not (tmp_path / "home").exists()
