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
