"""The usefulness filter: answers differ in ids (or order) or in values rounded to 4 decimals."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.sampling.useful import is_useful, round_values


def test_hand_examples():
    assert not is_useful([3, 1], [0.9, 0.5], [3, 1], [0.9, 0.5])
    assert is_useful([3, 1], [0.9, 0.5], [3, 1, 7], [0.9, 0.5, 0.2])  # a new answer
    assert is_useful([3, 1], [0.9, 0.5], [1, 3], [0.9, 0.5])  # same entities, another order
    assert is_useful([3, 1], [0.9, 0.5], [3, 1], [0.9, 0.6])  # a changed value
    # differences below the 4th decimal are not differences
    assert not is_useful([3], [0.123449], [3], [0.12344])
    assert is_useful([3], [0.12344], [3], [0.12346])
    assert not is_useful([], [], [], [])


def test_round_values():
    assert round_values([0.12344999, 2 / 3, 1.0]) == [0.1234, 0.6667, 1.0]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.floats(0.0001, 10.0)), max_size=20, unique_by=lambda x: x[0])
)
def test_identical_answers_are_never_useful(answers):
    ids = [a for a, _ in answers]
    vals = [v for _, v in answers]
    assert not is_useful(ids, vals, list(ids), list(vals))
    if answers:
        assert is_useful(ids, vals, ids[:-1], vals[:-1])
