"""`pipeline reproduce DATASET`: the paper's experiment in one command, resumable stage by stage.

ingest -> sample (train set with alpha = 0; valid and test sets with the chosen alpha/beta modes) ->
train each backbone -> export its neural adjacency -> answer the test set with SRC, SRC(D), SRC(L), SRC(D+L)
-> evaluate (with --docs: the results pages' data, docs/results*.json, and a plot). Each stage writes ``OUT/stages.json`` entries
``{stage: {key, outputs, seconds}}``; a stage whose key (a hash of everything it depends on: settings, data
checksums, the model's content hash, the query sets' contents) matches and whose outputs exist is skipped.
Evaluation is cheap and always runs.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pipeline.core import atomic, jsontext
from pipeline.core.errors import option
from pipeline.core.options import check, setting
from pipeline.core.provenance import stable_key
from pipeline.formats.meta import read_json_object
from pipeline.methods.src.calibrations import CALIBRATIONS, L_VERSION
from pipeline.sampling import MAX_PER_TYPE, SAMPLING_VERSION

STAGES_FILE = "stages.json"

# What `pipeline reproduce DATASET` does with a setting left unset (None): the recipe each data set's main
# table was selected with on its valid queries (docs/studies/), then GENERAL_DEFAULTS (then the backbone's
# own default). An explicit value always wins; stage keys and reproduce.json hold the values used, so a
# replay is exact.
# - PPI5k: UKGE logi trained 300 epochs and kept at the last (the best valid score of 100, 200, 300 and 400
#   epochs and of the early-stopped model), exported at T = 0.1 (T = 0.05 and 0.01 score lower on valid).
# - CN15k: UKGE logi trained 40 epochs and kept at the last one (the early-stopped model's T = 0.1 export
#   is refused, 56% of all pairs pass, and the models below the mean predictor's valid MSE rank far worse),
#   exported at T = 0.4 (valid score 37.06 for SRC against 35.53 at 0.1, 36.92 at 0.5, 31.73 at 0.7).
# The query sets keep the design's hybrid alpha mode everywhere (the SQUK generator's own is --alpha squk).
GENERAL_DEFAULTS: dict[str, Any] = {"alpha": "hybrid", "threshold": 0.1}
DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    "ppi5k": {"epochs": 300, "select_on": "last", "threshold": 0.1},
    "cn15k": {"epochs": 40, "select_on": "last", "threshold": 0.4},
}


def dataset_defaults(dataset: str) -> dict[str, Any]:
    """The settings `pipeline reproduce DATASET` takes when they are not given (DATASET_DEFAULTS over
    GENERAL_DEFAULTS)."""
    return {**GENERAL_DEFAULTS, **DATASET_DEFAULTS.get(dataset.lower(), {})}


@dataclass(frozen=True)
class ReproduceConfig:
    """Everything the reproduction depends on besides the data (all part of the stage keys). Its fields are
    ``pipeline reproduce``'s options and ``pl.run``'s keywords (declared once, :mod:`pipeline.core.options`)."""

    dataset: str
    models: tuple[str, ...] = setting(("ukge_logi",), empty=True, registry="models",
                                      help="Backbones to train and answer with, e.g. ukge_logi,beurre (\"\": "
                                           "none, the baselines only).")
    epochs: int | None = setting(None, low=1, help="Training epochs (default: the data set's recipe, else the backbone's).")
    dim: int | None = setting(None, low=1, help="Embedding dimension (default: the backbone's).")
    per_type: int | None = setting(None, low=1, high=MAX_PER_TYPE, help="Valid and test queries per type (default "
                                   "100, fewer on a graph of under 2,000 train facts: one per 20 of them, at least 10).")
    train_per_type: int | None = setting(None, low=1, high=MAX_PER_TYPE, help="Train queries per type, for calibration L "
                                         "(default 200, fewer on a graph of under 2,000 train facts: one per 10, at least 20).")
    alpha: str | None = setting(None, registry="alpha-modes",
                                help="Alpha mode of the valid/test queries (default: hybrid).")
    beta: str = setting("random", registry="beta-modes", help="Beta mode of all queries.")
    threshold: float | None = setting(None, low=0.0, high=1.0,
                                      help="Export threshold (default: the data set's recipe, else 0.1).")
    negative_weight: float | None = setting(None, low=0.0, help="Weight of the sampled negatives' squared error "
                                                                "in training (default: the data set's recipe, else 1).")
    # declared by pipeline.methods.options.LOptions (the command's --l-epochs, pl.run's l_epochs=): kept here as
    # a field of its own because the L stages' keys read it
    l_epochs: int = setting(20, low=0, cli=False, api=False, help="Epochs of calibration L.")
    # calibration L's other settings given (pipeline.methods.options.LOptions fields, e.g. {"l_lr": 5e-5}; the
    # command line offers them as LOptions' own options); the L and D+L answer stages read them
    l_settings: dict[str, Any] = field(default_factory=dict)
    calibrations: tuple[str, ...] = setting(tuple(CALIBRATIONS), registry="calibrations", help="SRC variants (none,D,L,D+L).")
    seed: int = setting(0, low=0, high=2**32 - 1, help="Seed of every stage.")
    device: str | None = setting(None, kind="device", help="cpu | cuda | cuda:N (default: cuda when present).")
    psl: bool = setting(False, help="Train the backbones with the data set's soft-logic facts (UKGE+PSL).")
    select_on: str | None = setting(None, choices=("valid_pos_neg", "valid_pos", "last"),
                                    help="Training epoch selection (default: the data set's recipe, else valid_pos_neg "
                                         "early stopping; last keeps the final epoch).")
    extra: dict[str, Any] = field(default_factory=dict)
    # query-embedding baselines trained and answered beside SRC (pipeline.stages.reproduce_baselines), and their
    # setting overrides (QEConfig fields, train_per_type, small_per_type; flat or per model name)
    baselines: tuple[str, ...] = setting((), registry="baselines", help="Query-embedding baselines to train and answer beside SRC "
                                                  "(logice_ne,cone_ne; `pipeline ls baselines`).")
    qe: dict[str, Any] = setting(default_factory=dict, kind="any", cli=False, needs=(("baselines", ()),),
                                 help="The baselines' settings: {KEY: VALUE} or {MODEL: {KEY: VALUE}} (docs/baselines.md).")

    def __post_init__(self) -> None:
        from loaders import dataset_name
        from pipeline.core.errors import PipelineError, option
        from pipeline.methods.options import USES_L, LOptions

        # PPI5K is ppi5k: the one spelling of the work folder, the stage keys and the configs it writes
        object.__setattr__(self, "dataset", dataset_name(self.dataset))
        # a setting left unset takes the data set's default, then the general one (stage keys and
        # reproduce.json hold the values used, so a replay is exact)
        for name, value in dataset_defaults(self.dataset).items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        check(self)
        # checked and canonical (a list read back from JSON is a tuple again), l_epochs kept in its own field;
        # L's settings given where no calibration uses L are refused (they would do nothing)
        given = {k: v for k, v in self.l_settings.items() if k != "l_epochs"}
        l_opts = LOptions(**given, l_epochs=self.l_epochs)
        check(l_opts, context={"calibration": ("calibrations", self.calibrations)})
        if any(c in USES_L[0][1] for c in self.calibrations):
            l_opts.check_trains()
        object.__setattr__(self, "l_settings", {k: v for k, v in l_opts.l_settings().items() if k != "l_epochs"})
        if not self.models and not self.baselines:
            raise PipelineError(f"{option('models', '')}: no backbone, and {option('baselines')} names none: nothing to run")
        if self.baselines:  # every baseline and its settings, checked before any work (named as given)
            from pipeline.stages.reproduce_baselines import qe_settings

            for b in self.baselines:
                qe_settings(b, self.qe, self.dataset)
            other = [m for m, v in self.qe.items() if isinstance(v, dict) and m not in self.baselines]
            if other:  # settings of a baseline that is not run would do nothing
                raise PipelineError(f"{option('qe')} sets {other[0]}, which {option('baselines')} does not run")

    @classmethod
    def from_file(cls, path: str | Path, dataset: str, overrides: dict[str, Any] | None = None) -> ReproduceConfig:
        """A saved reproduction's settings (its ``reproduce.json``, or a JSON object of these fields),
        replayed exactly, with ``overrides`` on top."""
        from pipeline.core.errors import ArtifactError, PipelineError, option
        from pipeline.formats.meta import read_json

        path = Path(path)
        doc = read_json(path, "--config")
        doc = doc.get("config", doc) if isinstance(doc, dict) else None
        if not isinstance(doc, dict):
            raise ArtifactError(f"{option('config', str(path))}: not a JSON object of reproduction settings")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - names)
        if unknown:
            raise ArtifactError(f"{option('config', str(path))}: unknown setting(s) {', '.join(unknown)}")
        doc = {k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()}
        from loaders import dataset_name

        dataset = dataset_name(dataset)
        if dataset_name(str(doc.get("dataset", dataset))) != dataset:
            raise PipelineError(f"{option('config', str(path))}: settings for data set '{doc['dataset']}', not '{dataset}'")
        return cls(**{**doc, "dataset": dataset, **(overrides or {})})

    def key(self, *fields: str, **more: Any) -> str:
        d = asdict(self)
        parts = {f: d[f] for f in fields} | more
        return stable_key(**parts)


class Stages:
    """The stage ledger OUT/stages.json: which stage ran with which key and produced what."""

    def __init__(self, out: Path) -> None:
        self.path = out / STAGES_FILE
        self.doc: dict[str, Any] = read_json_object(self.path)
        self.report: list[dict[str, Any]] = []

    def run(
        self, name: str, key: str, fn: Callable[[], dict[str, Any]], log: Callable[[str], None]
    ) -> dict[str, Any]:
        """Run fn unless the ledger holds the same key for name and every output path it recorded exists."""
        done = self.doc.get(name)
        if done and done["key"] == key and all(Path(p).exists() for p in done.get("paths", [])):
            log(f"[skip] {name} (same inputs, outputs present)")
            self.report.append({"stage": name, "skipped": True, "seconds": 0.0})
            return done["outputs"]
        log(f"[run]  {name}")
        t0 = time.perf_counter()
        outputs = fn()
        seconds = time.perf_counter() - t0
        self.doc[name] = {
            "key": key,
            "outputs": outputs,
            "paths": outputs.get("_paths", []),
            "seconds": seconds,
        }
        atomic.write_json(self.path, self.doc)
        self.report.append({"stage": name, "skipped": False, "seconds": seconds})
        return outputs


def _file_checksum(path: str | Path) -> str:
    """The query set's content (ids and texts), so a re-sampled file with new queries changes the key."""
    from pipeline.formats.queryset import checksum, read_query_set

    return checksum(read_query_set(path).frame)


