"""One query, answered from a data set's observed graph or a neural adjacency export: the work behind
`pipeline query` (no graph store needed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.engine.search import solve, top_answers
from pipeline.errors import PipelineError
from pipeline.kg import GraphTensors, observed_graph
from pipeline.query import Vocabulary, parse, to_text


@dataclass(frozen=True)
class Ranking:
    """Ranked answers: rows of {"eid", "name", "utility"} best first (finite utility > 0 only)."""

    query: str  # the normalised text (DNF, names where unambiguous)
    source: str  # "graph test" or "adjacency DIR"
    rows: list[dict]
    n_answers: int  # before the top-k cut
    approximate: bool


def ask(
    text: str,
    dataset: str,
    graph: str | None = None,
    adjacency: str | Path | None = None,
    top: int = 20,
    cycle_cap: int | None = None,
    device: str = "cpu",
) -> Ranking:
    """Parse text against the data set's vocabulary and answer it on exactly one source: an observed graph
    (train|valid|test) or a neural adjacency export directory."""
    from loaders import load

    if (graph is None) == (adjacency is None):
        raise PipelineError("give exactly one of --graph train|valid|test or --adjacency DIR")
    kg = load(dataset)
    vocab = Vocabulary.from_kg(kg)
    query = parse(text, vocab)  # syntax and names fail fast, before any tensor work
    if graph is not None:
        tensors: GraphTensors = observed_graph(kg, graph, device)
        source = f"graph {graph}"
    else:
        from pipeline.formats.adjacency import load_adjacency

        tensors, meta = load_adjacency(adjacency, kg.name, device, kg.n_entities, kg.n_relations)
        source = f"adjacency {adjacency} (threshold {meta.get('threshold')})"
    res = solve([query], tensors, cycle_cap)
    util = res.utility[0]
    ids, vals = top_answers(util, k=util.numel())
    names = vocab.entities
    rows = [
        {"eid": int(e), "name": names[int(e)], "utility": round(float(v), 6)}
        for e, v in zip(ids[:top].tolist(), vals[:top].tolist(), strict=True)
    ]
    return Ranking(to_text(query, vocab), source, rows, int(ids.numel()), bool(res.approximate[0]))
