"""Answers files: one Parquet file per (query set, method), the hand-off from answering to evaluation.

One row per (query, entity) for the top-k predicted entities AND every ground-truth answer:
  query_id str · type str · entity int64 · utility float32 (predicted,
  -inf = fails) · rank int64 (among ALL entities, 1 = best, ties by entity id, -inf last: the listing
  order, and the paper protocol's rank) · rank_first int64 (1 + the number of entities predicted strictly
  better) · ties int64 (the number of entities predicted equal, itself included: its tie group occupies
  ranks rank_first..rank_first+ties-1, which is what the metrics read) ·
  truth_utility float64 (NaN where the entity is not a ground-truth answer) ·
  truth_rank int32 (1..n = position among the ground-truth answers, best first; 0 = not an answer) ·
  paper_rank int32 (optional: 1..m = position in the list the paper protocol reads, the query set's
  ``answers_paper``, whose entities all have rows; 0 = not in it; absent where the query set has none)
File metadata (key ``pipeline``, JSON, sealed): format, dataset, method (the table label, e.g.
``ukge_logi SRC(D+L)``), method settings, query_set (path and checksum), split, n_queries, k and the
provenance block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.formats import meta as metafile
from pipeline.softquery.model import TOP_K

if TYPE_CHECKING:  # the rows are made from utility tensors, but reading answers files needs no torch
    import torch

FORMAT = "soft-query-answers/2"
# Format 1 had no tie groups (rank_first, ties), which the tie-aware metrics need: such files are refused
# with what to re-run.
OLD_FORMATS = ("soft-query-answers/1",)

# The columns, named once: every reader (evaluate, writeback, explain, the API) uses these constants.
QUERY_ID = "query_id"
TYPE = "type"
ENTITY = "entity"
UTILITY = "utility"
RANK = "rank"
RANK_FIRST = "rank_first"
TIES = "ties"
TRUTH_UTILITY = "truth_utility"
TRUTH_RANK = "truth_rank"
PAPER_RANK = "paper_rank"
QUERY_TEXT = "query"  # optional
ENTITY_NAME = "entity_name"  # optional

SCHEMA = pa.schema(
    [
        (QUERY_ID, pa.string()),
        (TYPE, pa.string()),
        (ENTITY, pa.int64()),
        (UTILITY, pa.float32()),
        (RANK, pa.int64()),
        (RANK_FIRST, pa.int64()),
        (TIES, pa.int64()),
        (TRUTH_UTILITY, pa.float64()),
        (TRUTH_RANK, pa.int32()),
    ]
)
REQUIRED_META = ("dataset", "method", "query_set")
# Optional columns: the query text with names and each entity's name; files without them read
# as before, and a frame that has them keeps them when written.
OPTIONAL = [(QUERY_TEXT, pa.string()), (ENTITY_NAME, pa.string()), (PAPER_RANK, pa.int32())]


@dataclass
class Answers:
    """An answers file: ``frame`` (one row per (query, entity) for the top-k predicted entities and every
    ground-truth answer; columns query_id, type, entity, utility (predicted; -inf = fails), rank (among all
    entities, 1 = best), rank_first and ties (the entity's tie group), truth_utility (NaN: not an answer),
    truth_rank (0: not an answer), optionally query and entity_name; ``pl.answer`` adds ``name``, each
    entity's name; :mod:`pipeline.formats.answers` says more), ``meta`` (the file metadata), ``path`` and, when it was just written, ``report`` (what ``pipeline
    answer --json`` prints). ``label`` is the method's row name in the tables, ``name`` its registry name.

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Answers)]
    ['frame', 'meta', 'path', 'report']
    """

    frame: pd.DataFrame = field(repr=False)
    meta: dict[str, Any] = field(default_factory=dict, repr=False)
    path: Path | None = None
    report: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        """The method's label, the table key of this answer set, e.g. ``ukge_logi SRC(D+L)``."""
        method, backbone = str(self.meta["method"]), self.meta.get("backbone")
        # files written before methods were labels carry the backbone apart
        return method if not backbone or method.startswith(f"{backbone} ") else f"{backbone} {method}"

    @property
    def name(self) -> str | None:
        """The method's registry name (``src``, ``logice_ne``...); None in files written before it was kept."""
        name = self.meta.get("method_name")
        return None if name is None else str(name)


