"""Every stage's options, each declared once (:func:`pipeline.core.options.setting`): the command line's
options (``pipeline answer|export|sample|train|ingest --help``), the Python API's keywords (``help(pl.answer)``)
and the checks both doors pass through come from these fields. To add an option to a stage, add a field
here and read it in the stage; nothing else spells it.

No torch, pandas or stage code is imported here: the command line builds its options from this module
when it starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.options import check, setting
from pipeline.core.progress import Output, output
from pipeline.sampling import MAX_PER_TYPE

if TYPE_CHECKING:
    from pipeline.executors.base import Executor
    from pipeline.formats.queryset import QuerySet

STORE_HELP = "Graph store URI: embedded (default: PIPELINE_STORE or the embedded server) | falkordb://h:p[/graph] | bolt://h:p | neo4j://h:p."
SOURCE_HELP = "Local folder holding the data set's files (default: the mirror PIPELINE_DATA, else a download)."
DEVICE_HELP = "cpu | cuda | cuda:N (default: cuda when present)."


@dataclass(frozen=True, kw_only=True)
class Shown:
    """What a stage shows while it runs (:mod:`pipeline.core.progress`): bars, a one-line summary per stage,
    or nothing but warnings. The Python API's keywords; the command line prints its own tables."""

    progress: bool | Output = setting(True, kind="any", cli=False,
                                      help="Show progress bars (False: only a one-line summary of each stage).")
    quiet: bool = setting(False, cli=False, help="Show no bars and no summaries (warnings and errors only).")

    @property
    def output(self) -> Output:
        """The stage's :class:`~pipeline.core.progress.Output`."""
        return output(self.progress, self.quiet)


def check_workers(executor: Any, address: str | None, workers: int | None) -> None:
    """``workers`` of the executor an answering or export option names, bounded as the executor will bound
    it (:mod:`pipeline.core.limits`), checked when the options are made: before any file is read."""
    if workers is None or not isinstance(executor, str):
        return  # an open executor was bounded when it was built
    from pipeline.core import limits
    from pipeline.executors import EXECUTORS

    limits.check_count("workers", workers, "compute" if EXECUTORS[executor].bounded_here and not address else None)


@dataclass(frozen=True, kw_only=True)
class AnswerOptions(Shown):
    """How the answering stage (:func:`pipeline.stages.answer.answer_queries`) answers, besides the method:
    where the answers go, the query sets calibration chooses and fits on, explanations, write-back, and where
    the batches run (the stage opens and closes the executor)."""

    out: str | Path | None = setting(None, help="Answers directory (default: answers/ beside the query set).")
    # needs: the method's calibration, passed as context by the answering stage (pipeline.stages.answer)
    valid_queries: QuerySet | str | Path | None = setting(None, kind="path", needs=(("calibration", ("D", "L", "D+L")),),
                                 help="Valid query set (D chooses delta there, L selects there); a path or a query set.")
    train_queries: QuerySet | str | Path | None = setting(None, kind="path", needs=(("calibration", ("L", "D+L")),),
                                 help="Train query set (L is fitted there, alpha = 0); a path or a query set.")
    allow_split_mismatch: bool = setting(False, help="Accept a valid/train query set of another split (recorded).")
    explain: int = setting(0, low=0, flag="--explain",
                           help="SRC: write the witnesses of each query's top K answers beside the answers (and names in them).")
    write_back: bool = setting(False, help="Write the top answers into the graph store as (:Query)-[:ANSWER]->(:Entity).")
    store: str | None = setting(None, help=STORE_HELP)
    executor: str | Executor = setting("processes", registry="executors", instance_of="map_on_actors",
                                       help="Where the batches run (`pipeline ls executors`): processes = every core of this "
                                            "machine (--workers 1: this process), local = this process, ray = a Ray cluster; "
                                            "in Python also an open executor (the caller closes it).")
    address: str | None = setting(None, help="Ray: an existing cluster (ray://host:10001 or auto); default: start a local one.")
    workers: int | None = setting(None, low=1,
                                  help="processes: worker processes (default: every core; 1 = this process; at most 4 per core). "
                                       "Ray: tasks at once.")
    # not an option: the command line's own process keeps the heap it frees (never a notebook's)
    keep_heap: bool = setting(False, cli=False, api=False, help="Answering in this process: keep freed heap (glibc).")

    def __post_init__(self) -> None:
        check(self)
        check_workers(self.executor, self.address, self.workers)  # at the door, before any file is read


