"""PIPELINE_DATA names a local mirror holding one folder per data set. A mirror that is missing, a file,
or without the data set's folder is one line naming the variable and the path; nothing is downloaded in
its place (before, each fell back to the upstream URL without a word)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loaders import base, get_spec
from loaders.parsed import load_dataset
from pipeline.core.errors import PipelineError


@pytest.fixture
def no_download(monkeypatch):
    """Every download attempt recorded (and none made)."""
    tried: list[str] = []

    def fake(url: str, dest: Path) -> None:
        tried.append(url)
        raise PipelineError(f"cannot download {url}: not in this test")

    monkeypatch.setattr(base, "_download", fake)
    return tried


def refused(monkeypatch, value: str, name: str = "ppi5k") -> str:
    monkeypatch.setenv("PIPELINE_DATA", value)
    with pytest.raises(PipelineError) as err:
        load_dataset(get_spec(name))
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"PIPELINE_DATA={value}")
    return line


def test_a_missing_mirror_is_refused(monkeypatch, tmp_path, no_download):
    line = refused(monkeypatch, str(tmp_path / "nowhere"))
    assert ": no such folder (a local mirror holds one folder per data set" in line
    assert "unset PIPELINE_DATA to download" in line and no_download == []


def test_a_file_as_the_mirror_is_refused(monkeypatch, tmp_path, no_download):
    (tmp_path / "data.txt").write_text("x")
    assert ": is a file, not a folder" in refused(monkeypatch, str(tmp_path / "data.txt"))
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert ": a symbolic link to nothing" in refused(monkeypatch, str(tmp_path / "dangling"))
    assert no_download == []


def test_a_mirror_without_the_data_set_says_what_it_holds(monkeypatch, tmp_path, no_download):
    (tmp_path / "cn15k").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "notes.md").write_text("x")
    line = refused(monkeypatch, str(tmp_path), "ppi5k")
    assert f"PIPELINE_DATA={tmp_path} has no folder ppi5k/ (it holds cn15k/;" in line
    assert "--source" in line and no_download == []
    (tmp_path / "PPI5K").mkdir()
    assert "(did you mean PPI5K/? folder names are matched exactly)" in refused(monkeypatch, str(tmp_path))
    (tmp_path / "ppi5k").write_text("x")
    assert f"{tmp_path / 'ppi5k'} is not a folder" in refused(monkeypatch, str(tmp_path))
    assert no_download == []


def test_an_empty_mirror_holds_no_folder(monkeypatch, tmp_path, no_download):
    assert "(it holds no folder;" in refused(monkeypatch, str(tmp_path))


def test_the_mirror_folder_is_taken_and_a_blank_variable_is_unset(monkeypatch, tmp_path, no_download):
    (tmp_path / "ppi5k").mkdir()
    monkeypatch.setenv("PIPELINE_DATA", str(tmp_path))
    assert base.resolve_source(get_spec("ppi5k"), None) == tmp_path / "ppi5k"
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    for blank in ("", "  "):
        monkeypatch.setenv("PIPELINE_DATA", blank)
        with pytest.raises(PipelineError, match="cannot download"):
            base.resolve_source(get_spec("ppi5k"), None)  # unset: the download path
    assert len(no_download) == 2


def test_source_wins_over_a_broken_mirror(monkeypatch, tmp_path, no_download):
    (tmp_path / "mine").mkdir()
    monkeypatch.setenv("PIPELINE_DATA", str(tmp_path / "nowhere"))
    assert base.resolve_source(get_spec("ppi5k"), tmp_path / "mine") == tmp_path / "mine"
