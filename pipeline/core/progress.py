"""What long work shows while it runs: progress bars, a one-line summary per stage and warning lines; the one
place that decides how. Every stage makes its bars here, never with ``tqdm`` directly
(``tests/test_architecture.py`` checks).

The policy:
- **Where**: a Jupyter kernel gets widget bars (``tqdm.auto``: one ``display_data`` output per bar instead of
  a text refresh every 0.1 s; with ipywidgets installed, else text bars that refresh at most every
  :data:`KERNEL_TEXT_INTERVAL` seconds); a terminal gets text bars on stderr, as ``tqdm`` does; output
  redirected to a file or a pipe (a log, ``nohup``, a CI job) gets plain lines instead, never a bar (a
  stream of carriage returns and cursor-up codes there): each bar becomes one line when it closes
  (``calibration L epoch 20/20: 80/80 batch in 5.1 s (loss=0.0123)``), nested bars none.
- **Closing**: a bar is a context manager (``with out.bar(...) as bar:``) and is closed on every path, an
  error included: a bar left open is redrawn by the next bar tqdm makes (a stale ``export: 0%`` inside a
  later cell). In a terminal a finished bar is erased (``leave=False``), the stage then prints its own
  lines; in a notebook it stays as the stage's one finished bar.
- **Nested bars** (an epoch's batches inside training, a calibration's steps) are terminal-only
  (:meth:`Output.inner_bar`): in a notebook each would be a new widget per epoch.
- **Per-step lines** (``epoch 3: loss ...``) are for terminals (:meth:`Output.step_line`): a notebook
  shows them as the outer bar's postfix instead of 60 lines.
- **Switches**: ``progress=False`` hides the bars and keeps the summaries; ``quiet=True`` hides both.
  Warnings (:meth:`Output.warn`, ``warning: ...`` on stderr) are about the result, not the progress, and
  are always shown; so are notes (:func:`note`, stderr), the rare lines that explain a wait once per
  install (the engine's first compilation).

A stage takes ``progress: bool | Output`` and calls :func:`output` on it, so existing callers passing a bool
keep working; the Python API passes ``output(progress, quiet)``. The CLI prints its own tables and never
asks for summaries.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

# a text bar in a kernel without widgets: each refresh is one output message of the cell
KERNEL_TEXT_INTERVAL = 10.0


def in_kernel() -> bool:
    """True inside a Jupyter kernel (IPython with an IPKernelApp), where output goes into a cell."""
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - an IPython too old or too odd to ask: not a kernel we know
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def terminal() -> bool:
    """True when stderr, where bars are drawn, is a terminal (not a file or a pipe)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


def _bar_class() -> tuple[type, bool]:
    """(the tqdm class to use, whether it draws widgets): tqdm.auto's own choice, which falls back to
    text bars (with one TqdmWarning) in a kernel without ipywidgets."""
    from tqdm.auto import tqdm as auto

    # tqdm.auto is an asyncio subclass of the text bar, or of the notebook's widget bar
    return auto, any(c.__module__ == "tqdm.notebook" for c in auto.__mro__)


_PLAIN: dict[type, type] = {}


def _plain_bar(cls: type) -> type:
    """A subclass of the tqdm class ``cls`` that draws nothing and prints one plain line on stderr when it
    closes: its description, the count, the seconds and its postfix (what a log can hold). A bar left by an
    exception prints nothing, so a failing command's output is its one error line."""
    if cls not in _PLAIN:

        class PlainBar(cls):  # type: ignore[misc, valid-type]
            def __init__(self, iterable: Any = None, **kwargs: Any) -> None:
                self._line_desc = kwargs.get("desc") or ""
                self._line_unit = kwargs.get("unit") or "it"
                self._line_n, self._line_t0, self._line_done = kwargs.get("initial") or 0, time.monotonic(), False
                kwargs["disable"] = True
                super().__init__(iterable, **kwargs)
                self.total = kwargs.get("total", getattr(self, "total", None))
                self.iterable = iterable

            def __iter__(self) -> Any:
                for item in self.iterable:
                    yield item
                    self._line_n += 1

            def update(self, n: float = 1) -> Any:
                self._line_n += n
                return super().update(n)

            def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
                self._line_desc = desc or ""
                super().set_description(desc, refresh)

            def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
                if exc_type is not None:  # the error line that follows says what happened: no count line
                    self._line_done = True
                return super().__exit__(exc_type, exc, tb)

            def close(self) -> None:
                if not self._line_done:
                    self._line_done = True
                    total = self.total if self.total is not None else (
                        len(self.iterable) if hasattr(self.iterable, "__len__") else None)
                    count = f"{self._line_n:g}" + (f"/{total:g}" if total is not None else "")
                    postfix = getattr(self, "postfix", None)
                    print(f"{self._line_desc or 'done'}: {count} {self._line_unit} in "
                          f"{time.monotonic() - self._line_t0:.1f} s" + (f" ({postfix})" if postfix else ""),
                          file=sys.stderr, flush=True)
                super().close()

        _PLAIN[cls] = PlainBar
    return _PLAIN[cls]


