"""Link prediction of a confidence model: the filtered rank of each fact's tail (and head) among all entities,
computed the way the unKR benchmark computes the figures of its results table, so a backbone here can be
held against the published uncertain-KG embeddings.

unKR's protocol (repository seucoin/unKR at c252373faa0e20562f4ea1784718c72442cdea55; its results table,
``docs/source/result.md``, last changed in 803063771b569acbbcf7c355f8551177c2ed25ea, when the code below
was the same but for comments):

- **Ranked triples**: every row of the split's file, duplicate rows included, whose confidence is at least
  ``confidence_filter`` (``src/unKR/eval_task/link_prediction.py``, ``tail_predict_filter``: the mask
  ``positive_sample[:, -1] >= confidence``). Every ``config/*/*.yaml`` sets ``confidence_filter: 0``, so the
  table's "All test data" ranks every row; its "Only high-confidence test data" takes 0.7 (README: "we choose
  high-confidence (>0.7) triples", compared with ``>=``): :data:`HIGH_CONFIDENCE`. unKR's CN15k ``test.tsv``
  holds no sampled negatives (19,293 positive rows: the 17,077 of the file here plus 2,216 rows of triples
  that are train or valid facts here); a negative is not a fact, so here CN15k's 17,077 negatives are
  neither ranked nor filtered (``KGData.rows`` holds the positives only).
- **Direction**: tails only. Every model's ``test_step`` sets ``prediction = "tail"``
  (``src/unKR/lit_model/UKGELitModel.py`` and the other lit models); ``link_predict(..., "all")`` would
  concatenate the tail ranks and the head ranks and average over both, which is ``both`` here.
- **Candidates and scores**: every entity, scored by the model's predicted confidence (``get_score`` of
  ``src/unKR/model/UKGModel/UKGE.py`` returns ``sigmoid(w <h, r, t> + b)``); here
  :meth:`~pipeline.models.base.ConfidenceModel.score_block`.
- **Filter**: ``UKGETestSampler`` (``src/unKR/data/Sampler.py``) marks, for a row (h, r, t), every t' with
  (h, r, t') among ``all_true_triples``, the rows of train, valid and test at any confidence
  (``src/unKR/data/DataPreprocess.py``); ``calc_ranks`` gives them the score -1e7 and puts the row's own
  tail back. Here: every other answer of the query in the test graph (train ∪ valid ∪ test facts). The
  valid split is ranked with the same filter (unKR's ``validation_step`` uses the same sampler). Raw ranks
  (``calc_ranks_raw``) filter nothing.
- **Rank and ties**: ``1 + argsort(argsort(scores, descending=True))[target]``, the target's position in a
  descending sort. ``torch.argsort`` is not stable by default: on a GPU, rows of more than 4,096 entries
  (CN15k, PPI5k; PyTorch ``aten/src/ATen/native/cuda/Sort.h``, ``should_use_small_sort``) go through its
  stable sort, so a tie goes to the smaller entity id; on a CPU the order of ties is unspecified. Here:
  the stable order, ``1 + #(scored above) + #(tied with a smaller id)`` (:attr:`RankCounts.ranks`),
  deterministic. unKR numbers entities by first appearance in its train, valid and test files, this
  project by its id map, so a tie-broken rank matches unKR's only where the target is not tied: each result
  says how often it is (``tied``) and gives beside the tie-broken figures their expectation over a random
  order of the tied candidates (``*_expected``: reads no entity id, design section 1's convention).
- **Averages**: sums over the batches divided by the number of ranked rows (``BaseLitModel.get_results``):
  MRR = mean of 1/rank, MR = mean rank, hits@k = share of ranks <= k; WMRR and WMR weight each row by its
  confidence. unKR's MSE/MAE are averaged over the same rows (``conf_predict`` in the same ``test_step``):
  ``errors`` here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from pipeline.core.errors import PipelineError
from pipeline.core.progress import Output, output
from pipeline.models.base import ConfidenceModel

# unKR's "Only high-confidence test data": rows with confidence >= 0.7 (its README)
HIGH_CONFIDENCE = 0.7
HITS_AT = (1, 3, 10)
DIRECTIONS = ("tail", "head")
# ranked rows held at once (scores and masks of DEFAULT_BATCH x n_entities); halved on out-of-memory
DEFAULT_BATCH = 1024
PROTOCOL = (
    "unKR (seucoin/unKR c252373): every row of the split (high_confidence: those >= 0.7); candidates all "
    "entities scored by predicted confidence; filtered: other answers in train+valid+test removed; ties by "
    "entity id (stable sort), *_expected over random tie orders; tail = unKR's tables, both = tail and head ranks"
)


@dataclass(frozen=True)
class RankCounts:
    """Where each ranked target stands among its candidates (each (n,) int64): ``above`` candidates scored
    strictly higher, ``tied`` candidates scored exactly the same (the target itself not counted),
    ``tied_before`` those of them with a smaller entity id."""

    above: np.ndarray
    tied: np.ndarray
    tied_before: np.ndarray

    @property
    def ranks(self) -> np.ndarray:
        """unKR's rank: the target's position in a stable descending sort (ties to the smaller id), 1 = best."""
        return 1 + self.above + self.tied_before

    def __len__(self) -> int:
        return len(self.above)

    def take(self, index: np.ndarray) -> RankCounts:
        return RankCounts(self.above[index], self.tied[index], self.tied_before[index])

    @staticmethod
    def concat(parts: list[RankCounts]) -> RankCounts:
        return RankCounts(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("above", "tied", "tied_before")))


def rank_counts(scores: Tensor, targets: Tensor, exclude: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Counts of :class:`RankCounts` for a batch of queries: scores (B, N) float (every candidate's score),
    targets (B,) int64 (the true answer's column), exclude: the filtered-out cells as (rows, cols) int64
    index tensors, or None (raw ranks); a cell on the target itself is ignored. Returns (above, tied,
    tied_before), each (B,) int64."""
    target = scores.gather(1, targets.unsqueeze(1))
    # a bool row summed as uint8 into int32 takes half the time of the default int64 sum
    above = (scores > target).view(torch.uint8).sum(1, dtype=torch.int32).long()
    eq = scores == target
    tied = eq.view(torch.uint8).sum(1, dtype=torch.int32).long() - 1  # the target ties with itself
    before = torch.zeros_like(tied)
    rows = torch.nonzero(tied > 0).squeeze(1)  # ties are rare in a trained model: only their rows
    if len(rows):
        cols = torch.arange(scores.shape[1], device=scores.device)
        before[rows] = (eq[rows] & (cols < targets[rows].unsqueeze(1))).sum(1)
    counts = (above, tied, before)
    return counts if exclude is None else without(counts, scores, targets, exclude)


