"""One query, answered from a data set's observed graph or a neural adjacency export: the work behind
`pipeline query` (no graph store needed)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.core.errors import PipelineError
from pipeline.core.kg import GraphTensors, observed_graph
from pipeline.engine.adjacency import as_adjacency
from pipeline.engine.search import solve, top_answers
from pipeline.query import Vocabulary, parse, to_text


@dataclass(frozen=True)
class Ranking:
    """Ranked answers: rows of {"eid", "name", "utility"} best first (finite utility > 0 only)."""

    query: str  # the normalised text (DNF, names where unambiguous)
    source: str  # "graph test" or "adjacency DIR"
    rows: list[dict]
    n_answers: int  # before the top-k cut
    approximate: bool
    witnesses: list[dict] | None = None  # with explain: one record per shown row (pipeline.stages.witness_records)
    empty_reason: str | None = None  # without answers: one line saying why (pipeline.engine.empty)


def ask(
    text: str,
    dataset: str,
    graph: str | None = None,
    adjacency: str | Path | None = None,
    top: int | None = 20,
    cycle_cap: int | None = None,
    device: str = "cpu",
    explain: bool | int = False,
    calibration: tuple[str, ...] = (),
) -> Ranking:
    """Parse text against the data set's vocabulary and answer it on exactly one source: an observed graph
    (train|valid|test) or a neural adjacency export directory. top None: every answer. explain: True
    explains every row returned, a number K the first K of them."""
    from loaders import load
    from pipeline.core.checks import check_int, check_text

    # the arguments of `pipeline query` and pl.query, checked here where both pass: one line naming each
    check_text(text, "text")
    check_text(dataset, "dataset")
    if top is not None:
        check_int(top, "top", 1)
    if cycle_cap is not None:
        check_int(cycle_cap, "cycle_cap", 1)
    if not isinstance(explain, bool):
        check_int(explain, "explain", 0)
    if graph is not None and graph not in ("train", "valid", "test"):
        raise PipelineError(f"graph: expected train, valid or test, got {graph!r}")
    if adjacency is not None and not isinstance(adjacency, (str, Path)):
        raise PipelineError(f"adjacency: expected an export folder, got {type(adjacency).__name__}")
    if (graph is None) == (adjacency is None):
        raise PipelineError("give exactly one of --graph train|valid|test or --adjacency DIR")
    kg = load(dataset)
    vocab = Vocabulary.from_kg(kg)
    query = parse(text, vocab)  # syntax and names fail fast, before any tensor work
    if graph is not None:
        tensors: GraphTensors = observed_graph(kg, graph, device)
        source, where = f"graph {graph}", f"on graph {graph}"
    else:
        from pipeline.core.versions import KEY, check_versions
        from pipeline.formats.adjacency import load_adjacency
        from pipeline.store.ingest import content_key

        tensors, meta = load_adjacency(adjacency, kg.name, device, kg.n_entities, kg.n_relations)
        # the query's names are resolved in the data set as it is now: the export's ids must mean the same
        check_versions(kg.name, [(f"the data set '{kg.name}' as it is now", content_key(kg)),
                                 (f"the export {adjacency}", meta.get(KEY))])
        source = f"adjacency {adjacency} (threshold {meta.get('threshold')})"
        where = f"in the export (facts >= {meta.get('threshold')})"
    adj = as_adjacency(tensors)  # built once: the witnesses read the same index
    if calibration:
        if adjacency is None:
            raise PipelineError("--calibration applies to a neural adjacency export (--adjacency), not --graph")
        from pipeline.methods.calibration import lower_alphas
        from pipeline.methods.saved_calibration import apply_saved

        saved = apply_saved(adj, meta, calibration)
        adj, source = saved.adjacency, f"{source}, calibration {saved.label}"
        query = lower_alphas(query, saved.delta)  # as SRC answers with D (pipeline.methods.src)
    res = solve([query], adj, cycle_cap)
    util = res.utility[0]
    ids, vals = top_answers(util, k=util.numel())
    names = vocab.entities
    rows = [
        {"eid": int(e), "name": names[int(e)], "utility": round(float(v), 6)}
        for e, v in zip(ids[:top].tolist(), vals[:top].tolist(), strict=True)
    ]
    witnesses = None
    if explain:
        from pipeline.engine.witness import find_witnesses
        from pipeline.stages.witness_records import OBSERVED, PREDICTED, witness_record

        found = OBSERVED if graph is not None else PREDICTED
        shown = rows if explain is True else rows[: int(explain)]
        ws = find_witnesses(query, adj, [r["eid"] for r in shown], cycle_cap)
        capped = bool(res.approximate[0])
        # the utility shown is the answer's (as ranked), the witness may reach more under a cycle cap
        witnesses = [
            witness_record(replace(w, utility=float(util[w.answer])), query, vocab, found, capped) for w in ws
        ]
    reason = None
    if ids.numel() == 0:
        from pipeline.engine.empty import empty_reason_text

        # on the facts as stored: a calibration's lowered alphas are in `query`, its L correction is not
        reason = empty_reason_text(query, tensors, vocab, where + (" before calibration L" if calibration else ""))
    return Ranking(
        to_text(query, vocab), source, rows, int(ids.numel()), bool(res.approximate[0]), witnesses, reason
    )