@dataclass(frozen=True, kw_only=True)
class ExportOptions(Shown):
    """How ``pipeline export`` writes a run's neural adjacency (:func:`pipeline.stages.export.export_adjacency`)."""

    threshold: float = setting(0.1, low=0.0, high=1.0, help="Keep facts with predicted confidence >= T (in (0, 1]).")
    top_k: int | None = setting(None, low=1, help="Keep only each (head, relation)'s K best-scored tails that pass the threshold.")
    out: str | Path | None = setting(None, help="Export directory (default PIPELINE_HOME/exports/DATASET-HASH-tT).")
    device: str | None = setting(None, kind="device", help=DEVICE_HELP)
    allow_dense: bool = setting(False, help="Keep the export even when its size exceeds its budget (a quarter of the memory "
                                            "available, half the free disk; refused otherwise).")
    overwrite: bool = setting(False, help="Replace an export of another run, model or threshold in the out folder.")
    executor: str = setting("local", registry="executors", help="Where the scoring runs (`pipeline ls executors`).")
    address: str | None = setting(None, help="Ray: an existing cluster (ray://host:10001 or auto); default: start a local one.")
    workers: int | None = setting(None, low=1, help="Ray: tasks at once (default: the cluster's CPUs; at most 4 per CPU).")
    shards: str | None = setting(None, help="Where the (relation, head block) shards go (folder or URI such as "
                                            "s3://b/p): non-local executors (default OUT.shards), or this process "
                                            "when given (a resumable export).")
    shard_heads: int | None = setting(None, low=1, needs=(("shards", ()), ("executor", ("processes", "ray"))),
                                      help="Non-local executors (or --shards): heads per shard task (whole scoring "
                                           "blocks; default one block).")
    # not on the command line: the scoring block (tests), box pruning (pipeline.models.box_bounds), the size guard
    block_rows: int | None = setting(None, low=1, cli=False, api=False, help="Heads scored per block.")
    prune: bool = setting(True, cli=False, api=False, help="Box models: skip block pairs bounded below the threshold.")
    prepare_seconds: float | None = setting(60.0, low=0.0,  # export_prepare.PREPARE_SECONDS
                                            help="Then build what the first answer needs (the engine index, the multi-edge "
                                                 "relation pairs) for up to this many seconds (0: the index only).")
    max_bytes: int | None = setting(None, low=1, cli=False,
                                    help="The size guard's budget in bytes (default: a quarter of the memory available, "
                                         "half the free disk).")

    def __post_init__(self) -> None:
        check(self)
        check_workers(self.executor, self.address, self.workers)  # at the door, before any file is read


