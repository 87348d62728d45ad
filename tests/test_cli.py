"""The command line as a user drives it: tables from the registries, one-line errors, exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from loaders import REGISTRY
from pipeline.cli import cli


def test_ls_datasets_is_generated_from_the_registry() -> None:
    result = CliRunner().invoke(cli, ["ls", "datasets"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:4] == ["name", "domain", "entities", "relations"]
    body = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(body) == set(REGISTRY)
    assert body["cn15k"][2:7] == ["15000", "36", "204984", "16881", "17077"]


def test_ls_json_is_one_document() -> None:
    result = CliRunner().invoke(cli, ["ls", "datasets", "--json"])
    rows = json.loads(result.output)
    assert {r["name"] for r in rows} == set(REGISTRY)
    assert next(r for r in rows if r["name"] == "ppi5k")["source"].startswith("https://")


def test_unknown_listing_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["ls", "dataset"])
    assert result.exit_code == 2 and "Invalid value" in result.output


def test_errors_name_options_as_the_front_end_spells_them():
    """One stage message, two spellings: a flag under the command line, a keyword in Python."""
    from click.testing import CliRunner

    from pipeline.cli import cli
    from pipeline.core.errors import PipelineError, option

    assert option("per_type") == "per_type=" and option("per_type", 5) == "per_type=5"

    @cli.command("_echo-option", hidden=True)
    def _echo() -> None:
        raise PipelineError(f"ask for fewer with {option('per_type')}")

    try:
        res = CliRunner().invoke(cli, ["_echo-option"])
    finally:
        cli.commands.pop("_echo-option")
    assert res.exit_code == 2 and "ask for fewer with --per-type" in res.output


@pytest.mark.parametrize(
    ("command", "api", "classes", "own"),
    [
        ("answer", "answer", ("pipeline.methods.options.MethodOptions", "pipeline.stages.options.AnswerOptions"),
         {"queries", "from_store", "set_name", "as_json"}),
        ("export", "export", ("pipeline.stages.options.ExportOptions",), {"run_dir", "as_json"}),
        ("sample", "sample", ("pipeline.stages.options.SampleOptions",), {"dataset", "as_json"}),
        ("train", "train", ("pipeline.stages.options.TrainOptions",), {"dataset", "docs_dir", "as_json"}),
        ("reproduce", "run", ("pipeline.stages.reproduce.ReproduceConfig", "pipeline.methods.options.LOptions"),
         {"dataset", "out_dir", "docs_dir", "store_uri", "runs", "config_file", "qe_settings", "study", "as_json"}),
    ],
)
def test_each_option_is_declared_once(command: str, api: str, classes: tuple[str, ...], own: set[str]) -> None:
    """The command's options and the API function's keywords are the declared fields (one
    declaration, two doors); a field added to the class appears in both, with its help."""
    import inspect
    from importlib import import_module

    import pipeline as pl
    from pipeline.cli import cli
    from pipeline.core.options import declared

    decl = [d for path in classes for d in declared(getattr(import_module(path.rpartition(".")[0]), path.rpartition(".")[2]))]
    params = {p.name: p for p in cli.commands[command].params}
    assert set(params) - own == {d.name for d in decl if d.option.cli}
    for d in decl:
        if d.option.cli:
            assert params[d.name].help.startswith(d.option.help.split(" (comma")[0][:40])
    keywords = {n for n, p in inspect.signature(getattr(pl, api)).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert {d.name for d in decl if d.option.api} <= keywords
    assert all(d.name in (getattr(pl, api).__doc__ or "") for d in decl if d.option.api)


def test_a_list_option_left_out_is_empty_not_required(tmp_path, monkeypatch) -> None:
    """`pipeline reproduce` with no --baselines (declared as an empty tuple) reaches its own checks: the
    empty default is no names, never "a value is required" (a regression of the generated options)."""
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["reproduce", "no-such-set", "--epochs", "2"])
    assert result.exit_code != 0
    assert "--baselines" not in result.output
    assert "unknown data set 'no-such-set'" in result.output
    from pipeline.stages.reproduce import ReproduceConfig

    assert ReproduceConfig(dataset="x", baselines="").baselines == ()


def test_pl_run_takes_calibration_l_settings_as_pl_answer_does(tmp_path, monkeypatch) -> None:
    """pl.run's L keywords are LOptions' (the declarations of pl.answer and `pipeline reproduce --l-*`):
    checked at the door in Python's words, before any stage runs."""
    import inspect

    import pipeline as pl

    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path))
    params = inspect.signature(pl.run).parameters
    assert {"l_epochs", "l_lr", "l_variant", "l_steps"} <= set(params)
    assert list(params).count("l_epochs") == 1
    with pytest.raises(pl.PipelineError, match=r"l_lr=-1.*greater than 0"):
        pl.run("ppi5k", l_lr=-1.0, quiet=True)
    with pytest.raises(pl.PipelineError, match=r"unknown option 'l_lrr' \(did you mean l_lr"):
        pl.run("ppi5k", l_lrr=1e-5, quiet=True)
    assert not any(tmp_path.iterdir())  # refused before anything was written