@dataclass
class Context:
    """What every stage of one reproduction reads: the config, the work folder, the data and the ledger."""

    cfg: ReproduceConfig
    out: Path
    kg: Any
    stages: Stages
    log: Callable[[str], None]
    progress: bool
    store_uri: str | None
    _store: Any = None

    @property
    def data_key(self) -> str:
        return json.dumps(self.kg.checksums, sort_keys=True)

    def store(self) -> Any:
        """The graph store, opened on first use (a reproduction whose ingest and sampling are done never
        starts it)."""
        if self._store is None:
            from pipeline.store import open_store

            self._store = open_store(self.store_uri)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def ingest_stage(ctx: Context) -> None:
    """The data set into the store (the store keeps its own completeness marker; the ledger records it)."""

    def run() -> dict[str, Any]:
        from pipeline.store.ingest import ingest

        return {"report": str(ingest(ctx.kg, ctx.store(), progress=ctx.progress))}

    key = ctx.cfg.key("dataset", data=ctx.data_key, store=ctx.store_uri, sampling=SAMPLING_VERSION)
    ctx.stages.run("ingest", key, run, ctx.log)


def sample_stage(ctx: Context, split: str, alpha: str, per_type: int) -> str:
    """One query set (train with alpha zero for L; valid and test with the configured modes); its path."""
    cfg = ctx.cfg

    def run() -> dict[str, Any]:
        from pipeline.stages.options import SampleOptions
        from pipeline.stages.sample import sample_to_dir

        rep = sample_to_dir(ctx.kg, ctx.store(), SampleOptions(out=ctx.out / "queries", split=split, types=None, per_type=per_type, alpha=alpha, beta=cfg.beta, seed=cfg.seed, browse=True, progress=ctx.progress))
        return {"file": rep["file"], "queries": rep["queries"], "_paths": [rep["file"]]}

    key = cfg.key(
        "dataset", "beta", "seed", data=ctx.data_key, split=split, alpha=alpha, per_type=per_type, sampling=SAMPLING_VERSION
    )
    return str(ctx.stages.run(f"sample {split}", key, run, ctx.log)["file"])


