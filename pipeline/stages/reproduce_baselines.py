"""The query-embedding baselines' stages of `pipeline reproduce DATASET --baselines logice_ne,cone_ne`.

Per baseline: sample its train query sets (1p/2p/2i at ``train_per_type``, the negation types 2in/2il at
``small_per_type``; the valid/test modes of the reproduction), train it with ``train-qe``
on them (selected on the reproduction's valid set), answer the reproduction's test set, and hand the
answers file to the evaluation stage, so the baselines land in the same table as SRC.

Stages run through the reproduction's ledger (``ctx.stages``, see :class:`pipeline.stages.reproduce.Stages`) with
keys over everything they depend on, so they are skipped when done and resumed when interrupted (train-qe
resumes from its checkpoint). ``ctx`` is :class:`pipeline.stages.reproduce.Context`; this module does not import
pipeline.stages.reproduce (which imports it), so the dependency stays one way.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError, option
from pipeline.core.options import Option
from pipeline.core.provenance import stable_key
from pipeline.sampling import MAX_PER_TYPE, SAMPLING_VERSION

BIG_TYPES = ("1p", "2p", "2i")
SMALL_TYPES = ("2in", "2il")  # the paper samples a tenth (CN15k) to 15% (PPI5k) as many negation queries

# The settings of the PPI5k rows in docs/baselines.md (CPU budget: d = 128), per model; any QEConfig field
# (and train_per_type / small_per_type) can be overridden through ReproduceConfig.qe. The train count is
# 3.5x the paper's PPI5k one (10,000): with 35,000 per type and 64 in-batch negatives LogicE+NE's valid
# score rose from 10 to 21 (docs/baselines.md, fourth round); sampling them takes a minute on PPI5k, two on
# CN15k.
COMMON = {
    "train_per_type": 35_000,
    "small_per_type": 1_500,
    "dim": 128,
    "hidden": 256,
    "negatives": 64,
    "max_answers": 32,
    "loss": "listwise",
    "max_valid": 30,
}
PER_MODEL = {
    "logice_ne": {"lr": 1e-3, "batch_size": 256, "batch_negatives": 64, "epochs": 60, "eval_every": 2},
    "cone_ne": {"lr": 1e-3, "batch_size": 256, "batch_negatives": 64, "epochs": 60, "eval_every": 2},
}
# Where a data set needs other settings: CN15k gets the paper's train counts (~53k per 1p/2p/2i, 5.3k per
# 2in/2il) and, per model, the settings that scored best on its valid queries (docs/baselines.md, "CN15k at
# the paper's counts"): on 15,000 entities the in-batch negatives (answers of the other queries of a batch)
# pushed true answers down (ConE+NE valid 4.64 with them, 4.67 without; test MAP 0.0 against 1.6).
PER_DATASET: dict[str, dict[str, Any]] = {
    "cn15k": {
        "train_per_type": 53_000,
        "small_per_type": 5_300,
        "logice_ne": {
            "dim": 400,
            "hidden": 800,
            "lr": 1e-2,
            "batch_size": 64,
            "batch_negatives": 0,
            "epochs": 8,
            "eval_every": 1,
        },
        "cone_ne": {"lr": 3e-3, "batch_size": 256, "batch_negatives": 0, "epochs": 8, "eval_every": 1},
    },
}
# The query counts of the baselines' train sets, declared as the QEConfig fields are (at most the largest
# sample size: pipeline.sampling.capacity)
COUNTS = {
    "train_per_type": Option(help="Train queries per 1p/2p/2i type.", kind="int", low=1, high=MAX_PER_TYPE),
    "small_per_type": Option(help="Train queries per 2in/2il type.", kind="int", low=1, high=MAX_PER_TYPE),
}
_COUNTS = tuple(COUNTS)


def qe_settings(model: str, overrides: dict[str, Any], dataset: str | None = None) -> dict[str, Any]:
    """The baseline's settings: COMMON, PER_MODEL[model], then the data set's PER_DATASET entries (its flat
    ones, then its model's), then overrides (a flat dict of fields, or {model: {fields}} for one model
    only), each override checked against its declaration (:class:`~pipeline.baselines.settings.QEConfig`,
    :data:`COUNTS`). An unknown name or a value out of its range fails before any work, named as the caller
    gave it (``--qe lr=nan``, ``qe={'lr': nan}``)."""
    from pipeline.baselines import get_qe_model_class
    from pipeline.baselines.settings import QEConfig
    from pipeline.core.options import check_mapping, declare, declared

    if not isinstance(overrides, dict):
        raise PipelineError(f"{option('qe')}: expected a mapping of settings, got {type(overrides).__name__}")
    for name in [model, *(k for k, v in overrides.items() if isinstance(v, dict))]:
        get_qe_model_class(name)  # an unknown baseline (or MODEL.KEY prefix) fails with close matches
    # the data, the query sets and the seed are the reproduction's own (QEConfig's declared fields are the rest)
    options = [*declared(QEConfig), *(declare(k, o) for k, o in COUNTS.items())]
    options = [d for d in options if d.name != "seed"]
    flat = check_mapping({k: v for k, v in overrides.items() if not isinstance(v, dict)}, options, _qe_label(), "qe")
    mine = overrides.get(model, {})
    mine = check_mapping(mine, options, _qe_label(model), "qe") if isinstance(mine, dict) else {}
    ds = PER_DATASET.get(dataset or "", {})
    ds_flat = {k: v for k, v in ds.items() if not isinstance(v, dict)}
    return {**COMMON, **PER_MODEL.get(model, {}), **ds_flat, **ds.get(model, {}), **flat, **mine}


def _qe_label(model: str | None = None) -> Any:
    """How one baseline setting is named as the caller gave it: ``--qe lr=nan`` / ``--qe cone_ne.lr=nan`` on
    the command line, ``qe={'lr': nan}`` / ``qe={'cone_ne': {'lr': nan}}`` in Python."""
    from pipeline.core.errors import front_end

    def label(name: str, value: Any) -> str:
        if isinstance(value, str) and len(value) > 80:  # a value of 50,000 brackets is not echoed whole
            value = value[:77] + "..."
        if front_end() == "cli":
            return f"--qe {model + '.' if model else ''}{name}={value}"
        inner = {name: value}
        return f"qe={({model: inner} if model else inner)!r}"

    return label


def _checksum(path: str | Path) -> str:
    from pipeline.formats.queryset import checksum, read_query_set

    return checksum(read_query_set(path).frame)


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def sample_train_stage(ctx: Any, types: tuple[str, ...], per_type: int, folder: str) -> str:
    """One train query set of the baselines (types at per_type each, the reproduction's alpha/beta); its path.
    Not written back to the store for browsing: tens of thousands of train queries are not for reading."""
    cfg = ctx.cfg

    def run() -> dict[str, Any]:
        from pipeline.stages.options import SampleOptions
        from pipeline.stages.sample import sample_to_dir

        rep = sample_to_dir(ctx.kg, ctx.store(), SampleOptions(out=ctx.out / "queries" / folder, split="train", types=list(types), per_type=per_type, alpha=cfg.alpha, beta=cfg.beta, seed=cfg.seed, browse=False, progress=ctx.progress))
        return {"file": rep["file"], "queries": rep["queries"], "_paths": [rep["file"]]}

    key = stable_key(
        dataset=cfg.dataset,
        alpha=cfg.alpha,
        beta=cfg.beta,
        seed=cfg.seed,
        data=ctx.data_key,
        types=types,
        per_type=per_type,
        sampling=SAMPLING_VERSION,
    )
    return str(ctx.stages.run(f"sample {folder}", key, run, ctx.log)["file"])


def train_qe_stage(ctx: Any, model: str, settings: dict[str, Any], train_sets: list[str], valid: str) -> Path:
    """Train one baseline (resumed from its checkpoint when interrupted); its run directory."""
    from pipeline.stages.train_qe import QEConfig, config_doc, train_qe

    cfg = ctx.cfg
    fields = {k: v for k, v in settings.items() if k not in _COUNTS}
    qe_cfg = QEConfig(
        dataset=cfg.dataset,
        model=model,
        train_queries=tuple(train_sets),
        valid_queries=valid,
        seed=cfg.seed,
        **fields,
    )
    run_dir = ctx.out / "runs" / f"{cfg.dataset}-{model}-s{cfg.seed}"

    def run() -> dict[str, Any]:
        from pipeline.models.runs import read_json

        saved = run_dir / "config.json"
        if saved.exists():
            old = {k: v for k, v in read_json(saved).items() if k != "epochs"}
            new = {k: v for k, v in config_doc(qe_cfg).items() if k != "epochs"}
            if old != new:  # a changed setting trains afresh in its place, as the backbones' stage does
                shutil.rmtree(run_dir)
        res = train_qe(qe_cfg, run_dir, device=cfg.device, progress=ctx.progress, log=ctx.log, kg=ctx.kg)
        summary = {k: res[k] for k in ("best_epoch", "best_valid_score", "epochs_run", "train_queries")}
        return {
            "run": str(run_dir),
            **summary,
            "seconds_per_epoch": res["seconds_per_epoch"],
            "_paths": [str(run_dir / "model.pt")],
        }

    key = stable_key(
        config=config_doc(qe_cfg),
        data=ctx.data_key,
        sets=[_checksum(p) for p in [*train_sets, valid]],
    )
    ctx.stages.run(f"train-qe {model}", key, run, ctx.log)
    return run_dir


def answer_qe_stage(ctx: Any, model: str, run_dir: Path, test: str) -> str:
    """The test queries answered by the trained baseline; the answers file's path."""

    def run() -> dict[str, Any]:
        from pipeline.methods.options import MethodOptions
        from pipeline.stages.answer import answer_queries
        from pipeline.stages.options import AnswerOptions

        method = MethodOptions(method=model, model=run_dir, device=ctx.cfg.device)
        rep = answer_queries(test, method, AnswerOptions(out=ctx.out / "answers", progress=ctx.progress))
        return {
            "path": rep["path"],
            "seconds": rep["seconds"],
            "throughput": rep["throughput"],
            "_paths": [rep["path"]],
        }

    key = stable_key(model=_file_digest(run_dir / "model.pt"), test=_checksum(test), device=ctx.cfg.device)
    return str(ctx.stages.run(f"answer {model}", key, run, ctx.log)["path"])


def check_counts(kg: Any, cfg: Any) -> None:
    """Before any work: each baseline's train counts against what the train graph can hold
    (:mod:`pipeline.sampling.capacity`). Beyond it the sampling could never fill (a default of 35,000 per
    type on a graph of a dozen entities walked for a day and a half): one line naming the setting, as given
    or as the default it is, and the most the graph holds."""
    from pipeline.sampling.capacity import most_per_type
    from pipeline.sampling.requirements import check_alpha_mode, check_beta_mode
    from pipeline.sampling.sampler import SamplingError

    alpha, beta = check_alpha_mode(cfg.alpha), check_beta_mode(cfg.beta)
    for model in cfg.baselines:
        settings = qe_settings(model, cfg.qe, cfg.dataset)
        for key, types in (("train_per_type", BIG_TYPES), ("small_per_type", SMALL_TYPES)):
            most = most_per_type(types, kg.graph("test"), kg.n_entities, alpha, beta)
            name = min(most, key=most.__getitem__)
            if settings[key] > most[name]:
                given = key in cfg.qe or key in cfg.qe.get(model, {})
                asked = _qe_label(model if key in cfg.qe.get(model, {}) else None)(key, settings[key])
                what = asked if given else f"the baselines' default {key} of {settings[key]:,}"
                raise SamplingError(
                    f"{what}: the train graph of '{cfg.dataset}' holds at most {most[name]:,} distinct {name} "
                    f"queries (alpha {alpha}, beta {beta}); give {_qe_label()(key, 'N')} with N at most that")


def baseline_stages(ctx: Any, sets: dict[str, str]) -> list[str]:
    """Every configured baseline through sample -> train-qe -> answer; the answers files, in config order."""
    cfg = ctx.cfg
    settings = {m: qe_settings(m, cfg.qe, cfg.dataset) for m in cfg.baselines}  # all checked before any work
    files = []
    for model in cfg.baselines:
        s = settings[model]
        train_sets = [
            sample_train_stage(ctx, BIG_TYPES, int(s["train_per_type"]), f"qe-train-{s['train_per_type']}"),
            sample_train_stage(
                ctx, SMALL_TYPES, int(s["small_per_type"]), f"qe-train-neg-{s['small_per_type']}"
            ),
        ]
        run_dir = train_qe_stage(ctx, model, s, train_sets, sets["valid"])
        files.append(answer_qe_stage(ctx, model, run_dir, sets["test"]))
    return files
