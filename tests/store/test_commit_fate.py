"""A write-back or an ingest that loses the store at its commit says what is known: committed or not
(asked of the store again, the embedded server started again for it), and one that loses it after its
commit says the new version is in. Before, each said only "lost FalkorDB", committed or not."""

from __future__ import annotations

import pytest

from pipeline.core.errors import StoreUnavailable
from pipeline.store import cypher_text, open_store
from tests.store.test_faults_store import _prepare, _toy_write_backs, _visible, kill_server

EXPECTED = {
    "before": ("old", "it was not committed, the previous answers stay"),
    "reply-lost": ("new", "is committed (what readers see); the store was lost right after"),
    "after": ("new", "is committed (what readers see, durable); the store was lost after that"),
}


def _lose_at(store, statement: str, when: str) -> None:
    """Make ``store`` lose its server around ``statement``: killed just before it is sent, or after it ran
    with its reply lost, or after it ran and replied."""
    inner = store._execute

    def execute(cypher, params, timeout_s):
        if cypher != statement:
            return inner(cypher, params, timeout_s)
        if when == "before":
            kill_server()
            return inner(cypher, params, timeout_s)
        out = inner(cypher, params, timeout_s)
        kill_server()
        if when == "reply-lost":
            raise StoreUnavailable("lost the store (its reply, in this test)")
        return out

    store._execute = execute


@pytest.mark.parametrize("when", list(EXPECTED))
def test_a_write_back_that_loses_the_store_at_its_commit_says_whether_it_is_committed(home, tmp_path, when):
    from pipeline.stages import writeback

    qs, (a, b) = _toy_write_backs(tmp_path)
    with _prepare("reference") as store:
        writeback.write_back(store, a[0], qs, top=a[1], witnesses=a[2])
        old = _visible(store, qs, a[0].label)
        writeback.write_back(store, b[0], qs, top=b[1], witnesses=b[2])
        new = _visible(store, qs, a[0].label)
    store = _prepare("trial")
    writeback.write_back(store, a[0], qs, top=a[1], witnesses=a[2])
    _lose_at(store, cypher_text("writeback_commit"), when)
    with pytest.raises(StoreUnavailable) as err:
        writeback.write_back(store, b[0], qs, top=b[1], witnesses=b[2])
    seen, said = EXPECTED[when]
    assert said in str(err.value) and "\n" not in str(err.value)
    store._disconnect()
    with open_store(graph="trial") as again:
        assert _visible(again, qs, a[0].label) == (new if seen == "new" else old)


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_ingest_that_loses_the_store_at_its_commit_says_whether_it_is_committed(home, when):
    from pipeline.store.ingest import ingest
    from pipeline.store.status import dataset_status
    from tests.store.kgs import make_kg

    store = open_store(graph="fate")
    kg = make_kg("fate_kg")
    _lose_at(store, cypher_text("dataset_commit"), when)
    with pytest.raises(StoreUnavailable) as err:
        ingest(kg, store, progress=False)
    said = {"before": "it was not committed", "after": "'fate_kg' is loaded and committed"}[when]
    assert said in str(err.value)
    store._disconnect()
    with open_store(graph="fate") as again:
        assert dataset_status(again, "fate_kg").complete == (when == "after")
