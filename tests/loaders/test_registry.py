"""One shared test case checks every registered data set against the statistics its spec declares."""

from __future__ import annotations

import pytest

from loaders import REGISTRY, get_spec, load
from pipeline.errors import UnknownNameError
from tests.conftest import SHARED_DATA


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registered_dataset_matches_its_spec(name: str) -> None:
    spec = REGISTRY[name]
    if not (SHARED_DATA / name).is_dir():
        pytest.skip(f"{name} is not mirrored in {SHARED_DATA} (see its README)")
    kg = load(name)  # verifies every md5
    assert kg.n_entities == spec.n_entities
    assert kg.n_relations == spec.n_relations
    per_split = kg.rows.groupby("split", observed=True).size().to_dict()
    assert per_split == spec.facts
    for f in spec.files:
        if f.lines is not None and f.filename in kg.checksums:
            text = (SHARED_DATA / name / f.filename).read_bytes()
            assert text.count(b"\n") == f.lines, f.filename
            assert kg.checksums[f.filename] == f.md5


def test_every_spec_is_complete() -> None:
    for spec in REGISTRY.values():
        roles = {f.role for f in spec.files}
        assert {"train", "val", "test"} <= roles, spec.name
        if spec.id_format == "ids":
            assert {"entities", "relations"} <= roles, spec.name
        assert all(f.md5 and len(f.md5) == 32 for f in spec.files), spec.name
        assert spec.source_url.startswith("https://"), spec.name


def test_unknown_dataset_names_close_matches() -> None:
    with pytest.raises(UnknownNameError, match="ppi5k"):
        get_spec("ppi5")
