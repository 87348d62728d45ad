"""Sample a query set: walks over the store ground each query type, the engine computes the ground truth
on the observed graphs, and the usefulness filter keeps valid/test queries whose answers need the split.

Reproducible: each type draws from its own generator seeded by (seed, type index in QUERY_TYPES), and the
kept queries are the first acceptable ones in draw order, so batch sizes never change the result.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from loaders import GRAPHS
from pipeline.core.errors import PipelineError, option, unknown_name
from pipeline.core.kg import observed_graph
from pipeline.core.progress import Output, output
from pipeline.engine import Adjacency
from pipeline.formats.queryset import query_to_records
from pipeline.sampling.capacity import most_per_type
from pipeline.sampling.requirements import (
    alpha_for,
    check_alpha_mode,
    check_beta_mode,
    draw_betas,
    draw_levels,
)
from pipeline.sampling.shapes import missing_shapes
from pipeline.sampling.truth import ground_truth
from pipeline.sampling.useful import is_useful
from pipeline.sampling.walks import GRAPH_PROPERTY, StoreWalker, ground
from pipeline.softquery import QUERY_TYPES, TRAIN_TYPES, Vocabulary, to_text

ATTEMPTS_PER_QUERY = 50  # walks drawn per wanted query before giving up on a type
# ... but never fewer than this per type: a rare shape (CN15k's 2m at alpha normal, 3in at alpha zero) can
# need more than 50 walks per query (CN15k 2m at alpha normal: ~1 useful query per 90 walks), and a small
# --per-type must not make it unsampleable. A type that fills
# within the old budget draws the same walks, so existing query sets are unchanged.
MIN_ATTEMPTS = 10_000


class SamplingError(PipelineError):
    """A query type cannot be sampled as asked (too few groundable or useful queries within the budget)."""


# How a type that cannot be filled is handled (docs/sampling.md, "Types a graph cannot hold"):
# - types named by the caller: each must give per_type queries, else SamplingError saying why (a shape the
#   split's graph lacks, found before any walk; or the walk budget's counts) and what to do;
# - the split's default types (none named): a type the graph cannot hold is skipped without walking, a type
#   the budget fills only partly keeps what it found; each is noted in its report (``note``) and in a
#   warning line; SamplingError only when no type gives a query at all.


@dataclass
class TypeReport:
    """What sampling one type took: attempts and why candidates were dropped, seconds in the store
    (Cypher walks) and in the engine (ground truth), and the answer counts of the kept queries."""

    type: str
    wanted: int
    kept: int = 0
    attempts: int = 0
    dead_ends: int = 0
    degenerate: int = 0
    duplicates: int = 0
    no_answers: int = 0
    not_useful: int = 0
    note: str = ""  # why the type has fewer than `wanted` queries (default types only; empty when filled)
    store_seconds: float = 0.0
    engine_seconds: float = 0.0
    answer_counts: list[int] = field(default_factory=list, repr=False)

    @property
    def useful_share(self) -> float:
        """Kept / candidates that had answers on the split's graph (what the usefulness filter let through)."""
        judged = self.kept + self.not_useful
        return self.kept / judged if judged else float("nan")

    def summary(self) -> dict:
        d = asdict(self)
        counts = np.asarray(d.pop("answer_counts") or [0])
        d.update(
            useful_share=round(self.useful_share, 4),
            answers_median=float(np.median(counts)),
            answers_p90=float(np.percentile(counts, 90)),
            answers_max=int(counts.max()),
        )
        return d


def resolve_types(types: Sequence[str] | None, split: str) -> list[str]:
    """The query types to sample: given names (validated), else the literature's defaults: train types for
    train, all 12 for valid/test."""
    if split not in GRAPHS:
        raise unknown_name("split", split, list(GRAPHS))
    if not types:
        return list(TRAIN_TYPES) if split == "train" else list(QUERY_TYPES)
    out = []
    for t in types:
        if t not in QUERY_TYPES:
            raise unknown_name("query type", t, list(QUERY_TYPES))
        t = QUERY_TYPES.canonical(t)  # 1P is 1p: every later step keys on the registered name
        if t not in out:
            out.append(t)
    return out


