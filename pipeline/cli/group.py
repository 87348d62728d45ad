"""The ``pipeline`` command group and what every command shares: one clear line and exit code 2 for every
:class:`~pipeline.core.errors.PipelineError` (never a traceback), plain tables, ``--json`` documents, and
the options a stage declares (:mod:`pipeline.stages.options`, turned into click options by
:func:`pipeline.core.options.click_options`). Stage modules are imported inside the commands, so
``pipeline ls`` stays instant and the store never pulls in torch."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from pipeline.core.errors import PipelineError, os_error_line, printable, use_front_end
from pipeline.core.options import registry_choice


def _path_error(exc: OSError) -> str | None:
    """The one line for an OSError about a path the user gave (``--out`` under a file or in a folder they
    cannot write, ``--plot`` likewise) or a full disk: every command that writes gets it here, not one by
    one (pipeline.core.errors.os_error_line). None for any other OSError (left as it is)."""
    line = os_error_line(exc)
    return None if line is None else f"error: {line}"


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn typed errors into one clear line and exit code 2 (never a traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _valid_unicode(kwargs)
            return fn(*args, **kwargs)
        except PipelineError as exc:
            click.echo(f"error: {printable(exc)}", err=True)
            sys.exit(2)
        except OSError as exc:
            line = _path_error(exc)
            if line is None:
                raise
            click.echo(printable(line), err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def _valid_unicode(given: dict[str, Any]) -> None:
    """Every text a command was given is valid Unicode: an undecodable byte of an argument (Python's lone
    surrogate, ``'\\udcff'``) is one line naming the argument as typed, before the command runs, instead
    of an encoder's traceback wherever the text first meets a file, a socket or the terminal."""
    import shlex

    from pipeline.core.checks import lone_surrogate, unicode_problem

    ctx = click.get_current_context(silent=True)
    flags = {p.name: (p.opts[0] if isinstance(p, click.Option) else (p.human_readable_name or str(p.name)).upper())
             for p in (ctx.command.params if ctx is not None else [])}
    for name, value in given.items():
        for text in value if isinstance(value, (tuple, list)) else (value,):
            at = lone_surrogate(text) if isinstance(text, str) else None
            if at is not None:
                raise PipelineError(f"{flags.get(name, name)} {shlex.quote(text)}: {unicode_problem(text, at)}")


def print_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """A plain aligned text table on stdout."""
    if not rows:
        click.echo("(none)")
        return
    columns = columns or list(rows[0])
    # names come from the data (an entity named with a terminal escape): shown escaped, never acted on
    cells = [[printable(r.get(c, ""), keep="") for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def echo_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=False, default=str))


def json_option(help: str = "Print one JSON document.") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--json``: the command prints one JSON document on stdout and nothing else there."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def RegistryChoice(kind: str, extra: tuple[str, ...] = ()) -> Any:  # noqa: N802 (a click type, used like a class)
    """A click option type taking the names of registry ``kind`` (:func:`pipeline.core.options.registry_choice`)."""
    return registry_choice(kind, extra)


class FriendlyGroup(click.Group):
    """The command group: a PipelineError raised while an option is converted (e.g. an unknown registry
    name) is one line and exit code 2, as inside the commands; messages name options as flags."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with use_front_end("cli"):  # messages name options as flags (pipeline.core.errors.option)
                return super().invoke(ctx)
        except PipelineError as exc:
            click.echo(f"error: {printable(exc)}", err=True)
            sys.exit(2)
        except OSError as exc:  # a command not wrapped by friendly
            line = _path_error(exc)
            if line is None:
                raise
            click.echo(printable(line), err=True)
            sys.exit(2)


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="soft-queries")
def cli() -> None:
    """Soft queries over uncertain knowledge graphs: ingest, sample, train, export, answer, evaluate."""
    from pipeline.core.config import check_environment

    check_environment()  # a typo in PIPELINE_KERNELS / _VERIFY / _PAIR_CACHE: one line, not ignored
