"""A full disk: answer, export, sample, ingest --from and synth gave `OSError: [Errno 28]`
tracebacks (pyarrow's and Python's writes raise it without a file name). Now one line, and nothing stored
is lost: every writer writes a temporary and renames it last, so what was there stays as it was. Tried on a
real 256 KiB tmpfs filled to the last byte (root, where mounting works) and, everywhere, with the write
made to fail by hand."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.errors import os_error_line


def one_line_full(res) -> None:
    # (a progress bar may precede the line on stderr without a line break)
    assert res.exit_code == 2 and res.stderr.count("error: ") == 1, res.output
    assert "error: No space left on device (errno 28)" in res.stderr
    assert "Traceback" not in res.output


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs with a file already there (to show it survives), then filled to the last byte."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mnt / "ans").mkdir()
        (mnt / "ans" / "kept.txt").write_text("an earlier result\n")
        fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_every_writing_command_on_a_full_disk_is_one_line_and_loses_nothing(tiny_flow, full_disk, tmp_path, monkeypatch):
    flow, name = tiny_flow, tiny_flow["name"]
    before = sorted(p.name for p in full_disk.rglob("*"))
    cases = [
        ["answer", flow["sets"]["test"], "--adjacency", str(flow["adj"]), "--out", str(full_disk / "ans"),
         "--workers", "1"],
        ["export", str(flow["run"]), "--threshold", "0.05", "--allow-dense", "--out", str(full_disk / "exp")],
        ["sample", name, "--out", str(full_disk / "qs"), "--types", "1p", "--per-type", "2", "--store", flow["uri"],
         "--no-browse"],
        ["synth", "fullsynth", "--entities", "30", "--relations", "2", "--facts", "90", "--out",
         str(full_disk / "s.tsv"), "--store", flow["uri"]],
    ]
    for args in cases:
        one_line_full(CliRunner().invoke(cli, args))
    # ingest --from: the record goes under PIPELINE_HOME, here the full disk
    src = tmp_path / "kg.tsv"
    src.write_text("a\tr\tb\t0.5\nb\tr\tc\t0.25\nc\tr\ta\t0.75\na\tr\tc\t1\n")
    monkeypatch.setenv("PIPELINE_HOME", str(full_disk / "home"))
    one_line_full(CliRunner().invoke(cli, ["ingest", "fullkg", "--from", str(src), "--store", flow["uri"]]))
    after = sorted(p.name for p in full_disk.rglob("*") if p.name != "home" and "home" not in p.parts)
    assert (full_disk / "ans" / "kept.txt").read_text() == "an earlier result\n"
    # nothing half-written left behind: no temporaries, no partial answers, exports or query sets
    assert [p for p in after if p not in before and not (full_disk / p).is_dir()] == []
    assert not any(p.name.endswith(".part") for p in full_disk.rglob("*"))


def test_a_failed_write_is_one_line_everywhere(tiny_flow, tmp_path, monkeypatch):
    """The same without a mount: the project's atomic writer and pyarrow's file writer made to fail with
    ENOSPC (no file name, as the real ones raise it)."""
    from pipeline.core import atomic

    def full(path, write):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic, "write_with", full)
    flow = tiny_flow
    kept = tmp_path / "ans"
    kept.mkdir()
    one_line_full(CliRunner().invoke(cli, ["answer", flow["sets"]["test"], "--adjacency", str(flow["adj"]),
                                           "--out", str(kept), "--workers", "1"]))
    one_line_full(CliRunner().invoke(cli, ["synth", "s9", "--entities", "30", "--relations", "2", "--facts", "90",
                                           "--out", str(tmp_path / "s.tsv"), "--store", flow["uri"]]))
    assert list(kept.iterdir()) == [] and not (tmp_path / "s.tsv").exists()
    import pyarrow as pa

    def no_room(*args, **kwargs):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pa, "OSFile", no_room)
    one_line_full(CliRunner().invoke(cli, ["export", str(flow["run"]), "--threshold", "0.05", "--allow-dense",
                                           "--out", str(tmp_path / "exp")]))
    assert not (tmp_path / "exp").exists()


def test_the_line_of_a_full_disk():
    assert os_error_line(OSError(errno.ENOSPC, "No space left on device")).startswith(
        "No space left on device (errno 28) while writing: nothing was replaced")
    assert os_error_line(OSError(errno.EACCES, "Permission denied")) is None  # no file named: not ours
    assert os_error_line(PermissionError(errno.EACCES, "Permission denied", "/x")) == "/x: Permission denied"
