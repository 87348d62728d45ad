"""How the answering stage cuts a query type into tasks for several workers (pure functions).

A type is cut only where workers outnumber the types (a file of one type, or a many-core machine). The
engine streams a relation (a multi-edge: the shared entries of its relations) once for all the rows of a
batch that use it, so a cut that puts the queries sharing their streamed relations in one part does that
work once instead of once per part, and only that part's worker maps those pages (CN15k, the 100 2m test
queries, one thread, warm: two parts of the file's order 0.74 s in all, two parts by relations 0.68 s).
The parts are balanced by an estimate of each group's stream (the facts of its relations, from the
method's :meth:`~pipeline.methods.base.Method.relation_sizes` where it tells them), not by counts: the
pairs of a CN15k export differ 5x in size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.softquery.model import Var

# A group of k queries sharing streams of E entries costs about E * (1 + k * _ROW_SHARE) + k * _PER_QUERY
# entries' worth: one pass over the entries, a share of it per row, and each query's own work (its anchor,
# its floor rows, its ranking). Fitted on the CN15k export, one thread, warm (44 groups of the 2m and im
# test queries: 0.0078 s per M entries, 0.0034 s per M entries x k / 16, 0.0039 s per query).
_ROW_SHARE = 1 / 37
_PER_QUERY = 500_000


def streamed(query: Any) -> tuple[tuple[int, ...], ...]:
    """The relations a query's engine streams: per conjunction, the atoms between two variables grouped
    by their pair of variables (two or more: a multi-edge, streamed as one), each group's relations
    sorted, the groups sorted. Queries with the same value share their streams in one batch."""
    out: list[tuple[int, ...]] = []
    for conj in getattr(query, "conjunctions", ()):
        pairs: dict[frozenset, list[int]] = {}
        for atom in conj.atoms:
            if isinstance(atom.head, Var) and isinstance(atom.tail, Var):
                pairs.setdefault(frozenset((atom.head, atom.tail)), []).append(int(atom.relation))
        out.extend(tuple(sorted(rels)) for rels in pairs.values())
    return tuple(sorted(out))


def stream_size(key: tuple[tuple[int, ...], ...], sizes: Sequence[int]) -> float:
    """The entries a batch's streams of ``key`` read, estimated: per group, its relation's facts (a
    multi-edge reads the entries its relations share: at most the smaller one's)."""
    total = 0.0
    for rels in key:
        total += min((sizes[r] if 0 <= r < len(sizes) else 0) for r in rels)
    return total


def cut(
    idx: Sequence[int], queries: Sequence[Any], parts: int, sizes: Sequence[int] | None = None
) -> list[list[int]]:
    """``idx`` (positions into ``queries``) cut into at most ``parts`` non-empty parts, each ascending:
    queries with the same :func:`streamed` key together, groups too large for one part halved until
    they fit, then the groups dealt to the least loaded part, largest first (longest processing time
    first). Deterministic: the same inputs give the same parts."""
    parts = max(1, min(parts, len(idx)))
    if parts == 1:
        return [list(idx)] if idx else []
    groups: dict[tuple, list[int]] = {}
    for i in idx:
        groups.setdefault(streamed(queries[i]), []).append(i)

    def cost(key: tuple, members: list[int]) -> float:
        if sizes is None:  # nothing known of the streams: by counts
            return float(len(members))
        return stream_size(key, sizes) * (1 + _ROW_SHARE * len(members)) + _PER_QUERY * len(members)

    pieces = [(key, members) for key, members in groups.items()]
    target = sum(cost(k, m) for k, m in pieces) / parts
    while len(pieces) < parts or any(cost(k, m) > target and len(m) > 1 for k, m in pieces):
        # halve the costliest piece that can be halved (a single query cannot)
        j = max(
            (j for j, (_, m) in enumerate(pieces) if len(m) > 1),
            key=lambda j: cost(*pieces[j]),
            default=None,
        )
        if j is None:
            break
        key, members = pieces.pop(j)
        half = len(members) // 2
        pieces[j:j] = [(key, members[:half]), (key, members[half:])]
    load = [0.0] * parts
    bins: list[list[int]] = [[] for _ in range(parts)]
    for key, members in sorted(pieces, key=lambda p: (-cost(*p), p[1][0])):
        b = load.index(min(load))
        bins[b].extend(members)
        load[b] += cost(key, members)
    return [sorted(b) for b in bins if b]