def check_store_content(store, kg, dataset: str) -> None:
    """The walks (store) and the ground truth (kg) must see the same graph: the store's load marker must
    be complete and carry kg's content key."""
    from pipeline.store.ingest import content_key
    from pipeline.store.status import dataset_status

    st = dataset_status(store, dataset)
    if not st.complete:
        raise SamplingError(
            f"the store holds no complete copy of data set '{dataset}' ({st.problem()}): run `pipeline ingest {dataset}` first"
        )
    if st.key != content_key(kg):
        raise SamplingError(
            f"the store's copy of '{dataset}' differs from the loaded files (content key {st.key} != "
            f"{content_key(kg)}): run `pipeline ingest {dataset}` again"
        )


@dataclass(frozen=True, kw_only=True)
class Draw:
    """What one sampling draws: the split, the query types (None: the split's defaults, skipping the types
    the graph cannot hold), queries per type, the alpha and beta modes, the seed, and the walk budget per
    query asked for."""

    split: str
    types: Sequence[str] | None
    per_type: int
    alpha_mode: str
    beta_mode: str
    seed: int
    attempts_per_query: int = ATTEMPTS_PER_QUERY


def sample_queries(
    kg,
    store,
    *,
    alpha_table: np.ndarray,
    dataset: str | None = None,
    progress: bool | Output = True,
    **draw: Any,
) -> tuple[list[dict], list[TypeReport]]:
    """Sample per_type queries of each type on kg's split (``draw``: the fields of :class:`Draw`), walking the store's copy of the data set
    (``dataset``, default kg.name). Returns the query-set rows (see :mod:`pipeline.formats.queryset`)
    and one report per type. ``types`` named: each must fill within max(attempts_per_query * per_type,
    MIN_ATTEMPTS) walks, else SamplingError; ``types`` None (the split's defaults): the types the split's
    graph cannot hold are skipped and short types keep what they found, each with a ``note`` and a
    warning line (SamplingError only when nothing at all is found)."""
    d = Draw(**draw)
    split, types, per_type, alpha_mode, beta_mode, seed = d.split, d.types, d.per_type, d.alpha_mode, d.beta_mode, d.seed
    attempts_per_query = d.attempts_per_query
    named = bool(types)
    types = resolve_types(types, split)
    check_alpha_mode(alpha_mode)
    check_beta_mode(beta_mode)
    if per_type < 1:
        raise SamplingError(f"{option('per_type', per_type)}: must be at least 1")
    out = output(progress)
    dataset = dataset or kg.name
    # the shapes the split's graph lacks, before any walk: milliseconds, against seconds of dead ends
    missing = missing_shapes([QUERY_TYPES[name] for name in types], kg.graph(split), kg.n_entities)
    if named and missing:
        raise SamplingError(_cannot_exist(missing, split, dataset))
    # more queries than the graph can hold: refused at once when the types are named (they must all fill);
    # otherwise each type's walks stop at what its graph can hold (pipeline.sampling.capacity)
    most = most_per_type([t for t in types if t not in missing], kg.graph("test"), kg.n_entities,
                         check_alpha_mode(alpha_mode), check_beta_mode(beta_mode))
    over = {t: m for t, m in most.items() if per_type > m}
    if named and over:
        raise SamplingError(too_many_line(option("per_type", per_type), over, split, dataset, alpha_mode, beta_mode))
    train_adj = Adjacency.from_graph(observed_graph(kg, "train"))
    split_adj = train_adj if split == "train" else Adjacency.from_graph(observed_graph(kg, split))
    check_store_content(store, kg, dataset)
    walker = StoreWalker(store, dataset, split)
    pool = walker.answer_pool()
    if len(pool) == 0:
        raise SamplingError(
            f"data set '{dataset}' has no {split} facts ({GRAPH_PROPERTY[split]} is never set)"
        )
    rows: list[dict] = []
    reports: list[TypeReport] = []
    type_index = {name: i for i, name in enumerate(QUERY_TYPES)}
    with out.bar(total=per_type * (len(types) - len(missing)), desc=f"sample {split}", unit="query") as bar:
        job = _Job(walker, pool, per_type, split, train_adj, split_adj, alpha_mode, beta_mode, alpha_table,
                   attempts_per_query, bar, strict=named, vocab=Vocabulary.from_kg(kg), most=most)
        for name in types:
            if name in missing:
                report = TypeReport(name, per_type, note=f"skipped: {name} needs {missing[name]}, which the "
                                                         f"{split} graph has not")
                reports.append(report)
                continue
            report, kept = _sample_type(job, name, np.random.default_rng([int(seed), type_index[name]]))
            reports.append(report)
            for i, row in enumerate(kept):
                row.update(id=f"{split}-{name}-{i:05d}", type=name, seed=int(seed))
                rows.append(row)
    if not rows:
        raise SamplingError(
            f"no query of any type on the {split} graph of '{dataset}': "
            + "; ".join(f"{r.type} {r.note}" for r in reports)
        )
    for r in reports:
        if r.note:
            out.warn(f"sample {split}: query type {r.type}: {r.note}")
    return rows, reports


