"""The `pipeline` command line (design section 5). Each command is a thin shell over one stage module;
stage modules are imported lazily so `pipeline ls` stays instant and the store never pulls in torch.

Every PipelineError becomes one line on stderr and exit code 2; `--json` prints one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from pipeline.errors import PipelineError


def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn typed errors into one clear line and exit code 2 (never a traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PipelineError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def print_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """A plain aligned text table on stdout."""
    if not rows:
        click.echo("(none)")
        return
    columns = columns or list(rows[0])
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def echo_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=False, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="soft-queries")
def cli() -> None:
    """Soft queries over uncertain knowledge graphs: ingest, sample, train, export, answer, evaluate."""


# ------------------------------------------------------------------------------------------------------ ls


@cli.command("ls")
@click.argument("what", type=click.Choice(["datasets", "models", "query-types", "metrics"]))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
def ls_cmd(what: str, as_json: bool) -> None:
    """List registered components (tables generated from the registries)."""
    rows = registry_rows(what)
    if as_json:
        echo_json(rows)
    else:
        print_table(rows)


def registry_rows(what: str) -> list[dict[str, Any]]:
    """The rows `pipeline ls WHAT` prints, straight from each registry."""
    if what == "datasets":
        from loaders import REGISTRY

        return [
            {
                "name": s.name,
                "domain": s.domain,
                "entities": s.n_entities,
                "relations": s.n_relations,
                "train": s.facts.get("train"),
                "val": s.facts.get("val"),
                "test": s.facts.get("test"),
                "source": s.source_url,
            }
            for s in REGISTRY.values()
        ]
    if what == "models":
        from pipeline.models import MODELS

        return [{"name": name, "description": cls.description} for name, cls in MODELS.items()]
    if what == "query-types":
        from pipeline.query.types import QUERY_TYPES

        return [{"name": qt.name, "train": "yes" if qt.train else "", "text": qt.text} for qt in QUERY_TYPES.values()]
    if what == "metrics":
        from pipeline.metrics import METRICS

        return [
            {"name": m.name, "range": f"[{m.lower}, {m.upper}]", "increasing": m.increasing, "description": m.description}
            for m in METRICS.values()
        ]
    raise PipelineError(f"nothing to list for {what}")


# --------------------------------------------------------------------------- store and ingest (foundation)
# -------------------------------------------------------------------------- query language and engine (SRC)
# --------------------------------------------------------------------------- backbones: train and export
# ----------------------------------------------------------------------------------------------- sampling
# ----------------------------------------------------------------------------- answer, evaluate, reproduce


def main() -> None:
    cli(prog_name="pipeline")


if __name__ == "__main__":
    main()
