"""The query grammar: parsing, printing, round trip, column-precise errors, name resolution."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.errors import PipelineError, QuerySyntaxError, ResolutionError
from pipeline.softquery import Atom, Conjunction, Const, Query, Var, Vocabulary, parse, to_text

VOCAB = Vocabulary.from_names(
    ["leadership", "dev ops", 'say "hi"', "back\\slash", "9606.ENSP1", "twin", "twin", "?odd", ""],
    ["hasskill", "related to", "#0"],
)


def test_design_examples():
    q = parse('hasskill(?y, leadership, 0.7, 3) & !hasskill(?y, "dev ops", 0.5, 1)', VOCAB)
    assert q == Query.of([Atom(Var("y"), 0, Const(0), 0.7, 3.0), Atom(Var("y"), 0, Const(1), 0.5, 1.0, True)])
    q = parse("#1(#2002, ?x, 0.24, 0.1) & #0(?x, ?y)")
    assert q == Query.of([Atom(Const(2002), 1, Var("x"), 0.24, 0.1), Atom(Var("x"), 0, Var("y"))])
    assert to_text(q) == "#1(#2002, ?x, 0.24, 0.1) & #0(?x, ?y)"


def test_precedence_and_dnf():
    a, b, c = "#0(#1, ?y)", "#1(#2, ?y)", "#2(#3, ?y)"
    pa, pb, pc = (parse(x).conjunctions[0].atoms[0] for x in (a, b, c))
    assert parse(f"{a} | {b} & {c}") == Query.of([pa], [pb, pc])
    assert parse(f"({a} | {b}) & {c}") == Query.of([pa, pc], [pb, pc])
    assert parse(f"!({a})") == Query.of([Atom(pa.head, pa.relation, pa.tail, negated=True)])
    assert parse(f"!!{a}") == Query.of([pa])


def test_names_quoted_ids_and_printing():
    q = parse('"related to"(9606.ENSP1, "say \\"hi\\"") & hasskill("back\\\\slash", ?y)', VOCAB)
    assert q.atoms[0] == Atom(Const(4), 1, Const(2))
    assert q.atoms[1].head == Const(3)
    text = to_text(q, VOCAB)
    assert text == '"related to"(9606.ENSP1, "say \\"hi\\"") & hasskill("back\\\\slash", ?y)'
    # an ambiguous name prints as its id; an id prints as a name when the vocabulary allows it
    assert to_text(parse("#0(#5, ?y) & #2(#8, #7)", VOCAB), VOCAB) == 'hasskill(#5, ?y) & "#0"("", "?odd")'


@pytest.mark.parametrize(
    "text,column,message",
    [
        ("", 1, "empty query"),
        ("#0(#1 ?y)", 7, "expected ','"),
        ("#0(#1, ?y", 10, "expected ')'"),
        ("#0(#1, ?y) &", 13, "expected an atom"),
        ("#0(#1, ?y) #1(#2, ?y)", 12, "expected '&', '|'"),
        ("#0(#1, ?y, 1.5)", 12, "alpha 1.5 must be in [0, 1]"),
        ("#0(#1, ?y, 0.5, -2)", 17, "beta -2 must be in [0, 1000000]"),
        ("#0(#1, ?x)", 1, "a query needs the answer variable ?y"),
        ("#0(#1, ?y) | #0(#2, ?x) & #1(?x, #3)", 1, "in every conjunction of its DNF"),
        ("#0(#1, ?y, abc)", 12, "alpha must be a number"),
        ("#0(#1, ?)", 8, "a variable is '?'"),
        ("#0(#x, ?y)", 4, "an id is '#'"),
        ('#0("open, ?y)', 4, "unterminated"),
        ("#0(#1, ?y) & $", 14, "unexpected character"),
        ("!(#0(#1, ?y) & #1(#1, ?y))", 1, "'!' applies to a single atom"),
        ("(#0(#1, ?y)", 12, "expected ')'"),
    ],
)
def test_syntax_errors_point_at_the_column(text, column, message):
    with pytest.raises(QuerySyntaxError) as err:
        parse(text)
    assert err.value.column == column
    assert message in str(err.value)
    assert str(err.value).splitlines()[-1] == "  " + " " * (column - 1) + "^"


def test_resolution_errors():
    with pytest.raises(
        ResolutionError, match=r"column 14: unknown entity 'leadrship' \(did you mean 'leadership'"
    ):
        parse("hasskill(?y, leadrship)", VOCAB)
    with pytest.raises(ResolutionError, match="unknown relation 'hasskil'.*'hasskill'"):
        parse("hasskil(?y, leadership)", VOCAB)
    with pytest.raises(ResolutionError, match="ambiguous entity 'twin'.*#5, #6"):
        parse("hasskill(?y, twin)", VOCAB)
    with pytest.raises(ResolutionError, match="needs a data set vocabulary"):
        parse("hasskill(?y, #1)")
    with pytest.raises(QuerySyntaxError, match="entity id #99 out of range"):
        parse("hasskill(?y, #99)", VOCAB)


def test_model_validates_values():
    with pytest.raises(PipelineError):
        Atom(Var("y"), 0, Const(1), alpha=2.0)
    with pytest.raises(PipelineError):
        Var("1x")
    with pytest.raises(PipelineError):
        Conjunction(())


def test_records_round_trip():
    """The query-set file's atom records (the one record format) round-trip a DNF query exactly."""
    from pipeline.formats.queryset import query_to_records, records_to_query

    q = parse("#1(#2002, ?x, 0.24, 0.1) & !#0(?x, ?y) | #3(?y, ?y)")
    assert records_to_query(query_to_records(q)) == q
    assert query_to_records(q)[1] == {
        "conj": 0,
        "relation": 0,
        "alpha": 0.0,
        "beta": 1.0,
        "negated": True,
        "head_var": "x",
        "head_eid": None,
        "tail_var": "y",
        "tail_eid": None,
    }


# ---------------------------------------------------------------------------------- round trip property
NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
VARS = st.sampled_from(["y", "x", "z", "x_1", "Long_name"]).map(Var)
NUMS = st.one_of(st.sampled_from([0.0, 0.1, 0.25, 1.0]), st.floats(0.0, 1.0))
BETAS = st.one_of(st.sampled_from([1.0, 0.1, 3.0]), st.floats(0.0, 1e6))


@st.composite
def vocab_and_query(draw):
    ents = draw(st.lists(NAMES, min_size=1, max_size=6))
    rels = draw(st.lists(NAMES, min_size=1, max_size=3))
    term = st.one_of(VARS, st.integers(0, len(ents) - 1).map(Const))
    atom = st.builds(Atom, term, st.integers(0, len(rels) - 1), term, NUMS, BETAS, st.booleans())
    # every conjunction mentions ?y (a query without the answer variable is refused), at any position
    with_y = st.builds(Atom, term, st.integers(0, len(rels) - 1), st.just(Var("y")), NUMS, BETAS, st.booleans())
    conj = st.tuples(with_y, st.lists(atom, max_size=3), st.integers(0, 3)).map(
        lambda t: Conjunction(tuple(t[1][: t[2]] + [t[0]] + t[1][t[2] :]))
    )
    q = Query(tuple(draw(st.lists(conj, min_size=1, max_size=3))))
    return Vocabulary.from_names(ents, rels), q


@settings(max_examples=300, deadline=None)
@given(vocab_and_query())
def test_round_trip(vq):
    vocab, q = vq
    assert parse(to_text(q, vocab), vocab) == q
    assert parse(to_text(q)) == q  # the #id form needs no vocabulary
