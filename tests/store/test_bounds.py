"""The sizes of ranges a typed statement asks for, read from its text before it is sent
(pipeline.store.bounds): exact sizes against Python's own range, what the text bounds and what it cannot."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.errors import PipelineError
from pipeline.store.bounds import _evaluate, _size, check_ranges, max_range_values

GIB = 1 << 30


@given(st.integers(-300, 300), st.integers(-300, 300), st.integers(-20, 20).filter(bool))
def test_a_ranges_size_is_pythons_with_cyphers_inclusive_end(start, end, step):
    assert _size(start, end, step) == len(range(start, end + (1 if step > 0 else -1), step))


@given(st.integers(0, 10**12), st.integers(1, 1000))
def test_a_range_is_refused_exactly_when_it_holds_more_than_the_limit(n, step):
    limit = max_range_values(GIB)  # 67,108,864 values of 16 bytes
    statement = f"UNWIND range(1, {n}, {step}) AS x RETURN count(x)"
    if _size(1, n, step) > limit:
        with pytest.raises(PipelineError, match="values at once"):
            check_ranges(statement, None, GIB, "1 GiB")
    else:
        check_ranges(statement, None, GIB, "1 GiB")


@pytest.mark.parametrize(
    ("expr", "value"),
    [("10000000000", 10_000_000_000), ("1e3", 1000.0), ("toInteger(1e3)", 1000), ("2 * (3 + 4)", 14),
     ("-5 + 2", -3), ("7 / 2", 3), ("-7 / 2", -3), ("7 % 3", 1), ("2 ^ 10", 1024.0), ("0x10", 16),
     ("$n * 2", 20), ("abs(-4)", 4), ("n + 1", 8), ("size([1, 2])", None), ("x.y", None), ("$missing", None),
     ("'ten'", None), ("1 +", None), ("toInteger('42')", 42), ("toInteger('4.2')", None),
     ("toFloat('1e3')", 1000.0), ("toInteger('4' + '2')", None)],
)  # fmt: skip
def test_the_evaluator_knows_numbers_parameters_and_bound_names_only(expr, value):
    assert _evaluate(expr, {"n": 10}, {"n": 7}) == value


@pytest.mark.parametrize(
    "statement",
    [
        "UNWIND range(1, 10000000000) AS x WITH x WHERE x < 0 RETURN count(x)",  # the runaway that ended the server
        "WITH 10000000000 AS n UNWIND range(1, n) AS x RETURN count(x)",
        "WITH 5 AS a, 7 * 1000000000 AS b UNWIND range(a, b) AS x RETURN count(x)",
        "RETURN RANGE ( -10000000000 , 0 )",
        "UNWIND range(1, $big) AS x RETURN x",
        "RETURN [x IN range(0, toInteger(1e12), 2) | x][0]",
        "WITH toInteger('10000000000') AS n UNWIND range(1, n) AS x RETURN count(x)",  # a number as text
        "WITH 'a, b' AS s, 10000000000 AS n RETURN range(1, n)",  # a comma inside a string
    ],
)
def test_ranges_the_text_bounds_past_the_limit_are_refused(statement):
    with pytest.raises(PipelineError, match=r"would hold [\d,]+ values at once.*nothing was run"):
        check_ranges(statement, {"big": 10**11}, GIB, "1 GiB")


@pytest.mark.parametrize(
    "statement",
    [
        "RETURN range(1, 10)",
        "RETURN 'range(1, 10000000000)' AS text",  # inside a string
        "// range(1, 10000000000)\nRETURN 1",  # inside a comment
        "MATCH (n) UNWIND range(1, n.size) AS x RETURN x",  # not known from the text: the server's limits
        "RETURN range(10000000000, 1)",  # empty
        "RETURN range(1, 10000000000, -1)",  # empty
        "RETURN range(1, 10^11)",  # a float bound: the server refuses it (range takes integers)
        "WITH 10000000000 AS n WITH 5 AS n UNWIND range(1, n) AS x RETURN x",  # rebound to 5
    ],
)
def test_ranges_within_the_limit_or_unknown_go_through(statement):
    check_ranges(statement, {}, GIB, "1 GiB")
