"""Unknown names in a query: an unquoted name with spaces gets the quoted form to
write; a long vocabulary is never printed whole (the closest few and a count)."""

from __future__ import annotations

import pytest

from pipeline.core.errors import ResolutionError
from pipeline.softquery.parser import parse
from pipeline.softquery.vocab import Vocabulary
from tests.women import ATTENDANCE

VOCAB = Vocabulary.from_names([*ATTENDANCE, *(f"E{i}" for i in range(1, 15))],
                              ["attends", "co_attends", "shares_guests"])


def _error(text: str) -> str:
    with pytest.raises(ResolutionError) as err:
        parse(text, VOCAB)
    return str(err.value)


def test_an_unquoted_name_with_a_space_gets_its_quoted_form():
    # was: unknown entity 'Evelyn'; known: <all 32 names>
    assert _error("co_attends(Evelyn Jefferson, ?y, 0.3)") == (
        'column 12: unknown entity \'Evelyn\'; a name with spaces goes in double quotes: "Evelyn Jefferson"')
    assert _error("co_attends(?y, Nora Fayette)") == (
        'column 16: unknown entity \'Nora\'; a name with spaces goes in double quotes: "Nora Fayette"')
    # the first word alone: the names it starts
    assert _error("co_attends(Evelyn, ?y)").endswith('double quotes: "Evelyn Jefferson"')
    assert parse('co_attends("Evelyn Jefferson", ?y, 0.3)', VOCAB).conjunctions[0].atoms[0].head.eid == 0


def test_a_long_vocabulary_shows_the_closest_names_and_a_count():
    line = _error("co_attends(Zed, ?y)")
    assert line.startswith("column 12: unknown entity 'Zed'; closest: ") and line.endswith("(of 32 known)")
    assert line.count("'") == 2 + 2 * 5  # the name and five closest, never all 32
    assert _error("attend(?x, ?y)") == "column 1: unknown relation 'attend' (did you mean 'attends', 'co_attends'?)"
    assert _error("knows(?x, ?y)") == "column 1: unknown relation 'knows'; known: attends, co_attends, shares_guests"