# ----------------------------------------------------------------------------------------------- file I/O


def non_finite(frame: pd.DataFrame) -> str | None:
    """What is not a number where one is expected, in words, or None: a predicted utility is a number or
    -inf (every branch fails), never NaN or +inf; a ground-truth answer's true utility is finite."""
    u = frame[UTILITY].to_numpy(np.float64)
    bad = int(np.isnan(u).sum() + np.isposinf(u).sum())
    if bad:
        return f"{bad} of its {len(u)} predicted utilities are NaN or +inf (a utility is a number, or -inf for a failed query)"
    truth = frame[TRUTH_UTILITY].to_numpy(np.float64)[frame[TRUTH_RANK].to_numpy() > 0]
    bad = int((~np.isfinite(truth)).sum())
    if bad:
        return f"{bad} of its {len(truth)} ground-truth answers have no finite true utility"
    return None


def write_answers(frame: pd.DataFrame, path: str | Path, meta: dict[str, Any]) -> Path:
    """Write an answers frame atomically (a crashed run never leaves a file that looks complete); a frame
    with NaN or +inf utilities is refused (:func:`non_finite`): no method's fault is written as a result."""
    why = non_finite(frame)
    if why is not None:
        raise PipelineError(f"{meta.get('method', 'the method')}: not written to {path}: {why}")
    fields = list(SCHEMA) + [pa.field(n, t) for n, t in OPTIONAL if n in frame.columns]
    schema = pa.schema(fields).with_metadata({metafile.META_KEY: metafile.encode(FORMAT, meta, REQUIRED_META)})
    table = pa.Table.from_pandas(frame[[f.name for f in fields]], schema=schema, preserve_index=False)
    return metafile.write_parquet(table, Path(path))


def read_answers(path: str | Path) -> Answers:
    """Read one answers file; ArtifactError names the file and what is wrong with it."""
    path = Path(path)
    old = metafile.peek_format(path) if path.is_file() else None
    if old in OLD_FORMATS:
        raise ArtifactError(
            f"{path}: an answers file of format {old!r}, written before the tie-aware "
            f"metrics (it has no tie groups); re-run `pipeline answer` to write format {FORMAT!r}"
        )
    table, meta = metafile.read_parquet(path, FORMAT, "answers file", REQUIRED_META,
                                       "answer again (`pipeline answer`) to write it")
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise ArtifactError(f"{path}: missing column(s) {', '.join(missing)}")
    frame = table.to_pandas()
    why = non_finite(frame)
    if why is not None:  # metrics over them would be numbers from nothing
        raise ArtifactError(f"{path}: {why}; answer again to write it")
    return Answers(frame, meta, path)


