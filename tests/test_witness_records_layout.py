"""`--explain`'s table stays in line when atoms are long (UMLS-like relation and entity names): every
atom's numbers start at the same column, a long atom is wrapped onto its own line, nothing is cut."""

from __future__ import annotations

from pipeline.stages.witness_records import FACT_WIDTH, witness_lines


def _atom(relation: str, head: str, tail: str, c: float, negated: bool = False) -> dict:
    a = {"relation": relation, "head": head, "tail": tail, "confidence": c, "source": "observed",
         "alpha": 0.5, "beta": 1.0, "value": (1 - c) if negated else c}
    if negated:
        a["negated"] = True
    return a


def test_long_atoms_keep_the_columns() -> None:
    long_rel = "anatomical_structure_is_physical_part_of_body_location"
    rec = {
        "name": "Body_Part,_Organ,_or_Organ_Component",
        "utility": 1.4,
        "witness": {"?x": {"eid": 1, "name": "Embryonic_Structure"}},
        "atoms": [
            _atom("isa", "a", "b", 0.9),
            _atom(long_rel, "Embryonic_Structure", "Body_Part,_Organ,_or_Organ_Component", 0.5),
            _atom(long_rel, "Embryonic_Structure", "Fully_Formed_Anatomical_Structure", 0.1, negated=True),
        ],
    }
    lines = witness_lines(1, rec)
    numbers = [line for line in lines if " c=" in line]
    assert len(numbers) == 3
    # every c= at the same column: 3 spaces of indent, the atom column, one space
    assert {line.index(" c=") for line in numbers} == {3 + FACT_WIDTH}
    # the long atoms are whole on their own lines, right above their numbers
    fact = f"{long_rel}(Embryonic_Structure, \"Body_Part,_Organ,_or_Organ_Component\")"
    i = lines.index(f"   {fact}")
    assert lines[i + 1].startswith(" " * (3 + FACT_WIDTH) + " c=0.5 ")
    assert any(line.strip().startswith(f"NOT {long_rel}(Embryonic_Structure,") for line in lines)
    # a short atom stays on one line, as before
    assert lines[2].startswith("   isa(a, b)") and " c=0.9 " in lines[2]
