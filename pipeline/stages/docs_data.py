"""The measured data behind the results pages: one JSON file per kind of table in a docs folder (the project's
``docs/``), merged by the command that measured it, from which ``tools/pages.py`` renders every table of
``docs/results.md`` and the Studies pages. No command writes a page.

=============================  ==========================================================  ===============================
file                           what                                                        written by
=============================  ==========================================================  ===============================
``results.json``               ``{dataset: {method: summary}}``, ``backbones``             ``evaluate --update-docs``,
                                                                                           ``answer --update-docs``,
                                                                                           ``reproduce --docs``
``results_protocol.json``      the paper protocol, undefined counts, ties, chance          the same
``results_counts.json``        the evaluated queries per type                              the same
``results_reproduce.json``     each reproduction: command, machine, date, stage seconds,   ``reproduce --docs``
                               calibration chosen, L's checks, answering throughput
``results_backbones.json``     confidence prediction of trained backbones                  ``train --docs``
``results_ablation.json``      the soft-requirements ablation                              ``reproduce --study
                                                                                           soft-requirements --docs``
``results_llm.json``           accuracy on the multiple-choice items                       ``llm-eval --docs``
=============================  ==========================================================  ===============================

Every record carries the command, the machine and the date that produced it. A record replaces only the
earlier one it supersedes (the same data set's reproduction of the same methods, the same training settings,
the same items), so the data of other runs stays.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pipeline.core import atomic
from pipeline.core.errors import ArtifactError

RESULTS = "results.json"
PROTOCOL = "results_protocol.json"
COUNTS = "results_counts.json"
REPRODUCTIONS = "results_reproduce.json"
BACKBONE_RUNS = "results_backbones.json"
ABLATION = "results_ablation.json"
LLM = "results_llm.json"

# what identifies a backbone's row in results_backbones.json: a run with the same values replaces it
BACKBONE_KEY = ("dataset", "model", "lr", "selection", "epochs", "dim", "batch_size", "negative_weight")


def recorded(paths: Iterable[str | Path]) -> str:
    """The line a command says after recording: where, and how the pages follow."""
    return f"recorded in {', '.join(str(p) for p in paths)}; `python tools/pages.py` regenerates the results pages"


def read(path: str | Path) -> dict[str, Any]:
    """A docs data file as a dict ({} when absent); a file that is not a JSON object is one ArtifactError line
    naming it (never overwritten: nothing already recorded is lost)."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: not a JSON file ({exc}); fix or remove it, then run the command again") from None
    if not isinstance(doc, dict):
        raise ArtifactError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    return doc


def merge(docs: str | Path, name: str, update: Callable[[dict[str, Any]], None]) -> Path:
    """Read ``docs/name``, let ``update`` change the dict in place, write it back atomically; the path."""
    path = Path(docs) / name
    doc = read(path)
    update(doc)
    path.parent.mkdir(exist_ok=True)  # the doors checked the folder: at most a checkout's docs/ is made
    return atomic.write_json(path, doc)


def machine(device: str | None = None) -> str:
    """One line naming the machine: architecture, CPU cores, and (when torch is loaded) its threads, version
    and the device asked for."""
    parts = [platform.machine() or "unknown architecture", f"{os.cpu_count()} CPU cores"]
    torch = sys.modules.get("torch")
    if torch is not None:
        parts += [f"{torch.get_num_threads()} torch threads", f"torch {torch.__version__}", f"device {device or 'auto'}"]
    return ", ".join(parts)


def now() -> str:
    """The date and time of a record, UTC to the minute."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def provenance(command: str, device: str | None = None) -> dict[str, str]:
    """``{command, machine, date}`` of a record made now."""
    return {"command": command, "machine": machine(device), "date": now()}


def record_reproduction(docs: str | Path, dataset: str, record: Mapping[str, Any]) -> Path:
    """Add a reproduction's record to ``results_reproduce.json`` (``{dataset: [record, ...]}``): it replaces
    the data set's earlier records whose methods it covers (a re-run of the same rows), keeps the others (a
    later run of the baselines alone keeps the SRC rows' record)."""
    methods = set(record.get("methods", ()))

    def update(doc: dict[str, Any]) -> None:
        kept = [r for r in doc.get(dataset, []) if not set(r.get("methods", ())) <= methods]
        doc[dataset] = [*kept, dict(record)]

    return merge(docs, REPRODUCTIONS, update)


def backbone_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(k) for k in BACKBONE_KEY)


def record_backbone_run(docs: str | Path, row: Mapping[str, Any]) -> Path:
    """Add a trained backbone's row to ``results_backbones.json`` (``{"runs": [row, ...]}``), replacing the
    row of the same settings (:data:`BACKBONE_KEY`); rows stay in the order they were first recorded."""

    def update(doc: dict[str, Any]) -> None:
        runs = doc.setdefault("runs", [])
        for i, old in enumerate(runs):
            if backbone_key(old) == backbone_key(row):
                runs[i] = dict(row)
                return
        runs.append(dict(row))

    return merge(docs, BACKBONE_RUNS, update)


def record_ablation(docs: str | Path, dataset: str, record: Mapping[str, Any]) -> Path:
    """Set the data set's soft-requirements ablation in ``results_ablation.json`` (``{dataset: record}``)."""

    def update(doc: dict[str, Any]) -> None:
        doc[dataset] = dict(record)

    return merge(docs, ABLATION, update)


def record_llm(docs: str | Path, dataset: str, record: Mapping[str, Any]) -> Path:
    """Add accuracy tables to the data set's record in ``results_llm.json`` (``{dataset: record}``): on the
    same items (``items_digest``) the new tables join the recorded ones (a method asked again replaces its
    own); on other items the record is replaced whole, so no table is set beside one of other items."""

    def update(doc: dict[str, Any]) -> None:
        old = doc.get(dataset)
        tables = dict(record.get("tables", {}))
        if old and old.get("items_digest") == record.get("items_digest"):
            tables = {**old.get("tables", {}), **tables}
        doc[dataset] = {**record, "tables": tables}

    return merge(docs, LLM, update)


def ordered(items: Iterable[str], order: Iterable[str]) -> list[str]:
    """``items`` in the order of ``order``, the rest after them as given."""
    items = list(items)
    first = [o for o in order if o in items]
    return first + [i for i in items if i not in first]
