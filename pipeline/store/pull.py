"""Read an uncertain KG that already lives in a graph store (Neo4j or FalkorDB) as named rows, for
``pipeline ingest NAME --from-store URI``. Read-only Cypher in the common subset (design section 4):
the user's nodes and relationships are never written.

Every relationship whose confidence property is set (optionally only of some relationship types) is a
row ``head, relation, tail, conf``: head/tail are the nodes' name property, relation the relationship
type. The pipeline's own nodes (``:Entity``, ``:Relation``, ``:Dataset``, ``:Lock``, ``:Query``) are
skipped, so pulling from the pipeline's own graph never reads its copies back (cypher/pull_facts.cypher).
"""

from __future__ import annotations

import re

import pandas as pd

from pipeline.core.errors import DataFormatError, PipelineError
from pipeline.store.base import Store
from pipeline.store.cypher import cypher_text, fill

PROPERTY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PAGE = 10_000


def _property(name: str, option: str) -> str:
    # property keys are formatted into the text (Cypher has no parameter for them): identifiers only
    if not PROPERTY_RE.fullmatch(name):
        raise PipelineError(f"{option} {name!r}: expected a property name (letters, digits, '_')")
    return name


def pull_rows(
    store: Store,
    confidence_property: str,
    rel_types: list[str] | None = None,
    name_property: str = "name",
) -> pd.DataFrame:
    """Named rows (head, relation, tail, conf) of every relationship carrying ``confidence_property``,
    in pages of PAGE ordered by (type, head, tail) so the result does not depend on the store's order.
    A node without ``name_property`` or a confidence that is not a number raises DataFormatError naming
    the store, the relationship and the field; the range [0, 1] is checked by the loader."""
    conf = _property(confidence_property, "--confidence-property")
    name = _property(name_property, "--name-property")
    cypher = fill(cypher_text("pull_facts"), {"CONF": conf, "NAME": name})
    params: dict = {"types": list(rel_types) if rel_types else None}
    rows: list[dict] = []
    while True:
        page = store.run(cypher, {**params, "skip": len(rows), "limit": PAGE})
        rows.extend(page)
        if len(page) < PAGE:
            break
    frame = pd.DataFrame(rows, columns=["head", "relation", "tail", "conf"])
    where_txt = store.uri
    for i, row in enumerate(rows):
        for fld in ("head", "tail"):
            if row[fld] is None:
                raise DataFormatError(
                    where_txt, None, name_property,
                    f"relationship {i + 1} ({row['head']} -[{row['relation']}]-> {row['tail']}): its {fld} node "
                    f"has no '{name_property}' property (choose one with --name-property)",
                )
        if isinstance(row["conf"], bool) or not isinstance(row["conf"], (int, float)):
            raise DataFormatError(
                where_txt, None, confidence_property,
                f"relationship {i + 1} ({row['head']} -[{row['relation']}]-> {row['tail']}): not a number: "
                f"{str(row['conf'])[:30]!r}",
            )
    frame["head"] = frame["head"].astype(str)
    frame["tail"] = frame["tail"].astype(str)
    frame["conf"] = frame["conf"].astype("float64")
    return frame
