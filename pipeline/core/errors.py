"""Typed errors. The CLI turns each into one clear line and a non-zero exit code."""

from __future__ import annotations

import errno
import os


class PipelineError(Exception):
    """Base of every error the CLI reports as one line (exit code 2); the Python API raises the same.

    >>> import pipeline as pl
    >>> try:
    ...     pl.dataset("ppi5")
    ... except pl.PipelineError as exc:
    ...     print(exc)  # doctest: +ELLIPSIS
    unknown data set 'ppi5' (did you mean ppi5k?); known: ...
    """


class DataFormatError(PipelineError):
    """A data file is malformed: names the file, the 1-based line and the field."""

    def __init__(self, path: object, line: int | None, field: str | None, message: str) -> None:
        self.path, self.line, self.field = str(path), line, field
        where = self.path
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {message}")


class ChecksumError(PipelineError):
    """A downloaded or mirrored file does not have its published md5 sum."""


class UnknownNameError(PipelineError):
    """An unknown registry name (data set, model, query type, metric)."""


class StoreUnavailable(PipelineError):
    """The graph store cannot be reached or started."""


class QuerySyntaxError(PipelineError):
    """A soft query text does not parse; carries the 1-based column."""

    def __init__(self, text: str, column: int, message: str) -> None:
        self.text, self.column = text, column
        pointer = " " * (column - 1) + "^"
        super().__init__(f"column {column}: {message}\n  {text}\n  {pointer}")


class ResolutionError(PipelineError):
    """A query names an entity or relation that the data set does not have."""


class ArtifactError(PipelineError):
    """A run directory, export or query set is missing, truncated, foreign or of another data set."""


class CorruptArtifactError(ArtifactError):
    """An artifact's content no longer has the checksum it was written with (a flipped byte, an edit, a
    file swapped in): names the file (:mod:`pipeline.core.checksums`)."""

    def __init__(self, path: object, message: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


class PathError(PipelineError, OSError):
    """An OSError about a path the caller gave (an ``out`` folder under a file, a folder they cannot write):
    still an OSError (errno, filename), and a PipelineError whose message is the CLI's one line."""

    def __init__(self, original: OSError) -> None:
        super().__init__(original.errno, original.strerror, original.filename, None, original.filename2)
        where = str(original.filename) + (f" -> {original.filename2}" if original.filename2 is not None else "")
        self.line = f"{where}: {original.strerror or original}"

    def __str__(self) -> str:
        return self.line

    @classmethod
    def of(cls, exc: OSError) -> PathError | None:
        """The PathError of an OSError that names a file; None for one that names none (not the caller's
        path: left as it is)."""
        return None if exc.filename is None else cls(exc)


# a disk that cannot take more: full, over a quota, a file past its size limit, mounted read-only
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def os_error_line(exc: OSError) -> str | None:
    """The one line the CLI prints for an OSError: one about a path the user gave (:class:`PathError`), or
    a full disk (ENOSPC and its kin: pyarrow and Python's own writes raise them without a file name); None
    for any other (not the user's to fix: left as it is). Every writer of the project writes a temporary
    and renames it last (:mod:`pipeline.core.atomic`), so a failed write replaced nothing."""
    err = PathError.of(exc)
    if err is not None:
        return str(err)
    if exc.errno in DISK_ERRNOS:
        what = os.strerror(exc.errno) if exc.errno is not None else str(exc)
        return f"{what} (errno {exc.errno}) while writing: nothing was replaced or left half-written; free some space and run it again"
    return None


def close_matches(word: str, vocabulary: list[str], n: int = 5) -> list[str]:
    """Up to n vocabulary entries closest to word (for 'did you mean' messages)."""
    import difflib

    return difflib.get_close_matches(word, vocabulary, n=n, cutoff=0.6)


def unknown_name(kind: str, name: str, known: list[str]) -> UnknownNameError:
    """An UnknownNameError listing the known names and the closest ones."""
    hint = close_matches(name, known)
    msg = f"unknown {kind} '{name}'"
    if hint:
        msg += f" (did you mean {', '.join(hint)}?)"
    msg += f"; known: {', '.join(sorted(known))}"
    return UnknownNameError(msg)