@dataclass(frozen=True, kw_only=True)
class SampleOptions(Shown):
    """How ``pipeline sample`` draws soft queries over the store (:func:`pipeline.stages.sample.sample_dataset`)."""

    out: str | Path | None = setting(None, help="Folder of the query set file (default PIPELINE_HOME/queries/DATASET).")
    split: str = setting("test", choices=("train", "valid", "test"), help="The split whose graph grounds the answers.")
    types: tuple[str, ...] | None = setting(None, registry="query-types",
                                            help="Query types (default: the train types for train, all 12 otherwise).")
    per_type: int | None = setting(None, low=1, high=MAX_PER_TYPE,
                                   help="Queries per type (default: the literature's, 2000 or 3000 on CN15k).")
    alpha: str = setting("zero", registry="alpha-modes", help="Necessity levels (`pipeline ls alpha-modes`).")
    beta: str = setting("equal", registry="beta-modes", help="Importances (`pipeline ls beta-modes`).")
    seed: int = setting(0, low=0, high=2**32 - 1, help="Seed of the walks and the requirements.")
    store: str | None = setting(None, help=STORE_HELP)
    source: str | None = setting(None, help=SOURCE_HELP)
    browse: bool = setting(True, flag="--browse/--no-browse", help="Also write (:Query) nodes into the store for browsing.")

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True, kw_only=True)
class TrainOptions(Shown):
    """What ``pipeline train`` was asked (:func:`pipeline.stages.train.train_dataset`); None: the model's
    default, or the replayed config's. The run's resolved settings are its
    :class:`~pipeline.models.config.TrainConfig` (``config.json``)."""

    model: str | None = setting(None, registry="models", help="Backbone (`pipeline ls models`).")
    config: str | Path | None = setting(None, help="A saved config.json (e.g. RUN_DIR/config.json) to replay; options given besides override it.")
    psl: bool = setting(False, help="Add the data set's soft-logic facts (UKGE+PSL).")
    epochs: int | None = setting(None, low=1, help="Epoch budget (default 100; early stopping on valid MSE).")
    dim: int | None = setting(None, low=1, help="Embedding size (model default: UKGE 128, BEUrRE 64).")
    lr: float | None = setting(None, low=0.0, help="Adam learning rate (model default).")
    batch_size: int | None = setting(None, low=1, help="Facts per batch (model default, fitted to a small graph).")
    negatives: int | None = setting(None, low=0, help="Corruptions per fact and side (model default).")
    negative_weight: float | None = setting(None, low=0.0, help="Weight of the negatives' squared error against "
                                            "the positives' (default 1).")
    patience: int | None = setting(None, low=1, help="Epochs without a better valid MSE before stopping.")
    select_on: str | None = setting(None, choices=("valid_pos_neg", "valid_pos", "last"),
                                    help="Early stopping / selection MSE: valid positives + sampled negatives (default), "
                                         "positives only, or last (keep the final epoch, no early stopping).")
    out: str | Path | None = setting(None, help="Run directory (default PIPELINE_HOME/runs/DATASET-MODEL[-psl]-sSEED).")
    seed: int | None = setting(None, low=0, high=2**32 - 1, help="Random seed (default 0, or the --config file's).")
    device: str | None = setting(None, kind="device", help=DEVICE_HELP)
    resume: bool = setting(False, help="Continue from the run directory's checkpoint.")
    overwrite: bool = setting(False, help="Start over in a run directory that holds a run (its checkpoint and model are deleted).")
    link_prediction: bool | None = setting(
        None, flag="--link-prediction/--no-link-prediction",
        help="Rank every valid and test fact's tail and head among all entities as the unKR benchmark does "
             "(filtered MRR, hits@k). Default: when one scored block says it takes at most 10 minutes (UKGE on "
             "CN15k: about a minute on a CPU; BEUrRE on a CPU: hours, skipped with a warning).")
    source: str | None = setting(None, help=SOURCE_HELP)

    def __post_init__(self) -> None:
        check(self)
        if self.resume and self.overwrite:
            from pipeline.core.errors import PipelineError, option

            raise PipelineError(f"{option('resume', True)} and {option('overwrite', True)} exclude each other")

    def overrides(self) -> dict[str, Any]:
        """The settings of the run's config that were given (None: not given)."""
        names = ("psl", "epochs", "dim", "lr", "batch_size", "negatives", "negative_weight", "patience", "select_on",
                 "seed", "device")
        out = {k: getattr(self, k) for k in names}
        out["psl"] = self.psl or None  # a flag left off keeps the replayed config's
        return out


@dataclass(frozen=True, kw_only=True)
class IngestOptions(Shown):
    """How your own uncertain KG is read and split (``pipeline ingest NAME --from PATH | --from-store URI``;
    :func:`pipeline.stages.user_ingest.ingest_user`)."""

    split: str = setting("0.8,0.1,0.1", help="train,valid,test fractions of a single file.")
    seed: int = setting(0, low=0, high=2**32 - 1, help="Seed of the single file's split.")
    columns: str | None = setting(None, help="Header names of head,relation,tail,confidence (e.g. s,p,o,w).")
    confidence_property: str | None = setting(None, help="From a store: the relationship property holding c.")
    rel_types: str | None = setting(None, help="From a store: only these relationship types (A,B).")
    name_property: str = setting("name", help="From a store: the node property holding names.")
    batch_size: int = setting(10_000, low=1, help="Rows per UNWIND batch (Cypher path).")
    store: str | None = setting(None, help=STORE_HELP)

    def __post_init__(self) -> None:
        check(self)