@dataclass(frozen=True)
class Output:
    """How one call shows its progress: ``progress`` (bars), ``quiet`` (no bars, no summaries)."""

    progress: bool = True
    quiet: bool = False

    @property
    def bars(self) -> bool:
        return self.progress and not self.quiet

    @property
    def notebook(self) -> bool:
        return in_kernel()

    def bar(self, iterable: Any = None, **kwargs: Any) -> Any:
        """A tqdm bar under the policy above (kwargs as tqdm's: total, desc, unit, ...); disabled when
        bars are off. Use it as a context manager, or close it in a ``finally``."""
        cls, widgets = _bar_class()
        notebook = self.notebook
        # a caller's own disable (None: tqdm's rule, bars on a terminal only) applies when bars are on
        extra = kwargs.pop("disable", False)
        disable = True if not self.bars else extra
        if not disable and not notebook and not terminal():  # a file or a pipe: one plain line, no bar
            return _plain_bar(cls)(iterable, **kwargs)
        kwargs.setdefault("leave", notebook)
        kwargs.setdefault("dynamic_ncols", True)
        if notebook and not widgets:
            kwargs.setdefault("mininterval", KERNEL_TEXT_INTERVAL)
        return cls(iterable, disable=disable, **kwargs)

    def inner_bar(self, iterable: Any = None, **kwargs: Any) -> Any:
        """A bar nested inside another (an epoch's batches): shown in a terminal only."""
        if self.notebook or not terminal():
            kwargs["disable"] = True
        kwargs["leave"] = False
        return self.bar(iterable, **kwargs)

    def step_line(self, line: str) -> None:
        """One line per step of a long loop (``epoch 3: ...``): in a terminal, above the bars; nothing in
        a notebook, whose outer bar carries the figures as its postfix."""
        if self.bars and not self.notebook:
            from tqdm.std import tqdm as text

            text.write(line, file=sys.stderr)

    def summary(self, line: str) -> None:
        """The stage's one-line summary (stdout), unless quiet."""
        if not self.quiet:
            print(line, flush=True)

    def warn(self, line: str) -> None:
        """A warning about the result (stderr, ``warning: `` first): always shown."""
        print(f"warning: {line}", file=sys.stderr, flush=True)


def note(line: str) -> None:
    """A line about how the run goes, not about its result (stderr, never stdout: ``--json`` keeps stdout
    to its one document), from anywhere in the process, a background thread included: above the bars in
    a terminal (tqdm's write), a plain line elsewhere. For events once per install, such as the engine's
    first compilation (``compiling the engine's steps once (21.3 s; ...)``), shown whatever the switches."""
    if terminal():
        from tqdm.std import tqdm as text

        text.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


def output(progress: bool | Output = True, quiet: bool = False) -> Output:
    """The Output of a stage's ``progress`` argument: an Output as it is, a bool as bars on/off (quiet:
    no summaries either)."""
    if isinstance(progress, Output):
        return progress if not quiet else Output(progress.progress, True)
    return Output(bool(progress), bool(quiet))


__all__ = ["KERNEL_TEXT_INTERVAL", "Output", "in_kernel", "note", "output", "terminal"]