def without(
    counts: tuple[Tensor, Tensor, Tensor], scores: Tensor, targets: Tensor, exclude: tuple[Tensor, Tensor]
) -> tuple[Tensor, Tensor, Tensor]:
    """Raw counts of :func:`rank_counts` less the excluded cells' part: the filtered counts. exclude:
    (rows, cols) int64 index tensors of the filtered-out cells (few per query; a cell on the target is
    ignored). Equals unKR's scoring them -1e7, below any confidence: they never outrank nor tie the target."""
    above, tied, before = counts
    r, c = exclude
    other = c != targets[r]
    r, c = r[other], c[other]
    value, t = scores[r, c], scores.gather(1, targets.unsqueeze(1)).squeeze(1)[r]
    same = value == t
    # index_put_ with accumulate has a deterministic form on CUDA (training runs with deterministic algorithms)
    less = lambda x, part: x - torch.zeros_like(x).index_put_((r,), part.long(), accumulate=True)  # noqa: E731
    return less(above, value > t), less(tied, same), less(before, same & (c < targets[r]))


def rank_metrics(counts: RankCounts, weights: np.ndarray | None = None, hits_at: tuple[int, ...] = HITS_AT) -> dict[str, float]:
    """unKR's averages of the ranks (``mrr``, ``mr``, ``hits@k``; ``wmrr``/``wmr`` weighted by ``weights``,
    the rows' confidences, when given), ``tied``: the share of targets tied with at least one candidate,
    and the expectations over a uniformly random order of each target's tied candidates (``mrr_expected``,
    ``mr_expected``, ``hits@k_expected``: the target's position uniform over above+1 .. above+tied+1).
    NaN for every figure when nothing is ranked."""
    names = ["mrr", "mr", *(f"hits@{k}" for k in hits_at), "tied", "mrr_expected", "mr_expected",
             *(f"hits@{k}_expected" for k in hits_at)] + (["wmrr", "wmr"] if weights is not None else [])
    if len(counts) == 0:
        return dict.fromkeys(names, float("nan"))
    rank = counts.ranks.astype(np.float64)
    above, tied = counts.above.astype(np.int64), counts.tied.astype(np.int64)
    out: dict[str, float] = {"mrr": float(np.mean(1.0 / rank)), "mr": float(np.mean(rank))}
    out.update({f"hits@{k}": float(np.mean(rank <= k)) for k in hits_at})
    out["tied"] = float(np.mean(tied > 0))
    # E[1/position] over positions above+1 .. above+tied+1 = (H(above+tied+1) - H(above)) / (tied+1)
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, int((above + tied).max()) + 2))])
    out["mrr_expected"] = float(np.mean((harmonic[above + tied + 1] - harmonic[above]) / (tied + 1)))
    out["mr_expected"] = float(np.mean(above + 1 + tied / 2))
    out.update({f"hits@{k}_expected": float(np.mean(np.clip(k - above, 0, tied + 1) / (tied + 1))) for k in hits_at})
    if weights is not None:
        w = np.asarray(weights, np.float64)
        out["wmrr"] = float(np.sum(w / rank) / np.sum(w))
        out["wmr"] = float(np.sum(w * rank) / np.sum(w))
    return out


