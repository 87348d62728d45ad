"""One shared test case checks every registered data set against the statistics its spec declares."""

from __future__ import annotations

import pytest

from loaders import REGISTRY, get_spec
from pipeline.core.errors import UnknownNameError
from tests.cases import DatasetCase


class TestCN15k(DatasetCase):
    name = "cn15k"


class TestPPI5k(DatasetCase):
    name = "ppi5k"


class TestONET20k(DatasetCase):
    name = "onet20k"


def test_every_spec_is_complete() -> None:
    # the benchmarks registered in code (a user data set recorded under PIPELINE_HOME by another test has its
    # own checksum and a local source: tests/loaders/test_user.py)
    for spec in (s for s in REGISTRY.values() if getattr(s, "kind", "benchmark") == "benchmark"):
        roles = {f.role for f in spec.files}
        assert {"train", "val", "test"} <= roles, spec.name
        if spec.id_format == "ids":
            assert {"entities", "relations"} <= roles, spec.name
        assert all(f.md5 and len(f.md5) == 32 for f in spec.files), spec.name
        assert spec.source_url.startswith("https://"), spec.name


def test_unknown_dataset_names_close_matches() -> None:
    with pytest.raises(UnknownNameError, match="ppi5k"):
        get_spec("ppi5")
