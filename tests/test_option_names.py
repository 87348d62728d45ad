"""Messages name options as the caller wrote them: keywords from Python
(``threshold=``), flags from the command line (``--threshold``), for the stage messages a notebook meets."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.errors import PipelineError, use_front_end


def _both(call) -> tuple[str, str]:
    """(Python's message, the CLI's) of one stage call."""
    lines = []
    for end in ("python", "cli"):
        with use_front_end(end), pytest.raises(PipelineError) as err:
            call()
        lines.append(str(err.value))
    return lines[0], lines[1]


def test_stage_messages_in_both_spellings(tmp_path):
    from pipeline.stages.ask import ask
    from pipeline.stages.export import export_adjacency
    from pipeline.stages.export_select import check_top_k
    from pipeline.stages.train import train_dataset

    cases = [
        (lambda: ask("r(a, ?y)", "ppi5k"),
         "give exactly one of graph= (train, valid or test) or adjacency= (a neural adjacency export folder)",
         "give exactly one of --graph (train, valid or test) or --adjacency (a neural adjacency export folder)"),
        (lambda: export_adjacency(tmp_path, threshold=1.5), "threshold=1.5: must be at most 1", "--threshold 1.5: must be at most 1"),
        (lambda: export_adjacency(tmp_path, threshold=0.0),
         "threshold=0.0: must be in (0, 1] (0 would store the dense matrix)",
         "--threshold 0.0: must be in (0, 1] (0 would store the dense matrix)"),
        (lambda: check_top_k(0), "top_k=0: must be at least 1", "--top-k 0: must be at least 1"),
        (lambda: train_dataset("ppi5k", model="ukge_logi", resume=True, overwrite=True),
         "resume=True and overwrite=True exclude each other", "--resume and --overwrite exclude each other"),
        (lambda: train_dataset("ppi5k"), "give model= (see `pipeline ls models`) or config= (a saved "
         "RUN_DIR/config.json)", "give --model (see `pipeline ls models`) or --config (a saved RUN_DIR/config.json)"),
    ]
    for call, python, command in cases:
        assert _both(call) == (python, command)


def test_a_folder_option_names_its_value(tmp_path):
    from pipeline.core.atomic import check_folder

    taken = tmp_path / "taken"
    taken.write_text("x")
    python, command = _both(lambda: check_folder(taken, "out"))
    assert python == f"out={str(taken)!r}: an existing file, not a folder"
    assert command == f"--out {taken}: an existing file, not a folder"


def test_the_cli_prints_the_flag_spelling():
    res = CliRunner().invoke(cli, ["query", "r(a, ?y)", "--dataset", "ppi5k"])
    assert res.exit_code == 2 and res.output.startswith("error: give exactly one of --graph (train, valid or test)")
