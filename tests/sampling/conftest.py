"""Fixtures of the sampling tests: the tiny hand-made KG, a PPI5k slice, and stores holding them."""

from __future__ import annotations

import pytest

from loaders.base import KGData
from tests.sampling.kgs import TINY_FACTS, make_kg, slice_kg


@pytest.fixture
def tiny_kg() -> KGData:
    return make_kg("tiny", TINY_FACTS, 6, 2)


@pytest.fixture(scope="session")
def ppi_slice(ppi5k) -> KGData:
    """PPI5k among its first 600 proteins: ~35k rows (29k train), all 7 relations."""
    return slice_kg(ppi5k, 600, "ppi5k_slice")


@pytest.fixture(scope="session")
def slice_store(falkordb_store, ppi_slice):
    """A graph of the session's FalkorDB server holding the PPI5k slice (dropped afterwards)."""
    from pipeline.store.ingest import ingest

    store = falkordb_store.fresh()
    try:
        ingest(ppi_slice, store, progress=False)
        yield store
    finally:
        store.drop()
        store.close()


@pytest.fixture
def tiny_store(fresh_store, tiny_kg):
    from pipeline.store.ingest import ingest

    ingest(tiny_kg, fresh_store, progress=False)
    return fresh_store