def too_many_line(asked: str, over: dict[str, int], split: str, dataset: str, alpha: str, beta: str) -> str:
    """The one line for a sample size beyond what the graph can hold (``asked``: the option as given)."""
    name = min(over, key=over.__getitem__)
    return (f"{asked}: the {split} graph of '{dataset}' holds at most {over[name]:,} distinct {name} queries "
            f"(alpha {alpha}, beta {beta}: pipeline.sampling.capacity); ask for at most that many, or fewer types")


def _cannot_exist(missing: dict[str, str], split: str, dataset: str) -> str:
    """The one line for named types whose shape the split's graph lacks (grouped by what they need)."""
    by_need: dict[str, list[str]] = {}
    for name, why in missing.items():
        by_need.setdefault(why, []).append(name)
    needs = "; ".join(f"{' and '.join(names)} need{'s' if len(names) == 1 else ''} {why}"
                      for why, names in by_need.items())
    them = "it" if len(missing) == 1 else "them"
    return (f"query type{'s' if len(missing) > 1 else ''} {', '.join(missing)} cannot exist on the {split} graph "
            f"of '{dataset}': {needs}, which it has not; leave {them} out of {option('types')} (without "
            f"{option('types')}, the split's default types are sampled and those the graph cannot hold are "
            "skipped)")


@dataclass
class _Job:
    """What sampling every type of one split shares: the store walker and its answer pool, the two observed
    graphs (easy = train, hard = the split's), the soft-requirement modes and the progress bar."""

    walker: StoreWalker
    pool: np.ndarray
    per_type: int
    split: str
    train_adj: Adjacency
    split_adj: Adjacency
    alpha_mode: str
    beta_mode: str
    alpha_table: np.ndarray
    attempts_per_query: int
    bar: Any
    strict: bool = True  # every type must fill (the caller named the types)
    vocab: Vocabulary | None = None  # names for each query's named_text
    most: dict[str, int] | None = None  # how many distinct queries of each type the graph can hold at most


