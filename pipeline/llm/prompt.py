"""The prompt of a multiple-choice item: soft-query syntax and semantics in plain English (design section 1),
the query with entity and relation names, and four lettered candidates. Pure text functions."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.softquery.model import Atom, Const, Query, Var
from pipeline.softquery.printer import format_number, to_text
from pipeline.softquery.vocab import Vocabulary

LETTERS = "ABCD"

INTRODUCTION = """\
You are answering a question about a knowledge graph of {domain} facts. Every fact has the form
relation(head, tail) and a confidence between 0 and 1; a fact that is not in the graph has confidence 0.

A soft query asks which entity ?y fits best. It is written with atoms joined by & (and) and | (or):
- An atom relation(head, tail, alpha, beta) asks for the fact relation(head, tail). alpha is its
  necessity: if the fact's confidence c is below alpha, the atom fails. beta is its importance: if the
  atom holds, it adds beta * c to the score.
- !relation(head, tail, alpha, beta) is a negated atom: it asks for the fact to be ABSENT. It uses 1 - c
  in place of c: it fails if 1 - c is below alpha, and otherwise adds beta * (1 - c).
- An atom written without alpha and beta has alpha = 0 (it never fails) and beta = 1.
- ?y is the entity asked for. Any other ?variable (such as ?x) may be any entity: the best choice counts.
- The score of a conjunction (&) is the sum of its atoms' contributions; if any atom fails, the whole
  conjunction fails. The score of a disjunction (|) is the best score of its parts.

The candidate with the highest score is the best answer."""

QUESTION = """\
Query: {query}
In words:
{gloss}

Which of these candidates for ?y has the highest score?
{choices}

Answer with a single letter (A, B, C or D)."""


def _term(t, vocab: Vocabulary) -> str:
    return f"?{t.name}" if isinstance(t, Var) else f'"{vocab.entities[t.eid]}"'


def atom_gloss(a: Atom, vocab: Vocabulary) -> str:
    """One atom in words, e.g. '?y isa "animal" (necessity 0.7, importance 0.5)'."""
    head, tail = _term(a.head, vocab), _term(a.tail, vocab)
    rel = vocab.relations[a.relation]
    core = f"NOT {head} {rel} {tail}" if a.negated else f"{head} {rel} {tail}"
    return f"{core} (necessity {format_number(a.alpha)}, importance {format_number(a.beta)})"


def query_gloss(query: Query, vocab: Vocabulary) -> str:
    """The query in words: one line per atom, conjunctions as 'Option k' when there is a disjunction."""
    lines = []
    many = len(query.conjunctions) > 1
    for k, conj in enumerate(query.conjunctions, start=1):
        if many:
            lines.append(f"Option {k} (the better of the options counts):")
        lines += [f"{'  ' if many else ''}- {atom_gloss(a, vocab)}" for a in conj.atoms]
    return "\n".join(lines)


def render_prompt(query: Query, vocab: Vocabulary, candidates: Sequence[str], domain: str) -> str:
    """The full prompt text: introduction, query (text form with names and in words), lettered choices."""
    if len(candidates) != len(LETTERS):
        raise ValueError(f"an item has {len(LETTERS)} candidates, got {len(candidates)}")
    choices = "\n".join(f"{letter}. {name}" for letter, name in zip(LETTERS, candidates, strict=True))
    return (
        INTRODUCTION.format(domain=domain)
        + "\n\n"
        + QUESTION.format(query=to_text(query, vocab), gloss=query_gloss(query, vocab), choices=choices)
    )


def anchors(query: Query) -> list[int]:
    """Entity ids of the query's constants, in order of appearance."""
    return [t.eid for c in query.conjunctions for a in c.atoms for t in a.terms if isinstance(t, Const)]
