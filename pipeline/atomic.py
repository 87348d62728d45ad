"""Atomic writes: the one helper every artifact goes through, so a crash or kill never leaves a file or a
folder that looks complete.

A file is written to a hidden temporary sibling (``.NAME.<random>.part``) in the same folder and renamed
over its destination (``os.replace``, atomic on POSIX); a folder is built as ``.NAME.<random>.part`` and
renamed into place last. A process killed mid-write leaves only such a hidden ``*.part`` sibling, which the
next write to the same destination removes (:func:`remove_stale`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

PART = ".part"


def _umask() -> int:
    # read without changing it for good: os.umask has no getter
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp/mkdtemp create 0600/0700 so nobody else can read a half-written artifact; the renamed result gets
# the permissions an ordinary open() would have given it, so other users of a shared home can read it
_UMASK = _umask()
FILE_MODE = 0o666 & ~_UMASK
DIR_MODE = 0o777 & ~_UMASK


def _tmp_prefix(path: Path) -> str:
    return f".{path.name}."


def remove_stale(path: Path) -> int:
    """Delete the hidden temporaries a killed writer of ``path`` left beside it; returns how many."""
    n = 0
    if path.parent.is_dir():
        for p in path.parent.glob(f"{_tmp_prefix(path)}*{PART}"):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            n += 1
    return n


def write_with(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` to write a temporary file, then rename it to ``path``. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=_tmp_prefix(path), suffix=PART)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_bytes(path: str | Path, data: bytes) -> Path:
    return write_with(path, lambda tmp: tmp.write_bytes(data))


def write_text(path: str | Path, text: str) -> Path:
    return write_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: str | Path, doc: Any) -> Path:
    """Pretty, key-sorted JSON with a final newline (diffs of saved configs stay readable)."""
    return write_text(path, json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")


def temp_dir(path: str | Path) -> Path:
    """A new hidden temporary folder beside ``path`` to build it in (``os.replace(tmp, path)`` when done);
    what a killed earlier build of ``path`` left behind is removed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=_tmp_prefix(path), suffix=PART))
    os.chmod(tmp, DIR_MODE)
    return tmp


def check_folder(path: str | Path | None, option: str = "--out") -> None:
    """A path a command will create files in must be a folder or not exist yet; an existing file there is
    refused before any work starts (ArtifactError naming the option)."""
    from pipeline.errors import ArtifactError

    if path is not None and Path(path).exists() and not Path(path).is_dir():
        raise ArtifactError(f"{option} {path}: an existing file, not a folder")
