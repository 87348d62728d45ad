"""Cutting a query type across workers: the queries that share their streamed
relations go to one part, the parts are balanced by the streams' sizes, every query lands in exactly one
part, and the answers file is that of one process whatever the parts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.softquery import Atom, Conjunction, Const, Query, Var
from pipeline.stages.answer_plan import cut, stream_size, streamed

X, Y, Z = Var("x"), Var("y"), Var("z")


def two_m(anchor: int, r1: int, r2: int, r3: int) -> Query:
    """e -r1-> x, x -r2-> y, y -r3-> x (a multi-edge between x and y, one atom each way)."""
    return Query((Conjunction((Atom(Const(anchor), r1, X), Atom(X, r2, Y), Atom(Y, r3, X))),))


def test_streamed_groups_the_atoms_between_two_variables() -> None:
    assert streamed(two_m(0, 5, 3, 1)) == ((1, 3),)  # the anchored atom streams nothing; sorted
    path = Query((Conjunction((Atom(Const(1), 0, X), Atom(X, 4, Y), Atom(Y, 2, Z))),))
    assert streamed(path) == ((2,), (4,))
    assert stream_size(((1, 3),), [10, 7, 0, 9]) == 7  # a multi-edge: at most its smaller relation's facts
    assert stream_size(((2,), (3,)), [10, 7, 4, 9]) == 13


def test_one_large_group_is_halved_and_small_ones_fill_the_other_part() -> None:
    """Hand-computed: 6 queries on pair (0, 1) (1,000 facts each), 2 on (2, 3) (10 facts): with sizes, the
    large group is the costliest; two parts: each gets 3 of it, and the small group joins one of them."""
    qs = [two_m(i, 9, 0, 1) for i in range(6)] + [two_m(i, 9, 2, 3) for i in range(2)]
    sizes = [1_000_000_000, 1_000_000_000, 10, 10, 0, 0, 0, 0, 0, 0]
    parts = cut(list(range(8)), qs, 2, sizes)
    assert sorted(map(len, parts)) == [3, 5]
    small = [p for p in parts if 6 in p]
    assert small and 7 in small[0]  # one group never split without need
    assert all(p == sorted(p) for p in parts)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=40),
    st.integers(1, 9),
    st.booleans(),
)
def test_every_query_lands_in_exactly_one_part(pairs: list[tuple[int, int]], parts: int, sized: bool) -> None:
    qs = [two_m(i, 7, a, b) for i, (a, b) in enumerate(pairs)]
    idx = list(range(0, 2 * len(qs), 2))[: len(qs)]  # positions need not be contiguous
    queries = {i: q for i, q in zip(idx, qs, strict=True)}
    sizes = [100 * (r + 1) for r in range(8)] if sized else None
    got = cut(idx, queries, parts, sizes)  # type: ignore[arg-type]
    assert sorted(i for p in got for i in p) == idx
    assert 1 <= len(got) <= min(parts, len(idx)) and all(p == sorted(p) for p in got)
    assert got == cut(idx, queries, parts, sizes)  # type: ignore[arg-type]  # deterministic


def test_equal_groups_get_a_part_each() -> None:
    """Three pairs of equal size with four queries each, three parts: each part is one pair's queries
    (a cut of the file's order would mix them: queries 0, 3, 6, 9 share pair (0, 1))."""
    qs = [two_m(i, 9, *[(0, 1), (2, 3), (4, 5)][i % 3]) for i in range(12)]
    parts = cut(list(range(12)), qs, 3, [50] * 10)
    assert sorted(parts) == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]


def test_src_relation_sizes_count_each_relations_facts() -> None:
    """SRC.relation_sizes (what the cut balances on): facts per relation, read from the index's row
    pointers; a relation without facts counts 0."""
    from pipeline.methods import SRC
    from tests.engine.test_oracle import graph_of

    facts = [(0, 0, 1, 0.5), (1, 0, 2, 0.4), (2, 0, 0, 0.9), (0, 2, 2, 0.7), (3, 2, 1, 0.2)]
    method = SRC.over(graph_of(4, 4, facts), "toy")
    assert method.relation_sizes() == [3, 0, 2, 0]
