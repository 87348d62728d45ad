"""Ownership before trust: the embedded store's folder and every file in it are its owner's, or they are not
used (design section 4, "What the store promises").

A home another OS user can write to (``PIPELINE_HOME`` in a shared folder) must give that user nothing: a
``store`` folder they made (with their own passwords planted in it), a symlink they put where the folder or
one of its files belongs (to make this user chmod, truncate or overwrite a victim), or a file of theirs in
the folder are refused with one line naming the path, before anything is read, written or started there.

The rules, checked on the entry itself (``lstat``, never following a link):

- the folder: a real directory (not a symlink) owned by this process's user; it is then made 0700, so no
  one else can add anything to it from that moment on;
- every entry in it (and in the server's append-only folder): owned by this user, a regular file or a
  directory, never a symlink (inside a 0700 folder its own mode keeps nobody out or in, except for the
  credentials file, which must also be unreadable by group and others: else its passwords may be known);
- every file the project writes there is opened with ``O_NOFOLLOW`` relative to the verified folder (the
  folder's own file descriptor), created ``O_EXCL`` under a temporary name and renamed into place, so a
  path swapped between the check and the write still cannot redirect it.

The server itself is started with that folder as its working directory (``fchdir`` on the verified
descriptor, ``--dir .``), so it writes its log and append-only file into the folder that was checked.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipeline.core.errors import StoreUnavailable

_GROUP_OTHER_ANY = stat.S_IRWXG | stat.S_IRWXO


class UnsafeStorePath(StoreUnavailable):
    """A store folder or file that is not this user's alone (another owner, a symlink, a shared mode):
    refused before it is used; names the path and what is wrong."""


def _uid_name(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _refuse(path: Path, why: str, hint: str | None = None) -> UnsafeStorePath:
    hint = hint or (
        f"the store uses only a folder and files of your own (uid {os.geteuid()}): move it away or point "
        "PIPELINE_HOME elsewhere"
    )
    return UnsafeStorePath(f"{path}: {why}; {hint}")


def check_entry(path: Path, st: os.stat_result, secret: bool = False) -> None:
    """Refuse (UnsafeStorePath) an entry not owned by this user, a symlink, anything but a file or a
    folder, or (``secret``) one group or others may read or write."""
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, "a symbolic link where the store keeps a file or folder of its own")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise _refuse(path, "not a regular file or folder")
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"owned by {_uid_name(st.st_uid)}, not by you")
    if secret and st.st_mode & _GROUP_OTHER_ANY:
        raise _refuse(
            path, f"readable by other users (mode {stat.S_IMODE(st.st_mode):o}): its passwords may be known",
            "delete it and restart the store (`pipeline store stop; pipeline store start`) for new ones",
        )


def private_folder(folder: Path) -> Path:
    """Create ``folder`` (parents with the user's umask) or check the one there: a real folder of this
    user's (UnsafeStorePath otherwise), made 0700; then every entry in it and in its sub-folders is checked
    (:func:`check_entry`). Returns the folder."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(folder, stat.S_IRWXU)
    except FileExistsError:
        pass
    with open_folder(folder) as fd:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise _refuse(folder, f"owned by {_uid_name(st.st_uid)}, not by you")
        os.fchmod(fd, stat.S_IRWXU)  # from here on nobody else can add an entry
        _check_tree(folder, fd)
    return folder


def _check_tree(path: Path, fd: int, depth: int = 0) -> None:
    for name in os.listdir(fd):
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:  # gone since the listing: a running server's temporary (its AOF rewrite)
            continue
        child = path / name
        check_entry(child, st, secret=name == "credentials.json")
        if stat.S_ISDIR(st.st_mode) and depth < 2:
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                continue
            try:
                _check_tree(child, sub, depth + 1)
            finally:
                os.close(sub)


@contextmanager
def open_folder(folder: Path) -> Iterator[int]:
    """A descriptor of ``folder`` itself, never of what a symlink there points at (UnsafeStorePath)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        try:
            st = os.lstat(folder)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise _refuse(Path(folder), "a symbolic link where the store keeps its folder") from None
        if st is not None and st.st_uid != os.geteuid():
            raise _refuse(Path(folder), f"owned by {_uid_name(st.st_uid)}, not by you") from None
        raise StoreUnavailable(f"cannot open the store folder {folder}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise _refuse(Path(folder), f"owned by {_uid_name(st.st_uid)}, not by you")
        yield fd
    finally:
        os.close(fd)


def read_file(folder: Path, name: str, secret: bool = False) -> bytes | None:
    """The bytes of ``folder/name``, or None when there is no such file; the folder and the file must pass
    :func:`check_entry` (a symlink is never followed). Raises UnsafeStorePath or StoreUnavailable."""
    path = Path(folder) / name
    try:
        with open_folder(Path(folder)) as dfd:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if _is_link(name, dfd):
                    raise _refuse(path, "a symbolic link where the store keeps a file of its own") from None
                raise StoreUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None
            with os.fdopen(fd, "rb") as fh:
                check_entry(path, os.fstat(fh.fileno()), secret=secret)
                return fh.read()
    except StoreUnavailable:
        raise
    except FileNotFoundError:
        return None


def _is_link(name: str, dfd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def write_file(folder: Path, name: str, data: bytes, mode: int = stat.S_IRUSR | stat.S_IWUSR) -> None:
    """Write ``folder/name`` atomically and privately: a new temporary (``O_EXCL | O_NOFOLLOW``, ``mode``
    from its first byte) in the verified folder, fsynced, renamed over ``name`` (a symlink there is
    replaced, never followed). Raises UnsafeStorePath, StoreUnavailable or OSError (a full disk)."""
    with open_folder(Path(folder)) as dfd:
        _check_existing(Path(folder), name, dfd)
        tmp = f".{name}.{os.getpid()}.part"
        try:
            os.unlink(tmp, dir_fd=dfd)  # a leftover of a killed writer of this pid
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dfd)
        try:
            os.fchmod(fd, mode)  # the umask may have taken bits away; never adds any
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass
            raise


def _check_existing(folder: Path, name: str, dfd: int) -> None:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    check_entry(folder / name, st)


def open_append(folder: Path, name: str, truncate: bool = False) -> int:
    """A descriptor for writing ``folder/name`` (created 0600; truncated with ``truncate``), never through
    a symlink and never a file of another owner (UnsafeStorePath). The caller closes it."""
    with open_folder(Path(folder)) as dfd:
        _check_existing(Path(folder), name, dfd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if truncate else os.O_APPEND)
        fd = os.open(name, flags, stat.S_IRUSR | stat.S_IWUSR, dir_fd=dfd)
    check_entry(Path(folder) / name, os.fstat(fd))
    return fd


def unlink(folder: Path, name: str) -> None:
    """Remove ``folder/name`` if there (a symlink is removed itself, never its target)."""
    with open_folder(Path(folder)) as dfd:
        try:
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            pass
