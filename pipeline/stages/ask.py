"""One query, answered from a data set's observed graph or a neural adjacency export: the work behind
``pipeline query`` and ``pl.query`` (no graph store needed). It answers through SRC
(:class:`pipeline.methods.src.method.SRC`), the same method ``pipeline answer`` uses, with a saved calibration
applied by :meth:`SRC.apply_saved <pipeline.methods.src.method.SRC.apply_saved>`; only the parsing, naming and explaining are here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.core.errors import PipelineError, option
from pipeline.engine.search import top_answers
from pipeline.softquery import Vocabulary, parse, to_text
from pipeline.stages.witness_records import Explanation


@dataclass(frozen=True)
class Ranking:
    """One query's answers: ``frame`` (rank, eid, name, utility; best first, finite utility > 0 only: the rows
    of ``pipeline query --json``), ``explanations`` (one per explained answer, best first), the normalised
    ``query`` text, the ``source`` answered, ``n_answers`` before the top cut, ``approximate`` (a cycle cap
    made utilities lower bounds) and ``empty_reason`` (one line when nothing answers).

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Ranking)][:3]
    ['frame', 'explanations', 'query']
    """

    frame: pd.DataFrame
    explanations: list[Explanation]
    query: str
    source: str
    n_answers: int
    approximate: bool
    empty_reason: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list, repr=False)  # the frame's rows as JSON records

    def __repr__(self) -> str:
        """What ``pipeline query`` prints: the query and its source, then the answers, or the one line
        saying why there is none (a notebook cell ending in ``pl.query(...)`` shows it)."""
        head = f"{self.query}   [{self.source}; {self.n_answers} answers" + (", approximate]" if self.approximate else "]")
        if self.empty_reason:
            return f"{head}\n{self.empty_reason}"
        return f"{head}\n{self.frame.to_string(index=False)}"


def ask(
    text: str,
    dataset: str,
    *,
    graph: str | None = None,
    adjacency: str | Path | None = None,
    top: int | None = 20,
    cycle_cap: int | None = None,
    device: str = "cpu",
    explain: bool | int = False,
    calibration: Sequence[str | Path] = (),
) -> Ranking:
    """Parse text against the data set's vocabulary and answer it on exactly one source: an observed graph
    (train|valid|test) or a neural adjacency export directory (with the saved ``calibration`` files of
    ``pipeline answer``). top None: every answer. explain: True explains every row returned, a number K
    the first K of them."""
    from loaders import load
    from pipeline.core.checks import check_int, check_text
    from pipeline.formats.engine_index import observed_index
    from pipeline.methods.src.method import SRC
    from pipeline.methods.src.saved import saved_label, saved_paths

    # the arguments of `pipeline query` and pl.query, checked here where both pass: one line naming each
    check_text(text, "text")
    check_text(dataset, "dataset")
    if top is not None:
        top = check_int(top, "top", 1)
    if cycle_cap is not None:
        cycle_cap = check_int(cycle_cap, "cycle_cap", 1)
    if not isinstance(explain, bool):
        explain = check_int(explain, "explain", 0)
    if isinstance(graph, str) and graph.lower() in ("train", "valid", "test"):
        graph = graph.lower()  # TEST is test, as a registry name in another case is that name
    if graph is not None and graph not in ("train", "valid", "test"):
        raise PipelineError(f"{option('graph', graph)}: expected train, valid or test")
    if adjacency is not None and not isinstance(adjacency, (str, Path)):
        raise PipelineError(f"{option('adjacency')}: expected an export folder, got {type(adjacency).__name__}")
    if (graph is None) == (adjacency is None):
        raise PipelineError(f"give exactly one of {option('graph')} (train, valid or test) or {option('adjacency')} "
                            "(a neural adjacency export folder)")
    kg = load(dataset)
    vocab = Vocabulary.from_kg(kg)
    query = parse(text, vocab)  # syntax and names fail fast, before any tensor work
    if graph is not None:
        src = SRC.over(observed_index(kg, graph, device), kg.name)
        source, where = f"graph {graph}", f"on graph {graph}"
    else:
        from pipeline.core.versions import KEY, check_versions
        from pipeline.store.ingest import content_key

        src = SRC.load(adjacency, kg.name, device=device, kg=kg)
        # the query's names are resolved in the data set as it is now: the export's ids must mean the same
        check_versions(kg.name, [(f"the data set '{kg.name}' as it is now", content_key(kg)),
                                 (f"the export {adjacency}", src.manifest.get(KEY))])
        threshold = src.manifest.get("threshold")
        source, where = f"adjacency {adjacency} (threshold {threshold})", f"in the export (facts >= {threshold})"
    # the facts as stored, for the reason of an empty answer: the index answered with (an export's is kept
    # per export in this process: a notebook's next pl.query reads no file), before calibration L
    stored = src.adjacency
    if calibration:
        if adjacency is None:
            raise PipelineError(f"{option('calibration')} applies to a neural adjacency export ({option('adjacency')}), "
                                f"not {option('graph')}")
        d_file, l_dir = saved_paths(calibration)
        src = src.apply_saved(l_dir=l_dir, delta_file=d_file)
        source = f"{source}, calibration {saved_label(d_file, src.delta, l_dir)}"
    src = replace(src, cycle_cap=cycle_cap)
    res = src.search([query])
    answered = src.queries_as_answered([query])[0]  # alphas lowered by D's delta, as SRC answers
    util = res.utility[0]
    ids, vals = top_answers(util, k=util.numel())
    names = vocab.entities
    rows = [
        {"eid": int(e), "name": names[int(e)], "utility": round(float(v), 6)}
        for e, v in zip(ids[:top].tolist(), vals[:top].tolist(), strict=True)
    ]
    explanations = []
    if explain:
        from pipeline.engine.witness import find_witnesses
        from pipeline.stages.witness_records import OBSERVED, PREDICTED, witness_record

        found = OBSERVED if graph is not None else PREDICTED
        shown = rows if explain is True else rows[: int(explain)]
        assert src.adjacency is not None
        ws = find_witnesses(answered, src.adjacency, [r["eid"] for r in shown], cycle_cap)
        capped = bool(res.approximate[0])
        # the utility shown is the answer's (as ranked), the witness may reach more under a cycle cap
        explanations = [
            Explanation.of(i + 1, witness_record(replace(w, utility=float(util[w.answer])), answered, vocab, found, capped))
            for i, w in enumerate(ws)
        ]
    reason = None
    if ids.numel() == 0:
        from pipeline.engine.empty import empty_reason_text

        assert stored is not None
        # a calibration's lowered alphas are in `answered`; L's confidences are not in `stored`
        reason = empty_reason_text(answered, stored, vocab, where + (" before calibration L" if calibration else ""))
    frame = pd.DataFrame(rows, columns=["eid", "name", "utility"])
    frame.insert(0, "rank", range(1, len(frame) + 1))
    return Ranking(frame, explanations, to_text(answered, vocab), source, int(ids.numel()),
                   bool(res.approximate[0]), reason, rows)
