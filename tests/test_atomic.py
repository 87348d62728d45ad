"""pipeline/core/atomic.py: the renamed artifact has ordinary permissions (not mkstemp's 0600), and a killed
writer's temporary is removed by the next write."""

from __future__ import annotations

import os
import stat

import pytest

from pipeline.core import atomic


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_written_file_and_built_folder_get_the_umask_permissions_not_mkstemps(tmp_path, umask_022):
    f = atomic.write_text(tmp_path / "a.json", "{}\n")
    assert stat.S_IMODE(f.stat().st_mode) == atomic.FILE_MODE
    d = atomic.temp_dir(tmp_path / "folder")
    assert stat.S_IMODE(d.stat().st_mode) == atomic.DIR_MODE
    # under the usual umask 022 others may read: 0644 / 0755
    if atomic._UMASK == 0o022:
        assert atomic.FILE_MODE == 0o644 and atomic.DIR_MODE == 0o755


def test_a_killed_writers_temporary_is_removed_and_a_failed_write_leaves_the_old_file(tmp_path):
    dest = tmp_path / "x.txt"
    atomic.write_text(dest, "old")
    stale = tmp_path / ".x.txt.abc.part"
    stale.write_text("half")

    def boom(tmp):
        tmp.write_text("new, half written")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic.write_with(dest, boom)
    assert dest.read_text() == "old"
    assert not stale.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def _refused(path, *needles):
    from pipeline.core.errors import ArtifactError

    with pytest.raises(ArtifactError) as err:
        atomic.check_docs_folder(path, "docs")
    line = str(err.value)
    assert "\n" not in line and line.startswith("docs=") and "give an existing folder" in line
    for needle in needles:
        assert needle in line, line
    return line


def test_a_docs_folder_is_an_existing_folder_or_a_checkouts_docs(tmp_path):
    atomic.check_docs_folder(tmp_path, "docs")  # an existing folder: any
    atomic.check_docs_folder(None, "docs")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    _refused(checkout / "docs", "its parent is no project checkout", str(checkout))
    for mark in atomic.CHECKOUT_MARKS:
        (checkout / mark).touch()
        atomic.check_docs_folder(checkout / "docs", "docs")  # made by the writer, one folder
        (checkout / mark).unlink()
    (checkout / "pyproject.toml").touch()
    _refused(checkout / "results", "no such folder")  # only a checkout's docs/ is made
    _refused(checkout / "deep" / "docs", f"no such folder (nor {checkout / 'deep'})")
    _refused("/", "the filesystem root")
    _refused(tmp_path / ".." / tmp_path.name / ".." / ".." / ".." / ".." / "..", "the filesystem root")
    (tmp_path / "f").write_text("x")
    _refused(tmp_path / "f", "an existing file, not a folder")
    _refused(tmp_path / "f" / "docs", "no such folder")
    assert not (checkout / "docs").exists() and not (checkout / "deep").exists()  # the check makes nothing


def test_the_tables_make_only_a_checkouts_docs_folder(tmp_path):
    from pipeline.core.errors import ArtifactError
    from pipeline.stages.evaluate import update_results

    with pytest.raises(ArtifactError):
        update_results([], tmp_path / "a" / "b" / "docs")
    with pytest.raises(ArtifactError):
        update_results([], tmp_path / "a" / "docs")
    assert not (tmp_path / "a").exists()
    (tmp_path / "mkdocs.yml").touch()
    written = update_results([], tmp_path / "docs")
    assert [p.parent for p in written] == [tmp_path / "docs"] * 3 and all(p.exists() for p in written)
