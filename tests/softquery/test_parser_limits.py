"""The parser's numeric and nesting limits: numbers the float32 engine cannot represent and texts
nested deeper than MAX_DEPTH are one QuerySyntaxError at the column, never a RecursionError or a silent
overflow to no answers."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.errors import QuerySyntaxError
from pipeline.softquery.parser import MAX_BETA, MAX_DEPTH, parse


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("#0(#1, ?y, 1.0000001)", 12, "alpha 1.0000001 must be in [0, 1]"),
        ("#0(#1, ?y, -0.1)", 12, "alpha -0.1 must be in [0, 1]"),
        ("#0(#1, ?y, nan)", 12, "alpha nan must be in [0, 1]"),
        ("#0(#1, ?y, 0.5, 1e39)", 17, "beta 1e39 must be in [0, 1000000]"),
        ("#0(#1, ?y, 0.5, 1e38)", 17, "beta 1e38 must be in [0, 1000000]"),
        ("#0(#1, ?y, 0.5, 1000000.5)", 17, "beta 1000000.5 must be in [0, 1000000]"),
        ("#0(#1, ?y, 0.5, inf)", 17, "beta inf must be in [0, 1000000]"),
        ("#0(#1, ?y, 0.5, -inf)", 17, "beta -inf must be in [0, 1000000]"),
        ("#0(#1, ?y, 0.5, NaN)", 17, "beta NaN must be in [0, 1000000]"),
        ("#0(#1, ?y) & #1(#2, ?y, 0, 2e6)", 28, "beta 2e6 must be in [0, 1000000]"),
    ],
)
def test_numbers_outside_the_engine_range_are_refused(text: str, column: int, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as err:
        parse(text)
    assert err.value.column == column
    assert message in str(err.value)


def test_the_bounds_themselves_parse_and_stay_exact_in_float32() -> None:
    q = parse(f"#0(#1, ?y, 1, {MAX_BETA:.15g}) & !#1(?y, #2, 0, 0)")
    a, b = q.conjunctions[0].atoms
    assert (a.alpha, a.beta, b.alpha, b.beta) == (1.0, 1e6, 0.0, 0.0)
    # a thousand atoms at the bound sum far inside float32 (the engine's dtype), exactly as in float64
    total = np.float32(0)
    for _ in range(1000):
        total = np.float32(total + np.float32(MAX_BETA) * np.float32(1.0))
    assert np.isfinite(total) and float(total) == 1e9


def test_nesting_up_to_the_limit_parses() -> None:
    atom = "#0(#1, ?y)"
    assert parse("(" * MAX_DEPTH + atom + ")" * MAX_DEPTH) == parse(atom)
    assert parse("!" * MAX_DEPTH + atom).conjunctions[0].atoms[0].negated is (MAX_DEPTH % 2 == 1)


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("(" * 500 + "#0(#1, ?y)" + ")" * 500, MAX_DEPTH + 1),
        ("!" * 1000 + "#0(#1, ?y)", MAX_DEPTH + 1),
        ("#2(#3, ?y) | " + "(!" * 60 + "#0(#1, ?y)" + ")" * 60, 14 + MAX_DEPTH),  # mixed: the 101st is a '('
    ],
)
def test_nesting_beyond_the_limit_is_one_error_at_the_column(text: str, column: int) -> None:
    with pytest.raises(QuerySyntaxError) as err:
        parse(text)
    assert err.value.column == column
    assert f"nested more than {MAX_DEPTH} levels deep" in str(err.value)


def test_cli_query_too_deep_is_one_error_without_traceback() -> None:
    text = "(" * 500 + "#0(#1, ?y)" + ")" * 500
    res = CliRunner().invoke(cli, ["query", text, "--dataset", "ppi5k", "--graph", "train"])
    assert res.exit_code == 2
    assert "nested more than 100 levels deep" in res.output and "Traceback" not in res.output
    assert "RecursionError" not in res.output


def test_a_stored_set_keeps_its_good_queries_beside_a_too_deep_one() -> None:
    """One bad (:Query) text no longer fails the whole `answer --from-store` set: the limits are typed
    errors, which pipeline.stages.stored_queries.parse_rows records on that node alone."""
    from pipeline.softquery import Vocabulary
    from pipeline.stages.stored_queries import parse_rows

    vocab = Vocabulary(("a", "b", "c"), ("r",))
    nodes = [
        {"qid": "deep", "text": "(" * 500 + "r(a, ?y)" + ")" * 500},
        {"qid": "bang", "text": "!" * 1000 + "r(a, ?y)"},
        {"qid": "huge", "text": "r(a, ?y, 0.5, 1e39)"},
        {"qid": "good", "text": "r(a, ?y, 0.5, 2)"},
    ]
    rows, updates = parse_rows(nodes, vocab, typed=True)
    assert [r["id"] for r in rows] == ["good"]
    errors = {u["qid"]: u["error"] for u in updates}
    assert errors["good"] is None
    assert errors["deep"] == "column 101: nested more than 100 levels deep (parentheses and '!'); write it flatter"
    assert errors["bang"].startswith("column 101: nested more than 100")
    assert errors["huge"] == "column 15: beta 1e39 must be in [0, 1000000]"
