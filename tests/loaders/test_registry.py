"""One shared test case checks every registered data set against the statistics its spec declares."""

from __future__ import annotations

import pytest

from loaders import REGISTRY, get_spec, load
from pipeline.core.errors import UnknownNameError
from tests.cases import ComponentCase
from tests.conftest import SHARED_DATA


class DatasetCase(ComponentCase):
    """One shared case: the data set loaded from the mirror has exactly the statistics its spec declares."""

    kind = "datasets"

    def test_matches_its_spec(self) -> None:
        spec = self.component()
        if not (SHARED_DATA / self.name).is_dir():
            pytest.skip(f"{self.name} is not mirrored in {SHARED_DATA} (see its README)")
        kg = load(self.name)  # verifies every md5
        assert kg.n_entities == spec.n_entities
        assert kg.n_relations == spec.n_relations
        per_split = kg.rows.groupby("split", observed=True).size().to_dict()
        assert per_split == spec.facts
        for f in spec.files:
            if f.lines is not None and f.filename in kg.checksums:
                text = (SHARED_DATA / self.name / f.filename).read_bytes()
                assert text.count(b"\n") == f.lines, f.filename
                assert kg.checksums[f.filename] == f.md5


class TestCN15k(DatasetCase):
    name = "cn15k"


class TestPPI5k(DatasetCase):
    name = "ppi5k"


class TestONET20k(DatasetCase):
    name = "onet20k"


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