def train_stage(ctx: Context, model: str, run_dir: Path, pretrained: bool) -> None:
    """Train one backbone into run_dir (resumed when interrupted), or check a given trained run."""
    from pipeline.core.errors import PipelineError, option

    cfg = ctx.cfg
    if pretrained:
        if not (run_dir / "model.pt").exists():
            raise PipelineError(f"{option('run', f'{model}={run_dir}')}: not a finished run directory (no model.pt)")
        ctx.log(f"[use]  train {model}: the trained run {run_dir}")
        return

    def run() -> dict[str, Any]:
        from pipeline.models import default_config, train
        from pipeline.models.training import can_resume

        tc = default_config(
            cfg.dataset, model, epochs=cfg.epochs, dim=cfg.dim, seed=cfg.seed, device=cfg.device,
            psl=cfg.psl or None, select_on=cfg.select_on, negative_weight=cfg.negative_weight,
            n_train=len(ctx.kg.graph("train")),
        )
        # an interrupted run of the same config resumes; a changed config trains afresh in its place
        res = train(ctx.kg, tc, run_dir, resume=can_resume(run_dir, tc), progress=ctx.progress, overwrite=True)
        return {"run": str(run_dir), "results": res.get("test"), "_paths": [str(run_dir / "model.pt")]}

    # select_on and negative_weight join the key only when set, so the keys of earlier default runs stay valid
    chosen = {k: v for k in ("select_on", "negative_weight") if (v := getattr(cfg, k)) is not None}
    key = cfg.key("dataset", "epochs", "dim", "seed", "psl", data=ctx.data_key, model=model, **chosen)
    ctx.stages.run(f"train {model}", key, run, ctx.log)


