"""Witnesses for people and files: the JSON record of one explained answer and its terminal text.

Pure functions over :class:`pipeline.engine.witness.Witness` and a vocabulary; names, never bare ids, in
anything a person reads. `source` says where an atom's confidence came from: `observed` (a fact of the
observed graph queried), `predicted` (a fact of the neural adjacency export), `missing` (not stored, so
the design's default c = 0 applies)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.engine.witness import AtomUse, Witness
from pipeline.softquery.model import Query
from pipeline.softquery.printer import format_name, format_number, relation_text
from pipeline.softquery.vocab import Vocabulary

OBSERVED, PREDICTED, MISSING = "observed", "predicted", "missing"
FACT_WIDTH = 48  # the atom column of witness_lines; a longer atom is wrapped, never pushes the numbers out


def _num(x: float) -> float | None:
    """JSON-safe rounding (6 decimals); -inf (a failed atom) as null."""
    return None if x == float("-inf") else round(float(x), 6)


def atom_record(use: AtomUse, vocab: Vocabulary, found_source: str) -> dict[str, Any]:
    a = use.atom
    rec: dict[str, Any] = {
        "relation": vocab.relations[a.relation],
        "head": vocab.entities[use.head],
        "tail": vocab.entities[use.tail],
        "confidence": round(use.confidence, 6),
        "source": found_source if use.found else MISSING,
        "alpha": float(a.alpha),
        "beta": float(a.beta),
        "value": _num(use.value),
    }
    if a.negated:
        # A negated atom rewards the absence of its fact: value beta * (1 - c), and c above 1 - alpha fails.
        rec["negated"] = True
        rec["forbids"] = (
            f"{vocab.relations[a.relation]}({vocab.entities[use.head]}, {vocab.entities[use.tail]})"
            f" with confidence > {format_number(round(1.0 - float(a.alpha), 6))}"
        )
    return rec


def witness_record(
    w: Witness, query: Query, vocab: Vocabulary, found_source: str, approximate: bool = False
) -> dict[str, Any]:
    """{"eid", "name", "utility", "witness": {"?x": {"eid", "name"}}, "atoms": [...]} plus "branch" for a
    disjunction (index of the conjunction that won, from 0) and "approximate" when a cycle cap made the
    answer's utility (approximate=True) or the witness search a lower bound. Under a cap the witness can
    beat the answer's capped utility (binding ?y may break the cycle): then "witness_utility" holds its sum."""
    rec: dict[str, Any] = {
        "eid": w.answer,
        "name": vocab.entities[w.answer],
        "utility": _num(w.utility),
        "witness": {f"?{v.name}": {"eid": e, "name": vocab.entities[e]} for v, e in w.assignment.items()},
        "atoms": [atom_record(u, vocab, found_source) for u in w.atoms],
    }
    if len(query.conjunctions) > 1:
        rec["branch"] = w.branch
    if w.approximate or approximate:
        rec["approximate"] = True
        if abs(w.total - w.utility) > 1e-6:
            rec["witness_utility"] = _num(w.total)
    return rec


def witness_lines(rank: int, rec: dict[str, Any]) -> list[str]:
    """A few readable lines: the answer, the chosen entities, then one line per atom with its arithmetic."""
    head = f"#{rank} {format_name(rec['name'])}  utility {rec['utility']}"
    if "branch" in rec:
        head += f"  (branch {rec['branch'] + 1} of the disjunction won)"
    if rec.get("approximate"):
        head += "  [lower bound: a cycle cap skipped candidates]"
        if "witness_utility" in rec:
            head += f"; this witness reaches {rec['witness_utility']}"
    lines = [head]
    if rec["witness"]:
        lines.append("   where " + ", ".join(f"{v} = {format_name(x['name'])}" for v, x in rec["witness"].items()))
    for a in rec["atoms"]:
        fact = f"{format_name(a['relation'])}({format_name(a['head'])}, {format_name(a['tail'])})"
        c = a["confidence"]
        if a.get("negated"):
            calc = f"{a['beta']:g} x (1 - {c:g})"
            fact = "NOT " + fact
        else:
            calc = f"{a['beta']:g} x {c:g}"
        value = "fails (below alpha)" if a["value"] is None else f"{a['value']:g}"
        if len(fact) > FACT_WIDTH:  # a long atom gets its own line; its numbers stay in their columns
            lines.append(f"   {fact}")
            fact = ""
        line = f"   {fact:<{FACT_WIDTH}} c={c:<9g} {a['source']:<9} alpha={a['alpha']:g}  {calc} = {value}"
        if a.get("negated"):
            line += f"  (forbids c > {format_number(round(1.0 - a['alpha'], 6))})"
        lines.append(line)
    return lines


@dataclass(frozen=True)
class WitnessAtom:
    """One atom of an explained answer, with the numbers ``pipeline query --explain`` prints: its
    confidence, where it came from (observed, predicted or missing = c 0), alpha, beta and its value; the
    values of an answer's atoms sum to its utility. negated: a ``!`` atom (then forbids says what).

    >>> import pipeline as pl
    >>> pl.WitnessAtom("knows", "ann", "bob", 0.9, "observed", 0.5, 1.0, 0.9).value
    0.9
    """

    relation: str
    head: str
    tail: str
    confidence: float
    source: str
    alpha: float
    beta: float
    value: float | None  # None: the atom fails (-inf)
    negated: bool = False
    forbids: str | None = None


@dataclass(frozen=True)
class Explanation:
    """Why one answer ranks where it does: ``witness`` maps each existential variable to the entity the
    engine chose (name), ``atoms`` the winning conjunction's atoms, ``text`` the lines ``pipeline query
    --explain`` prints, ``record`` the JSON record of ``pipeline query --explain --json``.

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Explanation)]
    ['rank', 'eid', 'name', 'utility', 'witness', 'atoms', 'text', 'record']
    """

    rank: int
    eid: int
    name: str
    utility: float
    witness: dict[str, str]
    atoms: list[WitnessAtom]
    text: str
    record: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, rank: int, rec: dict[str, Any]) -> Explanation:
        """The explanation of the answer at ``rank`` (1 = best) from its :func:`witness_record`."""
        atoms = [WitnessAtom(a["relation"], a["head"], a["tail"], a["confidence"], a["source"], a["alpha"],
                             a["beta"], a["value"], bool(a.get("negated")), a.get("forbids")) for a in rec["atoms"]]
        return cls(rank, rec["eid"], rec["name"], rec["utility"], {v: w["name"] for v, w in rec["witness"].items()},
                   atoms, "\n".join(witness_lines(rank, rec)), rec)


__all__ = ["MISSING", "OBSERVED", "PREDICTED", "Explanation", "WitnessAtom", "atom_record", "relation_text",
           "witness_lines", "witness_record"]