@dataclass(frozen=True)
class KnownAnswers:
    """The known answers of every (anchor, relation) query of a graph, grouped for lookups: ``keys`` (K,)
    sorted query keys ``relation * n_entities + anchor``, ``starts`` (K+1,) offsets into ``answers``."""

    keys: np.ndarray
    starts: np.ndarray
    answers: np.ndarray
    n_entities: int

    @classmethod
    def of(cls, anchors: np.ndarray, relations: np.ndarray, answers: np.ndarray, n_entities: int) -> KnownAnswers:
        key = np.asarray(relations, np.int64) * n_entities + np.asarray(anchors, np.int64)
        order = np.argsort(key, kind="stable")
        keys, starts = np.unique(key[order], return_index=True)
        return cls(keys, np.append(starts, len(key)), np.asarray(answers, np.int64)[order], int(n_entities))

    def pairs(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, answer) for every known answer of each query key: row indexes ``keys``."""
        at = np.clip(np.searchsorted(self.keys, keys), 0, max(0, len(self.keys) - 1))
        found = (self.keys[at] == keys) if len(self.keys) else np.zeros(len(keys), bool)
        lo = np.where(found, self.starts[at], 0)
        size = np.where(found, self.starts[np.minimum(at + 1, len(self.starts) - 1)] - lo, 0)
        rows = np.repeat(np.arange(len(keys)), size)
        offset = np.arange(len(rows)) - np.repeat(np.cumsum(size) - size, size)
        return rows, self.answers[np.repeat(lo, size) + offset]


# scores of every candidate for a block of queries of one relation: (anchors (B,) int64, r) -> (B, N)
ScoreFn = Callable[[Tensor, int], Tensor]


def scorer(model: ConfidenceModel, direction: str) -> ScoreFn:
    """The model's scores of every entity as the missing ``direction`` ("tail": (h, r, ?), "head": (?, r, t))
    for a block of anchors, through its block scoring (a matmul for UKGE), in blocks of its
    :meth:`~pipeline.models.base.ConfidenceModel.block_rows` anchors."""
    n = model.n_entities
    step = model.block_rows(n)

    @torch.no_grad()
    def score(anchors: Tensor, r: int) -> Tensor:
        every = torch.arange(n, device=anchors.device)
        parts = []
        for i in range(0, len(anchors), step):
            a = anchors[i : i + step]
            parts.append(model.score_block(a, r, every) if direction == "tail" else model.score_block(every, r, a).T)
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    return score


def query_ranks(
    score: ScoreFn, queries: np.ndarray, known: KnownAnswers, device: str | torch.device = "cpu",
    batch_size: int = DEFAULT_BATCH, step: Callable[[int], None] | None = None,
) -> tuple[RankCounts, RankCounts]:
    """Filtered and raw :class:`RankCounts` of each query's true answer. queries (n, 3) int64 rows
    (anchor, relation, answer); ``known``: the answers filtered out (the query's own answer excepted);
    ``score(anchors, r)``: (B, N) scores of every candidate. Queries are grouped by relation and ranked
    ``batch_size`` at a time, each distinct anchor of a batch scored once; the batch halves on
    out-of-memory. ``step(k)`` is called after each k ranked queries (a progress bar). PipelineError when
    a score is NaN (no rank is defined)."""
    n = len(queries)
    order = np.lexsort((queries[:, 0], queries[:, 1]))  # by relation, then anchor: one block per relation
    q = queries[order]
    parts: list[tuple[np.ndarray, ...]] = []
    nan = torch.zeros((), dtype=torch.bool, device=device)
    start = 0
    while start < n:
        r = int(q[start, 1])
        stop = min(n, start + batch_size, int(np.searchsorted(q[:, 1], r, side="right")))
        try:
            counts, bad = _batch_counts(score, q[start:stop], known, device)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if batch_size == 1 or not _is_oom(exc):
                raise
            batch_size = max(1, batch_size // 2)
            continue
        nan |= bad
        parts.append(counts)
        if step is not None:
            step(stop - start)
        start = stop
    if bool(nan):  # read once, at the end: no host synchronisation per batch
        raise PipelineError("the model scores NaN for some (h, r, t): its link-prediction ranks are undefined")
    back = np.empty(n, np.int64)
    back[order] = np.arange(n)
    cols = [np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64) for i in range(6)]
    filtered = RankCounts(cols[0][back], cols[1][back], cols[2][back])
    raw = RankCounts(cols[3][back], cols[4][back], cols[5][back])
    return filtered, raw


def _batch_counts(score: ScoreFn, q: np.ndarray, known: KnownAnswers, device: str | torch.device) -> tuple[tuple[np.ndarray, ...], Tensor]:
    """The six count arrays (filtered above/tied/before, raw above/tied/before) of one batch of queries of
    one relation, and whether any score was NaN (a 0-d bool tensor on the device)."""
    r = int(q[0, 1])
    anchors, inverse = np.unique(q[:, 0], return_inverse=True)
    per_anchor = score(torch.as_tensor(anchors, device=device), r)
    # one row per query; the queries are sorted by anchor, so distinct anchors are already one row each
    scores = per_anchor if len(anchors) == len(q) else per_anchor[torch.as_tensor(inverse, device=device)]
    targets = torch.as_tensor(q[:, 2], device=device)
    rows, cols = known.pairs(r * known.n_entities + q[:, 0])
    exclude = (torch.as_tensor(rows, device=device), torch.as_tensor(cols, device=device))
    raw = rank_counts(scores, targets)
    filtered = without(raw, scores, targets, exclude)
    # confidences are finite, so their sum is NaN exactly when one is: one pass, no bool tensor
    return tuple(x.cpu().numpy() for x in (*filtered, *raw)), per_anchor.sum().isnan()


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text or "can't allocate" in text


def _split_rows(kg: Any, split: str) -> pd.DataFrame:
    """Every row of a split's file as read (duplicates kept; CN15k's negatives are not rows): h, r, t, conf."""
    rows = kg.rows[kg.rows["split"] == split]
    return rows[["h", "r", "t", "conf"]].reset_index(drop=True)


def _queries(facts: pd.DataFrame, direction: str) -> np.ndarray:
    """(anchor, relation, answer) rows of the facts for one direction."""
    cols = ["h", "r", "t"] if direction == "tail" else ["t", "r", "h"]
    return facts[cols].to_numpy(np.int64)


def _known(kg: Any, direction: str) -> KnownAnswers:
    g = kg.graph("test")  # train ∪ valid ∪ test facts: unKR's all_true_triples
    q = _queries(g, direction)
    return KnownAnswers.of(q[:, 0], q[:, 1], q[:, 2], kg.n_entities)


# the default of training: rank when the estimate is at most this (BEUrRE on a CPU is hours: skipped)
AUTO_SECONDS = 600.0
PROBE_ANCHORS = 8


def estimated_seconds(model: ConfidenceModel, kg: Any, splits: tuple[str, ...] = ("val", "test")) -> float:
    """A forecast of :func:`link_prediction`'s time on ``splits``: one block of :data:`PROBE_ANCHORS`
    anchors scored against every entity (after a warm-up call), times the distinct (relation, anchor)
    pairs the splits' rows score in both directions. The probe costs two blocks (seconds for BEUrRE on a
    CPU, microseconds for UKGE)."""
    n_anchor = 0
    for split in splits:
        facts = _split_rows(kg, split)
        for direction in DIRECTIONS:
            q = _queries(facts, direction)
            n_anchor += len(np.unique(q[:, 1] * kg.n_entities + q[:, 0])) if len(q) else 0
    if n_anchor == 0:
        return 0.0
    was_training = model.training
    model.eval()
    anchors = torch.arange(min(PROBE_ANCHORS, model.n_entities), device=model.device)
    score = scorer(model, "tail")
    score(anchors[:1], 0)  # warm-up: first-call allocation and dispatch
    t0 = time.perf_counter()
    score(anchors, 0).sum().item()  # .item(): on a GPU, wait for the kernels
    per_anchor = (time.perf_counter() - t0) / len(anchors)
    model.train(was_training)
    return per_anchor * n_anchor


def link_prediction(
    model: ConfidenceModel, kg: Any, split: str = "test", *, rows: pd.DataFrame | None = None,
    batch_size: int | None = None, progress: bool | Output = False, step: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The link-prediction figures of ``model`` on a split ("val" or "test") of ``kg`` (a ``loaders.KGData``),
    as unKR computes them (module docstring): for each direction ("tail": unKR's tables; "head"; "both":
    the tail and head ranks together, unKR's ``prediction="all"``) and setting ("filtered", "raw"), the
    figures of :func:`rank_metrics`; the same over the rows with confidence >= :data:`HIGH_CONFIDENCE`
    (``high_confidence``); ``errors``: MSE and MAE of the predicted confidences over the ranked rows (unKR's
    averages, duplicate rows included); ``rows``, ``seconds``. Runs on the model's device, ``batch_size``
    ranked rows at a time (default :data:`DEFAULT_BATCH`), with a progress bar when ``progress``. ``rows``
    (columns h, r, t, conf) ranks those rows instead of the split's (e.g. another copy of the test file);
    the filter stays the test graph. ``step(k)``: called after each k ranked queries, in place of a bar of
    its own (a caller ranking several splits under one bar)."""
    t0 = time.perf_counter()
    facts = _split_rows(kg, split) if rows is None else rows[["h", "r", "t", "conf"]].reset_index(drop=True)
    device = model.device
    was_training = model.training
    model.eval()
    counts: dict[str, tuple[RankCounts, RankCounts]] = {}
    own = nullcontext(None) if step is not None else output(progress).bar(
        total=len(DIRECTIONS) * len(facts), desc=f"link prediction ({split})", unit="query")
    with own as bar:
        for direction in DIRECTIONS:
            counts[direction] = query_ranks(
                scorer(model, direction), _queries(facts, direction), _known(kg, direction), device,
                batch_size or DEFAULT_BATCH, step if step is not None else bar.update,
            )
    model.train(was_training)
    conf = facts["conf"].to_numpy(np.float64)
    high = np.flatnonzero(conf >= HIGH_CONFIDENCE)
    as_t = lambda c: torch.tensor(facts[c].to_numpy(np.int64))  # noqa: E731
    err = (model.score(as_t("h"), as_t("r"), as_t("t")).double().cpu().numpy() - conf) if len(facts) else np.zeros(0)
    return {
        "protocol": PROTOCOL,
        "rows": len(facts),
        **_figures(counts, conf, slice(None)),
        "high_confidence": {"min_confidence": HIGH_CONFIDENCE, "rows": len(high), **_figures(counts, conf, high)},
        "errors": {"mse": float(np.mean(err**2)) if len(err) else float("nan"),
                   "mae": float(np.mean(np.abs(err))) if len(err) else float("nan"), "n": len(err)},
        "seconds": time.perf_counter() - t0,
    }


