"""Tests of the tests: every registered component must be named by a test case of its folder, so adding a
model, metric, query type or data set without a test fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _named_in(folders: list[str], name: str) -> bool:
    pattern = re.compile(r"""["']""" + re.escape(name) + r"""["']""")
    return any(pattern.search(p.read_text()) for f in folders for p in (TESTS / f).rglob("test_*.py"))


def _registered() -> list[tuple[str, str, list[str]]]:
    from loaders import REGISTRY
    from pipeline.baselines import MODELS as QE_MODELS
    from pipeline.metrics import METRICS
    from pipeline.models import MODELS
    from pipeline.query.types import QUERY_TYPES

    return (
        [("model", n, ["models"]) for n in MODELS]
        + [("metric", n, ["metrics"]) for n in METRICS]
        + [("query type", n, ["query", "engine"]) for n in QUERY_TYPES]
        + [("data set", n, ["loaders"]) for n in REGISTRY]
        + [("query-embedding model", n, ["baselines"]) for n in QE_MODELS]
    )


@pytest.mark.parametrize(("kind", "name", "folders"), _registered(), ids=lambda v: str(v))
def test_every_registered_component_has_a_test(kind: str, name: str, folders: list[str]) -> None:
    if kind == "data set":
        # the shared spec test parametrizes over REGISTRY itself
        assert "sorted(REGISTRY)" in (TESTS / "loaders" / "test_registry.py").read_text()
        return
    assert _named_in(folders, name), (
        f"{kind} '{name}' is registered but no test under tests/{folders} names it"
    )
