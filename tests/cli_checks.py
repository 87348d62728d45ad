"""How the tests drive the command line in process and check its one-line errors."""

from __future__ import annotations

from click.testing import CliRunner, Result

from pipeline.cli import cli


def invoke(*args: str) -> Result:
    """``pipeline ARGS...`` in this process (stdout and stderr apart)."""
    return CliRunner().invoke(cli, list(args))


def one_line_error(result: Result, *needles: str) -> str:
    """The command failed as a user should see it: exit code 2, one line on stderr starting ``error: ``
    that holds every needle, no traceback anywhere. Returns the line."""
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