def export_stage(ctx: Context, model: str, run_dir: Path, model_hash: str) -> dict[str, Any]:
    """The backbone's neural adjacency (its cache is keyed by the model's content hash)."""

    def run() -> dict[str, Any]:
        from pipeline.stages.export import export_adjacency

        man = export_adjacency(run_dir, threshold=ctx.cfg.threshold, out=ctx.out / "exports" / run_dir.name,
                               device=ctx.cfg.device, progress=ctx.progress,
                               overwrite=True)  # the ledger's key (model hash, threshold) decides
        return {"path": man["path"], "model_hash": man["model_hash"], "nnz": man["nnz"], "_paths": [man["path"]]}

    return ctx.stages.run(f"export {model}", ctx.cfg.key("threshold", model_hash=model_hash), run, ctx.log)


def answer_stage(
    ctx: Context, model: str, calibration: str, run_dir: Path, export: dict[str, Any], sets: dict[str, str],
    model_hash: str,
) -> str:
    """The test queries answered by SRC with one calibration; the answers file's path."""
    cfg = ctx.cfg
    uses_l = CALIBRATIONS[calibration].uses_l

    def run() -> dict[str, Any]:
        from pipeline.methods.options import MethodOptions
        from pipeline.stages.answer import answer_queries
        from pipeline.stages.options import AnswerOptions

        # L's settings and train queries only to the variants that use L, the valid queries to those that
        # choose something on them (the answering stage refuses a setting that would do nothing)
        method = MethodOptions(method="src", adjacency=export["path"], calibration=calibration, run=run_dir,
                               device=cfg.device, seed=cfg.seed, kg=ctx.kg,
                               **({"l_epochs": cfg.l_epochs, **cfg.l_settings} if uses_l else {}))
        how = AnswerOptions(out=ctx.out / "answers", progress=ctx.progress,
                            valid_queries=sets["valid"] if calibration != "none" else None,
                            train_queries=sets["train"] if uses_l else None)
        rep = answer_queries(sets["test"], method, how)  # every core, the export shared (the stage's default)
        return {
            "path": rep["path"], "seconds": rep["seconds"], "throughput": rep["throughput"],
            "delta": rep.get("delta"), "_paths": [rep["path"]],
        }

    # L's settings (and a change of L's training code) matter only to the variants that use L
    key = cfg.key(
        "seed",
        *(("l_epochs",) if uses_l else ()),
        model_hash=model_hash,
        threshold=cfg.threshold,
        sets={s: _file_checksum(p) for s, p in sets.items()},
        calibration=calibration,
        **({"l_version": L_VERSION} if uses_l else {}),
        # only when given, so the keys of reproductions with L's defaults stay those they had
        **({"l_settings": cfg.l_settings} if uses_l and cfg.l_settings else {}),
    )
    path = str(ctx.stages.run(f"answer {model} {calibration}", key, run, ctx.log)["path"])
    if uses_l and (said := calibration_choice(path)):
        ctx.log(f"       {said}")  # what L's selection did, plainly (the identity kept, each check's loss)
    return path


def evaluate_stage(
    ctx: Context, answer_files: list[str], docs: str | Path | None, backbone: Path | None = None
) -> list[dict[str, Any]]:
    """Metrics of every answers file (always run: cheap, and keeps the docs current); with docs, the main
    table's backbone (the run of the first model) is recorded beside them."""
    from pipeline.stages.evaluate import evaluate_file, plot_methods, save_report, update_results

    reports = [evaluate_file(p) for p in answer_files]
    for r in reports:
        save_report(r, Path(r["file"]).with_suffix(""))
    if docs is not None:
        from pipeline.models.evaluation import backbone_summary

        backbones = {ctx.cfg.dataset: backbone_summary(backbone, ctx.kg)} if backbone is not None else None
        update_results(reports, docs, backbones)
        plot_methods(
            {r["method"]: r["summary"] for r in reports}, Path(docs) / f"results_{ctx.cfg.dataset}.png",
            title=ctx.cfg.dataset,
        )
    return reports


