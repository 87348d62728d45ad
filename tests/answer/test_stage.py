"""The answering stage's one entry: option rules read from each method's declared capabilities, a built
method and its options answer alike, and explain/write-back are options of the same call."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipeline.core.errors import PipelineError
from pipeline.formats.answers import read_answers
from pipeline.methods import METHODS, SRC, Capabilities, MethodOptions
from pipeline.stages.answer import AnswerOptions, answer_queries, check_method_options, method_class
from tests.answer.toy import PREDICTED, write_toy_query_set


@pytest.mark.parametrize(
    ("options", "explain", "any_shape", "message"),
    [
        (MethodOptions(method="src"), 0, False, "give it"),
        (MethodOptions(method="cone_ne"), 0, False, "--model RUN_DIR"),
        (MethodOptions(method="cone_ne", model="r", calibration="D"), 0, False, "--calibration applies to src only"),
        (MethodOptions(method="logice_ne", model="r"), 3, False, "--explain applies to src only"),
        (MethodOptions(adjacency="a", union="conorm"), 0, False, "--union applies to logice_ne, cone_ne only"),
        (MethodOptions(model="r"), 0, True, "queries from the store may have any shape: use src"),
    ],
)
def test_option_rules_come_from_capabilities(options: MethodOptions, explain: int, any_shape: bool, message: str) -> None:
    from pipeline.core.errors import use_front_end

    with use_front_end("cli"), pytest.raises(PipelineError, match=message):  # the flags' spelling
        check_method_options(method_class(options), options, explain, any_shape)


def test_option_rules_speak_python_in_python() -> None:
    with pytest.raises(PipelineError) as err:
        check_method_options(method_class(MethodOptions(method="cone_ne")), MethodOptions(method="cone_ne"), 0, False)
    assert str(err.value) == ("method='cone_ne' answers from model= RUN_DIR: give it (adjacency= DIR for src, "
                              "model= RUN_DIR for logice_ne, model= RUN_DIR for cone_ne)")
    options = MethodOptions(method="cone_ne", model="r", calibration="D")
    with pytest.raises(PipelineError, match="^calibration= applies to src only"):
        check_method_options(method_class(options), options, 0, False)


def test_every_method_declares_capabilities_and_builds_from_options() -> None:
    for name in METHODS.names():
        cls = METHODS[name]
        assert isinstance(cls.capabilities, Capabilities)
        assert cls.capabilities.source in MethodOptions.__dataclass_fields__
        assert "from_options" in vars(cls) or any("from_options" in vars(b) for b in cls.__mro__[1:-2])


def test_a_built_method_and_the_stage_write_the_same_file(tmp_path: Path) -> None:
    qs = write_toy_query_set(tmp_path / "q.parquet")
    method = SRC.over(PREDICTED, "toy", backbone="m")
    a = answer_queries(qs, method, AnswerOptions(out=tmp_path / "a", progress=False))
    b = answer_queries(qs, method, AnswerOptions(out=tmp_path / "b", progress=False))
    pd.testing.assert_frame_equal(read_answers(a["path"]).frame, read_answers(b["path"]).frame)
    assert a["method"] == "m SRC" and Path(a["path"]).name == "q.m.SRC.parquet"


def test_explain_refused_for_a_method_without_witnesses(tmp_path: Path) -> None:
    qs = write_toy_query_set(tmp_path / "q.parquet")

    class NoWitnesses(SRC):
        capabilities = Capabilities("adjacency", "DIR")

    method = NoWitnesses.over(PREDICTED, "toy")
    with pytest.raises(PipelineError, match="^explain=: "):
        answer_queries(qs, method, AnswerOptions(out=tmp_path, explain=2, progress=False))
