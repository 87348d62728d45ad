"""Atomic writes: the one helper every artifact goes through, so a crash or kill never leaves a file or a
folder that looks complete.

A file is written to a hidden temporary sibling (``.NAME.p<pid>-<start>.<random>.part``) in the same
folder and renamed over its destination (``os.replace``, atomic on POSIX); a folder is built the same way
and renamed into place last. A process killed mid-write leaves only such a hidden ``*.part`` sibling, which
the next write to the same destination removes (:func:`remove_stale`) -- only once its writer (the pid,
with the same start time, so a recycled pid is not mistaken for it) is gone: a concurrent writer's live
temporary is never taken from under it. :func:`exclusive` serialises whole jobs on one name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


def _start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot, Linux /proc), 0 where the system has
    no /proc (then the pid alone identifies the writer), None when no such process runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # it exists, owned by someone else
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0 if not Path("/proc/self/stat").exists() else None
    # the command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'
    return int(stat.rsplit(")", 1)[1].split()[19])


_ME = f"p{os.getpid()}-{_start_time(os.getpid()) or 0}"
_OWNER = re.compile(r"p(\d+)-(\d+)\.")


def _tmp_prefix(path: Path) -> str:
    return f".{path.name}."


def _my_prefix(path: Path) -> str:
    # a forked child gets its own pid: computed at each call, not only at import
    me = _ME if _ME.startswith(f"p{os.getpid()}-") else f"p{os.getpid()}-{_start_time(os.getpid()) or 0}"
    return f"{_tmp_prefix(path)}{me}."


def _writer_alive(name: str, prefix: str) -> bool:
    """Whether the writer named in a temporary's name still runs (False for names without one: left by
    a version that did not record its writer)."""
    m = _OWNER.match(name[len(prefix) :])
    if m is None:
        return False
    start = _start_time(int(m.group(1)))
    return start is not None and (start == 0 or start == int(m.group(2)))


def remove_stale(path: Path) -> int:
    """Delete the hidden temporaries that killed writers of ``path`` left beside it; returns how many. A
    temporary whose writer still runs (another process writing the same destination) is left alone."""
    n = 0
    prefix = _tmp_prefix(path)
    if path.parent.is_dir():
        for p in path.parent.glob(f"{prefix}*{PART}"):
            if _writer_alive(p.name, prefix):
                continue
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            n += 1
    return n


@contextmanager
def exclusive(lock: str | Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock`` (created if missing) for the block: a second process
    asking for it says once on stderr that it waits for ``what``, then waits. The kernel releases the
    lock when its holder dies, so a killed job never leaves it held. No-op where fcntl is missing."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for {what} (another process holds {lock})", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_with(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` to write a temporary file, then rename it to ``path``. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=_my_prefix(path), suffix=PART)
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
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=_my_prefix(path), suffix=PART))
    os.chmod(tmp, DIR_MODE)
    return tmp


def _named(option: str, path: str | Path) -> str:
    """The option and its value as the caller's front end spells them (``--out DIR`` / ``out='DIR'``);
    option: the keyword (``out``) or its flag (``--out``)."""
    from pipeline.core.errors import option as spelled

    return spelled(option.lstrip("-").replace("-", "_"), str(path))


def check_folder(path: str | Path | None, option: str = "out") -> None:
    """A path a command will create files in must be a folder, or not exist yet under a folder this
    process may write in; otherwise ArtifactError naming the option, before any work starts (an existing
    file, a path under a regular file, a folder without write permission)."""
    from pipeline.core.errors import ArtifactError

    if path is None:
        return
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ArtifactError(f"{_named(option, path)}: an existing file, not a folder")
    if target.is_dir() and target.resolve() == Path(target.resolve().anchor):
        raise ArtifactError(f"{_named(option, path)}: the filesystem root; give a folder of its own")
    _check_creatable(path, target, option)


def check_file(path: str | Path | None, option: str) -> None:
    """A file a command will write (``--plot FILE``): not a folder, and its folder creatable as for
    :func:`check_folder`; ArtifactError naming the option otherwise."""
    from pipeline.core.errors import ArtifactError

    if path is None:
        return
    if Path(path).is_dir():
        raise ArtifactError(f"{_named(option, path)}: a folder; give a file name such as {Path(path) / 'out.png'}")
    _check_creatable(path, Path(path).parent, option)


def _check_creatable(given: str | Path, folder: Path, option: str) -> None:
    """The nearest existing part of ``folder`` (where the missing folders will be created) must be a
    folder this process may write in."""
    from pipeline.core.errors import ArtifactError

    there = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
    if not there.is_dir():
        raise ArtifactError(f"{_named(option, given)}: {there} is a file, not a folder")
    if not os.access(there, os.W_OK | os.X_OK):
        raise ArtifactError(f"{_named(option, given)}: no permission to create files in {there}")


CHECKOUT_MARKS = ("mkdocs.yml", "pyproject.toml", ".git")  # what makes a folder a project checkout


def check_docs_folder(path: str | Path | None, option: str = "docs") -> None:
    """A folder whose results tables a command updates (``--update-docs``, ``--docs``): an existing folder
    (not the filesystem root), or a missing ``docs`` folder of a project checkout (its parent holds
    mkdocs.yml, pyproject.toml or .git), which is made then. Anything else (a path under missing folders,
    ``/``) is one ArtifactError naming the option, before any work: the tables once made every folder of
    whatever path was given, up to a mistyped root."""
    from pipeline.core.errors import ArtifactError

    if path is None:
        return
    target = Path(path).expanduser()
    accepted = "give an existing folder, or the docs/ folder of a project checkout (made when missing)"
    if target.is_dir():
        if target.resolve() == Path(target.resolve().anchor):
            raise ArtifactError(f"{_named(option, path)}: the filesystem root; {accepted}")
        _check_creatable(path, target, option)
        return
    if target.exists() or target.is_symlink():
        raise ArtifactError(f"{_named(option, path)}: {'an existing file' if target.exists() else 'a symbolic link to nothing'}, "
                            f"not a folder; {accepted}")
    parent = target.absolute().parent
    if target.name == "docs" and parent.is_dir() and any((parent / m).exists() for m in CHECKOUT_MARKS):
        _check_creatable(path, parent, option)
        return
    why = ("no such folder, and its parent is no project checkout (no mkdocs.yml, pyproject.toml or .git in "
           f"{parent})" if target.name == "docs" and parent.is_dir() else
           f"no such folder{'' if parent.is_dir() else f' (nor {parent})'}")
    raise ArtifactError(f"{_named(option, path)}: {why}; {accepted}")
