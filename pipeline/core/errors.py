"""Typed errors. The CLI turns each into one clear line and a non-zero exit code.

A message that names an option the caller gave spells it as the caller's front end does: :func:`option`
gives ``--per-type`` under the command line and ``per_type=`` in Python (``import pipeline as pl``), so the
same stage code speaks both languages. The CLI sets the front end once (:func:`use_front_end`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

# "python" (the API, the default for any caller) or "cli" (set by the command group for its commands)
_FRONT_END: contextvars.ContextVar[str] = contextvars.ContextVar("pipeline_front_end", default="python")

# options whose command-line flag is not the keyword with dashes (keyword -> flag): filled by the options'
# declarations (pipeline.core.options)
_FLAGS: dict[str, str] = {}


def register_flag(keyword: str, flag: str) -> None:
    """Declare that the option ``keyword`` is spelled ``flag`` on the command line."""
    _FLAGS[keyword] = flag


def front_end() -> str:
    """``"cli"`` inside a ``pipeline`` command, ``"python"`` everywhere else."""
    return _FRONT_END.get()


@contextmanager
def use_front_end(name: str) -> Iterator[None]:
    """Messages raised inside name options as front end ``name`` (``"cli"`` or ``"python"``) spells them."""
    token = _FRONT_END.set(name)
    try:
        yield
    finally:
        _FRONT_END.reset(token)


def option(keyword: str, value: object = None) -> str:
    """How the current front end names the option whose Python keyword is ``keyword`` (with ``value``
    when given): ``--per-type 5`` / ``per_type=5`` under the CLI / in Python; a switch (value True) is
    ``--overwrite`` / ``overwrite=True``."""
    if front_end() == "cli":
        flag = _FLAGS.get(keyword, "--" + keyword.replace("_", "-"))
        return flag if value is None or value is True else f"{flag} {value}"  # a switch: the flag alone
    return f"{keyword}=" if value is None else f"{keyword}={value!r}"


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
    """A data file is malformed: names the file, the 1-based line and the field (``unit`` "row" for the rows
    of an in-memory table)."""

    def __init__(self, path: object, line: int | None, field: str | None, message: str, unit: str = "line") -> None:
        self.path, self.line, self.field, self.detail = str(path), line, field, message
        where = self.path
        if line is not None:
            where += f", {unit} {line}"
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
