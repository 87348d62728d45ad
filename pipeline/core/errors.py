"""Typed errors. The CLI turns each into one clear line and a non-zero exit code.

A message that names an option the caller gave spells it as the caller's front end does: :func:`option`
gives ``--per-type`` under the command line and ``per_type=`` in Python (``import pipeline as pl``), so the
same stage code speaks both languages. The CLI sets the front end once (:func:`use_front_end`).
"""

from __future__ import annotations

import contextvars
import errno
import os
import unicodedata
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
        if isinstance(value, str):  # as typed in a shell: `--types ''`, `--device ' '`
            import shlex

            value = shlex.quote(value)
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

    In IPython and Jupyter it shows as that one line (:meth:`_render_traceback_`), not as a traceback
    through the project's internals; ``%tb`` right after shows the traceback.
    """

    def _render_traceback_(self) -> list[str]:
        """What IPython (a Jupyter kernel, the IPython shell) shows for this error: its class and message,
        with where to find the traceback, in at most 3 lines (:func:`notebook_lines`). Shown a second time
        (``%tb`` shows the last error again), the full traceback as IPython draws any other error."""
        if getattr(self, "_shown_once", False):
            full = _ipython_traceback(self)
            if full is not None:
                return full
        self._shown_once = True
        return notebook_lines(self)


# where IPython's one-line rendering of a PipelineError says the traceback is
TRACEBACK_HINT = "(%tb: the traceback)"
_RED, _GREY, _RESET = "\x1b[0;31m", "\x1b[2m", "\x1b[0m"
NOTEBOOK_LINES = 3  # at most this many lines for a PipelineError in IPython


def notebook_lines(exc: BaseException) -> list[str]:
    """A PipelineError as IPython shows it: ``ClassName: message`` (the class in red, as IPython's own), then
    the message's further lines (a query's caret), with :data:`TRACEBACK_HINT` on a line of its own when it
    fits in :data:`NOTEBOOK_LINES` lines, else at the end of the first. A message of more lines keeps its
    first ones and says how many more ``%tb`` shows."""
    lines = str(exc).splitlines() or [""]
    if len(lines) > NOTEBOOK_LINES:
        more = len(lines) - NOTEBOOK_LINES + 1
        lines = [*lines[: NOTEBOOK_LINES - 1], f"... ({more} more lines)"]
    first = f"{_RED}{type(exc).__name__}{_RESET}: {lines[0]}"
    hint = f"{_GREY}{TRACEBACK_HINT}{_RESET}"
    if len(lines) < NOTEBOOK_LINES:
        return [first, *lines[1:], hint]
    return [f"{first}  {hint}", *lines[1:]]


def _ipython_traceback(exc: BaseException) -> list[str] | None:
    """The traceback IPython would draw for ``exc`` (its chain included), or None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None:
        return None
    return shell.InteractiveTB.structured_traceback(type(exc), exc, exc.__traceback__)


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
        # the text around the column only (a query of thousands of characters is not echoed whole), its
        # control characters escaped (they would act on the terminal)
        start = max(0, column - 61)
        shown = printable(text[start : start + 120], keep="")
        left = printable(text[start : column - 1], keep="")
        prefix = "..." if start else ""
        suffix = "..." if start + 120 < len(text) else ""
        pointer = " " * (len(prefix) + len(left)) + "^"
        super().__init__(f"column {column}: {message}\n  {prefix}{shown}{suffix}\n  {pointer}")


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


def printable(text: object, limit: int | None = None, keep: str = "\n\t") -> str:
    r"""``text`` safe to print on a terminal: control characters (an escape sequence in an entity name,
    ``evil\x1b]0;PWNED\x07``) shown as ``\x1b`` escapes instead of acted on, except those in ``keep``; with
    ``limit``, cut to that many characters with the length said (a 100k-character name is not echoed
    whole)."""
    s = str(text)
    cut = limit is not None and len(s) > limit
    if cut:
        s = s[:limit]
    out = "".join(
        c if c in keep or (c.isprintable() and not unicodedata.category(c).startswith("C")) or c == " "
        else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        for c in s
    )
    return out + (f"... ({len(str(text)):,} characters)" if cut else "")


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
        # a read-only file system has space: it takes no writes at all
        fix = "make it writable (or write elsewhere)" if exc.errno == errno.EROFS else "free some space"
        return f"{what} (errno {exc.errno}) while writing: nothing was replaced or left half-written; {fix} and run it again"
    return None


def close_matches(word: str, vocabulary: list[str], n: int = 5) -> list[str]:
    """Up to n vocabulary entries closest to word (for 'did you mean' messages)."""
    import difflib

    # compared case-insensitively (UKGE_LGI is close to ukge_logi), answered in the vocabulary's spellings
    spelled: dict[str, list[str]] = {}
    for v in vocabulary:
        spelled.setdefault(str(v).lower(), []).append(str(v))
    found = difflib.get_close_matches(str(word).lower(), list(spelled), n=n, cutoff=0.6)
    return [v for m in found for v in spelled[m]][:n]


def unknown_name(kind: str, name: str, known: list[str]) -> UnknownNameError:
    """An UnknownNameError listing the known names and the closest ones."""
    hint = close_matches(name, known) if len(name) <= 200 else []  # (difflib on a huge name takes long)
    msg = f"unknown {kind} '{printable(name, 80)}'"
    if hint:
        msg += f" (did you mean {', '.join(hint)}?)"
    msg += f"; known: {', '.join(sorted(known))}"
    return UnknownNameError(msg)
