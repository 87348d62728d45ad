"""Files bound to their data: a query set, a training run and the export made from it
record the content key of the data set version they came from (``dataset_version``: the key ingest writes
on the store's load marker, :func:`pipeline.store.ingest.content_key`). Entity ids mean something only in
that version: a user KG re-ingested with two names swapped keeps its counts and gives every id another
meaning. Work that brings two versions together (a query set and an export, an export and the data set
loaded now) is refused in one line naming both keys.

Files written before versions were recorded carry none: they are accepted, with a note on stderr saying
that they could not be checked and how to make them again (re-sampling or re-exporting is cheap next to a
silently wrong answer, but refusing every older export would strand finished work that is still right).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pipeline.core.errors import ArtifactError

KEY = "dataset_version"


class DataVersionMismatch(ArtifactError):
    """Two inputs of one job were made from different versions of a data set."""


def check_versions(dataset: str, sources: Sequence[tuple[str, str | None]], notes: bool = True) -> str | None:
    """``sources``: (what, recorded content key or None) for each input of one job, e.g. ``("the query set
    q.parquet", ...)``, ``("the export exports/x", ...)``, ``("the data set 'sig' as loaded now", ...)``.
    Raises DataVersionMismatch naming the first two that differ and both keys; writes one note to stderr
    per input without a key (``notes``). Returns the agreed key (None when no input has one)."""
    known = [(what, str(key)) for what, key in sources if key]
    for what, key in known[1:]:
        if key != known[0][1]:
            first, first_key = known[0]
            raise DataVersionMismatch(
                f"{what} was made from another version of '{dataset}' than {first} (content keys {key[:12]} "
                f"and {first_key[:12]}): its entity ids name other entities there; make it again from the "
                "data set as it is now"
            )
    if notes and known:
        for what, key in sources:
            if not key:
                sys.stderr.write(
                    f"note: {what} records no version of '{dataset}' (made before versions were recorded): "
                    "not checked against the others; make it again to have it checked\n"
                )
    return known[0][1] if known else None