# The query counts of a reproduction, fitted to the graph (`fitted_counts`): the literature's 100 valid/test
# and 200 train queries per type, fewer on a small graph, one per this many train facts (never fewer than the
# floor). A graph of a few hundred facts holds few distinct queries per type (1p: one per anchor and
# relation), and calibration L's epochs and valid checks cost in proportion to the query counts: on Les
# Misérables (406 train facts) L and D+L took 5.7 minutes at 100/200 per type, 17 s at 20/40.
PER_TYPE, TRAIN_PER_TYPE = 100, 200
FACTS_PER_QUERY, FACTS_PER_TRAIN_QUERY = 20, 10
MIN_PER_TYPE, MIN_TRAIN_PER_TYPE = 10, 20


def fitted_counts(n_train_facts: int) -> tuple[int, int]:
    """(valid/test queries per type, train queries per type) for a graph of ``n_train_facts`` train facts:
    ``min(100, max(10, n // 20))`` and ``min(200, max(20, n // 10))``; every benchmark (200k+ train facts)
    keeps 100 and 200.

    >>> fitted_counts(406), fitted_counts(4_000), fitted_counts(214_661)
    ((20, 40), (100, 200), (100, 200))
    """
    return (min(PER_TYPE, max(MIN_PER_TYPE, n_train_facts // FACTS_PER_QUERY)),
            min(TRAIN_PER_TYPE, max(MIN_TRAIN_PER_TYPE, n_train_facts // FACTS_PER_TRAIN_QUERY)))


def with_counts(cfg: ReproduceConfig, n_train_facts: int, log: Callable[[str], None] | None = None) -> ReproduceConfig:
    """cfg with its query counts decided: those given are kept, the others fitted to the graph
    (:func:`fitted_counts`); a count lowered below the literature's is said in one line up front."""
    if cfg.per_type is not None and cfg.train_per_type is not None:
        return cfg
    per_type, train_per_type = fitted_counts(n_train_facts)
    done = replace(cfg, per_type=cfg.per_type or per_type, train_per_type=cfg.train_per_type or train_per_type)
    if log is not None and (done.per_type, done.train_per_type) != (cfg.per_type or PER_TYPE, cfg.train_per_type or TRAIN_PER_TYPE):
        log(f"{cfg.dataset}: {n_train_facts} train facts: {done.per_type} valid/test and {done.train_per_type} train "
            f"queries per type (fitted to the graph; the literature's {PER_TYPE}/{TRAIN_PER_TYPE} with "
            f"{option('per_type', PER_TYPE)} and {option('train_per_type', TRAIN_PER_TYPE)})")
    return done


def pretrained_runs(runs: dict[str, str | Path] | None, models: tuple[str, ...],
                    dataset: str | None = None) -> dict[str, Path]:
    """The trained runs given (``--run MODEL=RUN_DIR``, ``runs={MODEL: RUN_DIR}``) by canonical model name,
    checked before any work: a name that is no backbone (with the close ones), a backbone the reproduction
    does not run (the run would be ignored without a word), or a folder that is no finished run of that
    backbone on ``dataset`` (its answers would carry the name of another model) is one PipelineError."""
    from pipeline.core.errors import PipelineError, front_end
    from pipeline.models.registry import BACKBONES
    from pipeline.models.runs import read_run

    out: dict[str, Path] = {}
    for model, path in (runs or {}).items():
        shown = f"--run {model}={path}" if front_end() == "cli" else f"runs={{{model!r}: {str(path)!r}}}"
        if not isinstance(model, str):
            raise PipelineError(f"{shown}: a model name must be text")
        try:
            name = BACKBONES.canonical(model.strip())
        except PipelineError as exc:
            raise PipelineError(f"{shown}: {exc}") from None
        if name not in models:
            given = option("models", ",".join(models)) if models else option("models", "")
            raise PipelineError(f"{shown}: {name} is not a backbone this reproduction trains ({given}); add it "
                                "there or leave the run out")
        if name in out:
            raise PipelineError(f"{shown}: a second run for {name}")
        if not isinstance(path, (str, Path)) or not (Path(path) / "model.pt").is_file():
            raise PipelineError(f"{shown}: not a finished run directory (no model.pt)")
        run = read_run(path)
        made = (str(run.config.get("model")), run.dataset)
        if made[0] != name or (dataset is not None and made[1] != dataset):
            raise PipelineError(f"{shown}: a run of {made[0]} on '{made[1]}', not of {name}"
                                + (f" on '{dataset}'" if dataset is not None else ""))
        out[name] = Path(path)
    return out


def reproduce(
    cfg: ReproduceConfig,
    out: str | Path,
    docs: str | Path | None = None,
    store_uri: str | None = None,
    log: Callable[[str], None] = print,
    progress: bool = True,
    runs: dict[str, str | Path] | None = None,
    kg: Any = None,
) -> dict[str, Any]:
    """Run (or resume) the reproduction of cfg.dataset under out; evaluation tables go to docs when given.

    runs: {model: run directory} of backbones already trained (e.g. by `pipeline train`): used as they are,
    keyed by their model's content hash, instead of training. kg: the loaded data set (default: loaded by
    name; tests pass a small one).

    Returns {stages: [{stage, skipped, seconds}], reports: [evaluation reports], seconds, out}."""
    from loaders import load
    from pipeline.models import load_run

    for c in cfg.calibrations:
        CALIBRATIONS.get(c)  # an unknown calibration fails before any work, with close matches
    atomic.check_docs_folder(docs, "docs")  # before any work, not after hours of it
    runs = pretrained_runs(runs, cfg.models, cfg.dataset)  # before any work too
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    kg = kg if kg is not None else load(cfg.dataset)
    cfg = with_counts(cfg, len(kg.graph("train")), log)
    ctx = Context(cfg, out, kg, Stages(out), log, progress, store_uri)
    if cfg.baselines:  # their train counts against the graph, before any stage runs
        from pipeline.stages.reproduce_baselines import check_counts

        check_counts(ctx.kg, cfg)
    answer_files: list[str] = []
    backbone: Path | None = None  # the main table's: the first model's run
    try:
        ingest_stage(ctx)
        sets = {
            # SRC's train set (alpha zero) serves calibration L only: not sampled for baselines alone
            **({"train": sample_stage(ctx, "train", "zero", cfg.train_per_type)} if cfg.models else {}),
            "valid": sample_stage(ctx, "valid", cfg.alpha, cfg.per_type),
            "test": sample_stage(ctx, "test", cfg.alpha, cfg.per_type),
        }
        for model in cfg.models:
            run_dir = runs.get(model, out / "runs" / f"{cfg.dataset}-{model}-s{cfg.seed}")
            train_stage(ctx, model, run_dir, model in runs)
            backbone = backbone or run_dir
            model_hash = load_run(run_dir).content_hash()
            export = export_stage(ctx, model, run_dir, model_hash)
            for calibration in cfg.calibrations:
                answer_files.append(answer_stage(ctx, model, calibration, run_dir, export, sets, model_hash))
        if cfg.baselines:
            from pipeline.stages.reproduce_baselines import baseline_stages

            answer_files += baseline_stages(ctx, sets)
    finally:
        ctx.close()

    reports = evaluate_stage(ctx, answer_files, docs, backbone)
    seconds = time.perf_counter() - t_start
    if docs is not None:
        from pipeline.stages.docs_data import record_reproduction

        methods = [r["method"] for r in reports]
        from pipeline.stages.docs_data import recorded

        path = record_reproduction(docs, cfg.dataset, reproduction_record(cfg, ctx.stages, runs, seconds, methods))
        log(recorded([Path(docs) / "results.json", path]))
    summary = {
        "dataset": cfg.dataset,
        "config": asdict(cfg),
        "runs": {m: str(p) for m, p in runs.items()},
        "stages": ctx.stages.report,
        "seconds": seconds,
        "out": str(out),
        "reports": reports,
    }
    atomic.write_json(out / "reproduce.json", summary)
    return summary


@dataclass(frozen=True)
class Experiment:
    """One experiment run end to end (``pl.run``, ``pipeline reproduce``): ``table`` (one row per method, the
    metrics x100 averaged over the query types: tau, rho, MAP, NDCG, then ``MAP chance`` and ``NDCG chance``,
    what a random ranking of the same answers scores), ``per_type`` (method label -> the metrics per query
    type, ``pl.evaluate``'s table, chance rows included), ``paths`` (each artifact: the query sets, runs,
    exports, answers files), ``stages`` (stage, skipped, seconds), ``seconds`` and the work folder ``out``;
    ``summary`` is ``reproduce.json``. Run it again with the same settings and every stage is skipped.

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Experiment)]
    ['table', 'per_type', 'paths', 'stages', 'seconds', 'out', 'summary']
    """

    table: Any = field(repr=False)  # pandas.DataFrame
    per_type: dict[str, Any] = field(repr=False)
    paths: dict[str, Any]
    stages: Any = field(repr=False)  # pandas.DataFrame
    seconds: float
    out: Path
    summary: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, summary: dict[str, Any]) -> Experiment:
        """The experiment a reproduction's summary (``reproduce``'s return, ``reproduce.json``) describes."""
        import pandas as pd

        from pipeline.stages.evaluate import method_order, metrics_frame

        reports = {r["method"]: r for r in summary["reports"]}
        per_type = {method: metrics_frame(reports[method]) for method in method_order(reports)}
        # one row per method: each frame's avg column (tau, rho, MAP, NDCG, then the chance of MAP and NDCG)
        columns = list(dict.fromkeys(m for frame in per_type.values() for m in frame.index))
        table = pd.DataFrame([frame["avg"].reindex(columns) for frame in per_type.values()],
                             index=pd.Index(list(per_type), name="method"), columns=columns)
        table.columns.name = None
        ledger = _read_ledger(Path(summary["out"]))
        paths = {
            "queries": {n.split(" ", 1)[1]: e["outputs"]["file"] for n, e in ledger.items() if n.startswith("sample ")},
            "runs": {**{n.split(" ", 1)[1]: e["outputs"]["run"] for n, e in ledger.items() if n.startswith("train ")},
                     **summary.get("runs", {})},
            "exports": {n.split(" ", 1)[1]: e["outputs"]["path"] for n, e in ledger.items() if n.startswith("export ")},
            "answers": {r["method"]: r["file"] for r in summary["reports"]},
        }
        stages = pd.DataFrame(summary["stages"], columns=["stage", "skipped", "seconds"])
        return cls(table, per_type, paths, stages, float(summary["seconds"]), Path(summary["out"]), summary)


def _read_ledger(out: Path) -> dict[str, Any]:
    path = out / STAGES_FILE
    return read_json_object(path)


_STAGE_ORDER = ("ingest", "sample", "train", "train-qe", "export", "answer", "evaluate")
_CALIBRATION_ORDER = {c: i for i, c in enumerate(CALIBRATIONS)}  # none, D, L, D+L


def _stage_order(name: str) -> tuple[int, str, int, str]:
    """Stages in pipeline order (the ledger file is sorted by name): ingest, sample, train, export, answer by
    model then calibration none/D/L/D+L."""
    kind, _, rest = name.partition(" ")
    *head, last = rest.split(" ") if rest else [""]
    order = _STAGE_ORDER.index(kind) if kind in _STAGE_ORDER else len(_STAGE_ORDER)
    if kind == "answer":
        return order, " ".join(head), _CALIBRATION_ORDER.get(last, len(_CALIBRATION_ORDER)), last
    return order, rest, 0, ""


def reproduce_command(cfg: ReproduceConfig, runs: dict[str, Path]) -> str:
    """The ``pipeline reproduce`` command line that replays cfg (every setting written out)."""
    return (
        f"pipeline reproduce {cfg.dataset} --models {','.join(cfg.models) or _EMPTY} --per-type {cfg.per_type} "
        f"--train-per-type {cfg.train_per_type} --alpha {cfg.alpha} --beta {cfg.beta} --threshold {cfg.threshold} "
        f"--l-epochs {cfg.l_epochs}" + "".join(f" {_flag(k)} {_shown(v)}" for k, v in cfg.l_settings.items())
        + f" --seed {cfg.seed}"
        + (f" --epochs {cfg.epochs}" if cfg.epochs else "")
        + (f" --select-on {cfg.select_on}" if cfg.select_on else "")
        + (f" --negative-weight {cfg.negative_weight:g}" if cfg.negative_weight is not None else "")
        + (f" --baselines {','.join(cfg.baselines)}" if cfg.baselines else "")
        + "".join(f" --qe {k}={v}" for k, v in _flat_qe(cfg.qe))
        + "".join(f" --run {m}={p}" for m, p in runs.items())
    )


def reproduction_record(cfg: ReproduceConfig, stages: Stages, runs: dict[str, Path], seconds: float,
                        methods: list[str]) -> dict[str, Any]:
    """What ``docs/results_reproduce.json`` keeps of a reproduction (:mod:`pipeline.stages.docs_data`): its
    command, machine and date, the query counts, the methods it evaluated, each stage's seconds (as it last
    ran) in pipeline order, what calibration chose, every check of each L (:func:`l_checks`) and the
    answering throughput per type (queries/s, engine time only)."""
    from pipeline.stages.docs_data import provenance

    ordered = sorted(stages.doc.items(), key=lambda kv: _stage_order(kv[0]))
    answers = {n: e["outputs"] for n, e in ordered if n.startswith("answer ") and "throughput" in e["outputs"]}
    return {
        **provenance(reproduce_command(cfg, runs), cfg.device),
        "queries": f"{cfg.per_type} per type in valid and test, {cfg.train_per_type} per train type (alpha zero)"
        + (f"; baselines trained on {_baseline_counts(cfg)}" if cfg.baselines else ""),
        "methods": list(methods),
        "stages": [[name, round(float(entry["seconds"]), 3)] for name, entry in ordered],
        "seconds": round(seconds, 3),
        "calibration": {name: c for name, o in answers.items() if (c := calibration_choice(o["path"]))},
        "l_checks": {name.removeprefix("answer "): l_checks(h) for name, o in answers.items()
                     if (h := l_history(o["path"]))},
        "throughput": {name: {t: round(float(v["queries_per_s"]), 1) for t, v in o["throughput"].items()}
                       for name, o in answers.items()},
    }


_EMPTY = '""'  # how a shell writes --models with no backbone (baselines only)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(value: Any) -> str:
    """An option's value as the command line takes it (a list of names joined by commas)."""
    return ",".join(value) if isinstance(value, (tuple, list)) else f"{value:g}" if isinstance(value, float) else str(value)


def _baseline_counts(cfg: ReproduceConfig) -> str:
    from pipeline.stages.reproduce_baselines import BIG_TYPES, SMALL_TYPES, qe_settings

    parts = []
    for m in cfg.baselines:
        st = qe_settings(m, cfg.qe, cfg.dataset)
        parts.append(
            f"{m}: {st['train_per_type']} per {'/'.join(BIG_TYPES)} and {st['small_per_type']} per "
            f"{'/'.join(SMALL_TYPES)} ({cfg.alpha} alpha)"
        )
    return "; ".join(parts)


def _flat_qe(qe: dict[str, Any]) -> list[tuple[str, Any]]:
    """The baseline overrides as the CLI's --qe KEY=VALUE pairs (MODEL.KEY for one model's)."""
    return sorted(
        (f"{k}.{kk}", vv) if isinstance(v, dict) else (k, v)
        for k, v in qe.items()
        for kk, vv in (v.items() if isinstance(v, dict) else [(None, v)])
    )


def _answers_meta(answers_path: str) -> dict[str, Any]:
    import pyarrow.parquet as pq

    path = Path(answers_path)
    if not path.exists():
        return {}
    return jsontext.loads((pq.read_schema(path).metadata or {}).get(b"pipeline", b"{}"))


def l_history(answers_path: str) -> dict[str, Any] | None:
    """The history of the L an answers file applied (its L.json), or None."""
    meta = _answers_meta(answers_path)
    l_json = Path(meta["l_dir"]) / "L.json" if meta.get("l_dir") else None
    if l_json is None or not l_json.exists():
        return None
    return jsontext.loads(l_json.read_text())["history"]


def l_verdict(hist: dict[str, Any]) -> str:
    """What L's selection did, plainly: the identity kept (and by how much every check lost) or the check
    kept (and its gain over the identity)."""
    epochs = hist["epochs"]
    ident = epochs["0"]["valid"]
    best = max(epochs, key=lambda k: (epochs[k]["valid"], -int(k)))
    checks = sorted((k for k in epochs if k != "0"), key=int)  # JSON keys read back sorted as text: 1, 10, 11, 2
    by = "step" if hist.get("config", {}).get("steps") else "epoch"
    name = lambda k: f"{by} {epochs[k]['step']}" if by == "step" else f"epoch {k}"  # noqa: E731
    diffs = ", ".join(f"{k if by == 'epoch' else epochs[k]['step']}: {epochs[k]['valid'] - ident:+.2f}" for k in checks)
    if best == "0":
        return (f"L kept the identity (valid score {ident:.2f}): every one of its {len(checks)} "
                f"{by}s scored lower or the same ({diffs})")
    return (f"L kept {name(best)} of {len(checks)} (valid score {epochs[best]['valid']:.2f}, "
            f"{epochs[best]['valid'] - ident:+.2f} over the identity's {ident:.2f}; by {by}: {diffs})")


def calibration_choice(answers_path: str) -> str:
    """What calibration selected for an answers file: delta for D, and for L what its selection did
    (:func:`l_verdict`) with the shapes it fitted."""
    meta = _answers_meta(answers_path)
    parts = []
    if "delta" in meta:
        parts.append(f"delta = {meta['delta']:g}")
    hist = l_history(answers_path)
    if hist is not None:
        skipped = hist["shapes_skipped"]
        variant = hist.get("config", {}).get("variant", "default")
        parts.append(
            l_verdict(hist) + f"; {variant} L fitted on {', '.join(hist['shapes_used'])}"
            + (f"; not differentiable through the engine: {', '.join(skipped)}" if skipped else "")
        )
    return "; ".join(parts)


def l_checks(hist: dict[str, Any]) -> dict[str, Any]:
    """Every check of one L as data: ``{kept, checks: [{valid, loss, step, delta}]}``, check 0 the identity;
    ``step`` only where L counts steps, ``delta`` (the best of D's grid) only under D+L."""
    epochs = hist["epochs"]
    by_steps = bool(hist.get("config", {}).get("steps"))
    checks = []
    for i in range(len(epochs)):
        e = epochs.get(str(i))
        if e is None:
            break
        check: dict[str, Any] = {"valid": round(float(e["valid"]), 4),
                                 "loss": None if e["loss"] is None else round(float(e["loss"]), 6)}
        if by_steps and i:
            check["step"] = int(e["step"])
        if deltas := e.get("deltas"):
            check["delta"] = float(max(deltas, key=lambda d: (deltas[d], -float(d))))
        checks.append(check)
    return {"kept": int(hist.get("best", 0) or 0), "checks": checks}