def find_answer_files(path: str | Path) -> list[Path]:
    """An answers file, or every answers file (``*.parquet`` with answers metadata) of a directory."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ArtifactError(f"{path}: no such answers file or directory")
    found = []
    for p in sorted(path.glob("*.parquet")):
        # old ones: refused with a reason when read; "" = damaged (unreadable, or its metadata): reported
        # when read, never skipped without a word; None = another tool's Parquet file
        if metafile.peek_format(p) in (FORMAT, "", *OLD_FORMATS):
            found.append(p)
    if not found:
        raise ArtifactError(f"{path}: holds no answers file (*.parquet written by `pipeline answer`)")
    return found


# ------------------------------------------------------------------------------------------- answer rows


def rows_from_utilities(
    query_ids: list[str],
    types: list[str],
    utility: torch.Tensor,
    truth: list[tuple],
    k: int = TOP_K,
) -> pd.DataFrame:
    """The answers rows of a batch of queries.

    utility: (B, n_entities) float predicted utilities (-inf = fails), any device.
    truth: per query, (entities (n,) int64, utilities (n,) float64) of the ground-truth answers, best first,
    and optionally a third item, the paper protocol's list (m,) int64 best first, or None.
    Returns one row per (query, entity) for the k best-ranked entities, every ground-truth answer and every
    entity of the paper's list: :func:`rows_frame` of :func:`ranked_rows` (the answering stage makes the
    second where the utilities are, a worker, and the first where the file is written)."""
    if not query_ids:
        return pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
    return rows_frame(query_ids, types, truth, ranked_rows(utility, [entities_to_rank(t) for t in truth], k))


def _paper(truth: tuple) -> np.ndarray | None:
    """The paper protocol's list of a query's truth tuple, or None."""
    return None if len(truth) < 3 or truth[2] is None else np.asarray(truth[2], dtype=np.int64)


def entities_to_rank(truth: tuple) -> np.ndarray:
    """The entities a query's rows must hold beside its top k: the ground-truth answers and the paper
    protocol's list (an imported set's published answers need not all be ours)."""
    paper = _paper(truth)
    ents = np.asarray(truth[0], dtype=np.int64)
    return ents if paper is None else np.concatenate([ents, paper])


@dataclass(frozen=True)
class RankedRows:
    """What a batch's answers rows need from its utilities, per row (queries in order, counts[b] rows each):
    the entity, its utility, rank, tie group's first rank and size. ~20 bytes a row: a worker sends this
    back, not the frame (a CN15k 3in batch has 0.84M rows, the truths': 59 MB as a frame, whose transfer
    through the pool's pipe held both the worker and the parent for ~0.3 s)."""

    counts: np.ndarray  # (B,) int64
    entity: np.ndarray  # int32
    utility: np.ndarray  # float32
    rank: np.ndarray  # int32
    rank_first: np.ndarray  # int32
    ties: np.ndarray  # int32


def ranked_rows(utility: torch.Tensor, truth_entities: list[np.ndarray], k: int = TOP_K) -> RankedRows:
    """Per query of utility (B, n_entities): its k best-ranked entities, best first, then the
    ground-truth entities outside them in ascending order, with what the rows need of the utilities:
    rank (1 + the entities better, + the equal ones of lower id), the tie group's first rank and size
    (:func:`pipeline.core.metrics.rank_and_tie_groups`, NaN counted as -inf). Only these entities are
    ranked: one sort of each row's values (no stable sort of the entities, no (B, n) rank arrays: 23 ms
    for 50 CN15k inp rows against 39), the ties' order by id found among the tied entities alone."""
    u = utility.detach()
    if u.device.type == "cuda":
        return ranked_rows_on_device(u, truth_entities, k)
    raw = (u if u.is_floating_point() else u.float()).cpu().numpy()
    u = np.where(np.isnan(raw), -np.inf, raw)  # ranked as -inf; the utility column keeps the NaN
    n = u.shape[-1]
    k = min(k, n)
    ordered = np.sort(u, axis=-1)  # ascending values: counts of better and equal by binary search
    u32 = raw.astype(np.float32)
    ents_l, rank_l, first_l, ties_l = [], [], [], []
    for b in range(u.shape[0]):
        row, srt = u[b], ordered[b]
        top = _best(row, srt, k)
        t_ent = np.asarray(truth_entities[b]).astype(np.int64)
        # the truths outside the top k, sorted (np.setdiff1d's result; sets are ~10x faster at these sizes)
        extra = sorted(set(t_ent.tolist()).difference(top.tolist()))
        ents = np.concatenate([top, np.asarray(extra, dtype=np.int64)])
        v = row[ents]
        better = n - np.searchsorted(srt, v, side="right")
        ties = n - np.searchsorted(srt, v, side="left") - better
        ents_l.append(ents)
        first_l.append(better + 1)
        ties_l.append(ties)
        rank_l.append(better + 1 + _equal_before(row, ents, v, ties > 1))
    counts = np.fromiter((len(e) for e in ents_l), dtype=np.int64, count=len(ents_l))
    ents = _joined(ents_l, np.int64)
    return RankedRows(
        counts,
        ents.astype(np.int32),
        u32[np.repeat(np.arange(len(ents_l)), counts), ents],
        _joined(rank_l, np.int32),
        _joined(first_l, np.int32),
        _joined(ties_l, np.int32),
    )



def ranked_rows_on_device(utility: torch.Tensor, truth_entities: list[np.ndarray], k: int = TOP_K) -> RankedRows:
    """:func:`ranked_rows` computed where the utilities are, for a batch at once (what a GPU answer
    uses: the (B, n) utilities never cross to the host, only the rows kept, and no loop over queries).
    The same rows, bit for bit (tests/formats/test_ranked_rows.py): a stable descending sort puts each
    row's entities by value, ties by id, so an entity's place in it is its rank; the counts of better and
    equal values come from binary searches of the sorted values."""
    import torch

    raw = utility.detach()
    raw = raw if raw.is_floating_point() else raw.float()
    u = torch.nan_to_num(raw, nan=float("-inf"), posinf=float("inf"), neginf=float("-inf"))
    bsz, n = u.shape
    k = min(k, n)
    dev = u.device
    desc, order = torch.sort(u, dim=1, descending=True, stable=True)
    place = torch.empty_like(order)
    place.scatter_(1, order, torch.arange(n, device=dev).expand(bsz, n))
    top = order[:, :k]
    # the truths outside the top k, ascending and without repeats, padded with n (sorted last)
    width = max((len(t) for t in truth_entities), default=0)
    truth = torch.full((bsz, width), n, dtype=torch.int64)
    for b, t in enumerate(truth_entities):
        truth[b, : len(t)] = torch.as_tensor(np.asarray(t, dtype=np.int64))
    truth = torch.sort(truth.to(dev), dim=1).values
    real = truth < n
    repeat = torch.zeros_like(real)
    repeat[:, 1:] = truth[:, 1:] == truth[:, :-1]
    in_top = place.gather(1, truth.clamp(max=n - 1)) < k
    extra = real & ~repeat & ~in_top
    ents = torch.cat([top, truth], dim=1)
    keep = torch.cat([torch.ones_like(top, dtype=torch.bool), extra], dim=1)
    ents_at = ents.clamp(max=n - 1)
    value = u.gather(1, ents_at)
    ascending = desc.flip(1).contiguous()
    better = n - torch.searchsorted(ascending, value, right=True)
    ties = n - torch.searchsorted(ascending, value, right=False) - better
    rank = place.gather(1, ents_at) + 1
    cols = [ents, raw.gather(1, ents_at).float(), rank, better + 1, ties]
    flat = [c[keep].cpu().numpy() for c in cols]
    counts = keep.sum(1).cpu().numpy().astype(np.int64)
    return RankedRows(
        counts,
        flat[0].astype(np.int32),
        flat[1].astype(np.float32),
        flat[2].astype(np.int32),
        flat[3].astype(np.int32),
        flat[4].astype(np.int32),
    )

def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    """The per-query arrays end to end, as dtype (empty for a batch of no queries)."""
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


def _best(row: np.ndarray, ordered: np.ndarray, k: int) -> np.ndarray:
    """The k entities of highest value in row (n,), ties by lower id, best first; ordered: row's values
    ascending. Those above the k-th value, sorted, then the lowest ids at it."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    kth = ordered[len(ordered) - k]
    above = np.flatnonzero(row > kth)
    above = above[np.lexsort((above, -row[above]))]  # value descending, then id ascending
    at = np.flatnonzero(row == kth)[: k - len(above)]
    return np.concatenate([above, at]).astype(np.int64)


def _equal_before(row: np.ndarray, ents: np.ndarray, v: np.ndarray, tied: np.ndarray) -> np.ndarray:
    """Per entity of ents (values v), how many entities of row hold the same value with a lower id (0
    where ``tied`` is False: its value is unique). Only the entities of the tied values are ordered:
    a stable sort of them by value keeps ids ascending within each value."""
    out = np.zeros(len(ents), dtype=np.int64)
    if not tied.any():
        return out
    values = np.unique(v[tied])
    if len(values) <= 8:  # a few tied values (the usual case): one pass over the row for each
        for w in values:
            at = tied & (v == w)
            out[at] = np.searchsorted(np.flatnonzero(row == w), ents[at])
        return out
    idx = np.flatnonzero(np.isin(row, values))  # every entity of those values, ids ascending
    perm = np.argsort(row[idx], kind="stable")  # by value; within a value, ids ascending
    vals = row[idx[perm]]
    place = np.empty(len(idx), dtype=np.int64)  # per position in idx: its place in its value's group
    place[perm] = np.arange(len(idx)) - np.searchsorted(vals, vals, side="left")
    out[tied] = place[np.searchsorted(idx, ents[tied])]
    return out


def _positions(ents: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of ``wanted`` sits in ``ents`` (which holds no entity twice and holds them all)."""
    order = np.argsort(ents, kind="stable")
    return order[np.searchsorted(ents, wanted, sorter=order)]


def rows_frame(query_ids: list[str], types: list[str], truth: list[tuple], ranked: RankedRows) -> pd.DataFrame:
    """The answers rows of a batch from its :func:`ranked_rows` and its queries' ids, types and truths
    (with a paper_rank column where any truth carries the paper protocol's list)."""
    counts = ranked.counts
    ends = np.cumsum(counts)
    with_paper = any(_paper(t) is not None for t in truth)
    # Per query only the truth's positions in its entity list; the frame is built once for the batch
    # (a DataFrame per query cost ~1 ms each: most of the time of answering a valid set).
    rank_l, util_l, paper_l = [], [], []
    for b in range(len(query_ids)):
        ents = ranked.entity[ends[b] - counts[b] : ends[b]].astype(np.int64)
        t_ent = np.asarray(truth[b][0]).astype(np.int64)
        t_util = np.asarray(truth[b][1], dtype=np.float64)
        truth_rank = np.zeros(len(ents), dtype=np.int32)
        truth_util = np.full(len(ents), np.nan)
        if len(t_ent):
            at = _positions(ents, t_ent)
            truth_rank[at] = np.arange(1, len(t_ent) + 1, dtype=np.int32)  # a repeated answer: the last wins
            truth_util[at] = t_util
        rank_l.append(truth_rank)
        util_l.append(truth_util)
        if with_paper:
            paper_rank = np.zeros(len(ents), dtype=np.int32)
            paper = _paper(truth[b])
            if paper is not None and len(paper):
                paper_rank[_positions(ents, paper)] = np.arange(1, len(paper) + 1, dtype=np.int32)
            paper_l.append(paper_rank)
    extra = {PAPER_RANK: np.concatenate(paper_l)} if with_paper else {}
    return pd.DataFrame(
        {
            QUERY_ID: np.repeat(np.asarray(query_ids, dtype=object), counts),
            TYPE: np.repeat(np.asarray(types, dtype=object), counts),
            ENTITY: ranked.entity.astype(np.int64),
            UTILITY: ranked.utility,
            RANK: ranked.rank.astype(np.int64),
            RANK_FIRST: ranked.rank_first.astype(np.int64),
            TIES: ranked.ties.astype(np.int64),
            TRUTH_UTILITY: np.concatenate(util_l),
            TRUTH_RANK: np.concatenate(rank_l),
            **extra,
        }
    )