def _figures(counts: dict[str, tuple[RankCounts, RankCounts]], conf: np.ndarray, rows: Any) -> dict[str, Any]:
    """{direction: {setting: rank_metrics}} over the given rows, "both" = tail and head counts together."""
    out: dict[str, Any] = {}
    for direction in (*DIRECTIONS, "both"):
        ways = DIRECTIONS if direction == "both" else (direction,)
        out[direction] = {
            setting: rank_metrics(RankCounts.concat([counts[d][i].take(np.arange(len(conf))[rows]) for d in ways]),
                                  np.concatenate([conf[rows]] * len(ways)))
            for i, setting in enumerate(("filtered", "raw"))
        }
    return out


def summary_figures(result: dict[str, Any]) -> dict[str, Any]:
    """One split's :func:`link_prediction` result flattened under the results pages' names: the tails'
    filtered ``test_mrr``, ``test_hits@1/3/10``, ``test_mr``, ``test_tied``, ``test_mrr_expected``, their raw
    MRR, tails and heads together (``*_both``), the ranked rows and the MSE/MAE over them (``*_rows``)."""
    tail, both = result["tail"]["filtered"], result["both"]["filtered"]
    return {
        "link_prediction": "unKR: every test row's tail among all entities, filtered by train+valid+test, ties by id",
        "test_ranked": result["rows"],
        **{f"test_{k}": tail[k] for k in ("mrr", "hits@1", "hits@3", "hits@10", "mr")},
        "test_mrr_raw": result["tail"]["raw"]["mrr"],
        "test_tied": tail["tied"],
        "test_mrr_expected": tail["mrr_expected"],
        "test_mrr_both": both["mrr"],
        "test_hits@10_both": both["hits@10"],
        "test_mse_rows": result["errors"]["mse"],
        "test_mae_rows": result["errors"]["mae"],
    }


def iter_settings(result: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, float]]]:
    """(direction, setting, figures) of one split's :func:`link_prediction` result, tail first."""
    for direction in ("tail", "head", "both"):
        for setting in ("filtered", "raw"):
            if direction in result and setting in result[direction]:
                yield direction, setting, result[direction][setting]
