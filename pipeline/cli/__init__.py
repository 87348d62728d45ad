"""The ``pipeline`` command line (design section 5), one module per group of commands:

- :mod:`.group`: the command group, one-line errors, tables, ``--json``;
- :mod:`.store`: ``ls``, ``store start|stop|status``, ``cypher``, ``ingest``, ``stats``, ``synth``;
- :mod:`.query`: ``query``, ``browse``;  :mod:`.sample`: ``sample``, ``import-squk``;
- :mod:`.models`: ``train``, ``export``, ``train-qe``;  :mod:`.answer`: ``answer``, ``evaluate``;
- :mod:`.reproduce`: ``reproduce``;  :mod:`.llm`: ``llm-items``, ``llm-eval``.

Each command is a thin shell over one stage (:mod:`pipeline.stages`); the options of ``answer``, ``export``,
``sample``, ``train`` and ``ingest`` are generated from the stages' option declarations
(:mod:`pipeline.stages.options`), so an option is declared once. Every PipelineError becomes one line on
stderr and exit code 2; ``--json`` prints one JSON document on stdout.
"""

from __future__ import annotations

from pipeline.cli import answer, llm, models, query, reproduce, sample, store  # noqa: F401 (registers the commands)
from pipeline.cli.group import cli, echo_json, print_table


def main() -> None:
    from pipeline.core.imports import command_line

    command_line()
    cli(prog_name="pipeline")


__all__ = ["cli", "echo_json", "main", "print_table"]
