"""SQUK import: file names, both formula styles, answer order, and malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.errors import DataFormatError
from pipeline.softquery import QUERY_TYPES, type_of
from pipeline.squk.files import SQUK_TYPES, parse_file_name, read_squk_file


def write(folder: Path, name: str, doc: object) -> Path:
    p = folder / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


IP = "(r1(s1,e1))&((r2(s2,e1))&(r3(e1,f1)))"
IP_GROUNDING = {
    "r1": 3,
    "s1": 17,
    "r2": 5,
    "s2": 8,
    "r3": 0,
    "a1": 0.25,
    "b1": 0.5,
    "a2": 0,
    "b2": 1,
    "a3": 0.1,
    "b3": 0.3,
}


def test_type_numbers_follow_the_published_order():
    assert SQUK_TYPES == ("1p", "2p", "2i", "2in", "2il", "2m", "2u", "3in", "ip", "im", "inp", "up")
    assert set(SQUK_TYPES) == set(QUERY_TYPES)
    f = parse_file_name("/x/test_type0008_random_low_soft_efo1_qaa.json")
    assert (f.split, f.type, f.beta, f.alpha) == ("test", "ip", "random", "low")
    f = parse_file_name("valid_type0000_soft_efo1_qaa.json")
    assert (f.split, f.type, f.beta, f.alpha) == ("valid", "1p", None, None)


def test_grounded_formula_becomes_the_typed_query(tmp_path):
    doc = {IP: [[IP_GROUNDING, {"f1_answers": [9, 4, 6]}, {"f1_values": [0.1, 0.35, 0.35]}]]}
    info, (q,) = read_squk_file(write(tmp_path, "test_type0008_random_low_soft_efo1_qaa.json", doc))
    expected = QUERY_TYPES["ip"].build([3, 5, 0], [17, 8], [0.25, 0.0, 0.1], [0.5, 1.0, 0.3])
    assert type_of(q.query) == "ip" == info.type
    assert q.query.relations() == expected.relations() and q.query.anchors() == expected.anchors()
    assert [(a.alpha, a.beta, a.negated) for a in q.query.atoms] == [
        (0.25, 0.5, False),
        (0.0, 1.0, False),
        (0.1, 0.3, False),
    ]
    # published ascending -> best first, ties by entity id
    assert (q.answers, q.values) == ([4, 6, 9], [0.35, 0.35, 0.1])


def test_old_style_alpha_beta_inside_the_formula(tmp_path):
    # 2in with percentile alphas: 0% is zero, 50% is the relation's median from the alpha table
    formula = "(!(r1(s1,f1,0%,1.0)))&(r2(s2,f1,50%,0.4))"
    doc = {formula: [[{"r1": 1, "s1": 2, "r2": 0, "s2": 3}, {"f1_answers": [5]}, {"f1_values": [0.7]}]]}
    table = np.array([[0.0, 0.2, 0.45, 0.8], [0.0, 0.3, 0.6, 0.9]])
    _, (q,) = read_squk_file(write(tmp_path, "test_type0003_soft_efo1_qaa.json", doc), alpha_table=table)
    assert type_of(q.query) == "2in"
    assert [(a.relation, a.alpha, a.beta, a.negated) for a in q.query.atoms] == [
        (1, 0.0, 1.0, True),
        (0, 0.45, 0.4, False),
    ]
    with pytest.raises(DataFormatError, match="needs the data set's alpha levels"):
        read_squk_file(tmp_path / "test_type0003_soft_efo1_qaa.json")


def test_file_name_defaults_fill_missing_alpha_beta(tmp_path):
    doc = {
        "(r1(s1,f1))|(r2(s2,f1))": [
            [{"r1": 1, "s1": 2, "r2": 0, "s2": 3}, {"f1_answers": []}, {"f1_values": []}]
        ]
    }
    _, (q,) = read_squk_file(write(tmp_path, "valid_type0006_equal_zero_soft_efo1_qaa.json", doc))
    assert type_of(q.query) == "2u" and all(a.alpha == 0.0 and a.beta == 1.0 for a in q.query.atoms)
    with pytest.raises(DataFormatError, match="a1'.*missing from the grounding and the formula"):
        read_squk_file(write(tmp_path, "valid_type0006_soft_efo1_qaa.json", doc))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("test_type0012_soft_efo1_qaa.json", {}, "type number 12"),
        ("queries.json", {}, "file name"),
        ("test_type0008_equal_zero_soft_efo1_qaa.json", '{"a": [', "line 1.*not JSON"),
        ("test_type0008_equal_zero_soft_efo1_qaa.json", [1, 2], "expected a JSON object"),
        ("test_type0008_equal_zero_soft_efo1_qaa.json", {IP: [[{}, {}]]}, "expected \\[grounding"),
        (
            "test_type0008_equal_zero_soft_efo1_qaa.json",
            {IP: [[{"r1": 3, "s1": 17, "r2": 5, "s2": 8}, {"f1_answers": [1]}, {"f1_values": [0.5]}]]},
            "field 'query 0 of .* r3'",
        ),
        (
            "test_type0008_equal_zero_soft_efo1_qaa.json",
            {IP: [[IP_GROUNDING, {"f1_answers": [1, 2]}, {"f1_values": [0.5]}]]},
            "2 answers but 1 values",
        ),
        (
            "test_type0008_equal_zero_soft_efo1_qaa.json",
            {IP: [[IP_GROUNDING, {"f1_answers": [1, 1]}, {"f1_values": [0.5, 0.5]}]]},
            "listed twice",
        ),
        (
            "test_type0008_equal_zero_soft_efo1_qaa.json",
            {IP: [[dict(IP_GROUNDING, s1="x"), {"f1_answers": []}, {"f1_values": []}]]},
            "s1'.*not an integer id",
        ),
        (
            "test_type0008_equal_zero_soft_efo1_qaa.json",
            {IP: [[dict(IP_GROUNDING, a1=1.5), {"f1_answers": []}, {"f1_values": []}]]},
            "alpha 1.5 outside",
        ),
        (
            "test_type0008_equal_zero_soft_efo1_qaa.json",
            {"r1(s1,f1) ~ r2(s2,f1)": [[IP_GROUNDING, {"f1_answers": []}, {"f1_values": []}]]},
            "unexpected '~ r2",
        ),
        (
            "test_type0000_equal_zero_soft_efo1_qaa.json",
            {"r1(s1,e1)": [[IP_GROUNDING, {"f1_answers": []}, {"f1_values": []}]]},
            "no free variable",
        ),
        (
            "test_type0003_equal_zero_soft_efo1_qaa.json",
            {"!((r1(s1,f1))&(r2(s2,f1)))": [[IP_GROUNDING, {"f1_answers": []}, {"f1_values": []}]]},
            "not a soft query",
        ),
    ],
)
def test_malformed_files_raise_data_format_errors(tmp_path, name, content, message):
    with pytest.raises(DataFormatError, match=message):
        read_squk_file(write(tmp_path, name, content), n_entities=100, n_relations=10)


def test_ids_out_of_range(tmp_path):
    doc = {IP: [[IP_GROUNDING, {"f1_answers": [1]}, {"f1_values": [0.5]}]]}
    with pytest.raises(DataFormatError, match="s1'.*id 17 out of range 0..9"):
        read_squk_file(write(tmp_path, "test_type0008_soft_efo1_qaa.json", doc), n_entities=10)