def _sample_type(job: _Job, name: str, rng: np.random.Generator) -> tuple[TypeReport, list[dict]]:
    walker, pool, per_type, split = job.walker, job.pool, job.per_type, job.split
    train_adj, split_adj, alpha_table, bar = job.train_adj, job.split_adj, job.alpha_table, job.bar
    alpha_mode, beta_mode, attempts_per_query = job.alpha_mode, job.beta_mode, job.attempts_per_query
    qt = QUERY_TYPES[name]
    report = TypeReport(name, per_type)
    # walks for at most the queries the graph can hold: asking for more draws duplicates forever
    budget = max(attempts_per_query * min(per_type, (job.most or {}).get(name, per_type)), MIN_ATTEMPTS)
    seen: set[str] = set()
    kept: list[dict] = []
    store0 = walker.stats.store_seconds
    dead0, degen0 = walker.stats.dead_ends, walker.stats.degenerate
    while len(kept) < per_type and report.attempts < budget:
        # Draw a chunk of candidates sized by the acceptance rate so far; filtering consumes no random
        # numbers, so the result does not depend on the chunk size.
        rate = max(len(kept) / report.attempts, 0.05) if report.attempts else 1.0
        want = min(budget - report.attempts, max(16, math.ceil(1.2 * (per_type - len(kept)) / rate)), 4096)
        batch = []
        for _ in range(want):
            report.attempts += 1
            answer = int(pool[int(rng.integers(len(pool)))])
            g = ground(qt, walker, answer, rng)
            if g is None:
                continue
            levels = draw_levels(rng, alpha_mode, len(g.relations))
            alphas = [alpha_for(alpha_table, [r], lv)[0] for r, lv in zip(g.relations, levels, strict=True)]
            # the query's level; per atom (squk) the atoms' levels in atom order, comma-separated
            level = ",".join(levels) if alpha_mode == "squk" else levels[0]
            betas = draw_betas(rng, beta_mode, qt.n_atoms)
            query = qt.build(g.relations, g.anchors, alphas, betas)
            text = to_text(query)
            if text in seen:
                report.duplicates += 1
                continue
            seen.add(text)
            batch.append((query, text, level))
        t0 = time.perf_counter()
        queries = [q for q, _, _ in batch]
        easy = ground_truth(queries, train_adj)
        # valid and test sets also keep the list the SQUK generator would have written (the paper protocol's
        # truth); train sets only feed calibration L
        hard = easy if split_adj is train_adj else ground_truth(queries, split_adj, paper=True)
        report.engine_seconds += time.perf_counter() - t0
        for (query, text, level), (e_ids, e_vals, _, _), (h_ids, h_vals, h_all, h_paper) in zip(
            batch, easy, hard, strict=True
        ):
            if len(kept) == per_type:
                break
            if not h_ids:
                report.no_answers += 1
                continue
            if split != "train" and not is_useful(e_ids, e_vals, h_ids, h_vals):
                report.not_useful += 1
                continue
            kept.append(
                {
                    "text": text,
                    **({"named_text": to_text(query, job.vocab)} if job.vocab is not None else {}),
                    "atoms": query_to_records(query),
                    "alpha_level": level,
                    "answers_easy": e_ids,
                    "utilities_easy": e_vals,
                    "answers_hard": h_ids,
                    "utilities_hard": h_vals,
                    **({"answers_paper": h_paper} if h_paper is not None else {}),
                }
            )
            report.answer_counts.append(h_all)
            bar.update(1)
    report.kept = len(kept)
    report.store_seconds = walker.stats.store_seconds - store0
    report.dead_ends = walker.stats.dead_ends - dead0
    report.degenerate = walker.stats.degenerate - degen0
    if report.kept < per_type:
        found = (
            f"only {report.kept} of {per_type} {'useful ' if split != 'train' else ''}queries after "
            f"{report.attempts} walks on the {split} graph ({report.dead_ends} dead ends, {report.degenerate} "
            f"degenerate, {report.duplicates} duplicates, {report.no_answers} without answers, {report.not_useful} "
            "not useful)"
        )
        if job.strict:
            raise SamplingError(
                f"query type {name}: {found}; ask for fewer with {option('per_type')}, or leave "
                f"{option('types')} unset to keep what the default types find"
            )
        report.note = found
    return report, kept
