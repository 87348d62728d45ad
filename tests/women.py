"""A small real graph for the notebook-friction tests: Davis's Southern Women (18 women, 14 events,
89 attendances; Davis, Gardner & Gardner 1941, as in networkx's ``davis_southern_women_graph``) as an
uncertain KG of 32 entities, 3 relations and 499 facts whose confidences come from the data:

- ``attends(woman, event)``: the share of the 18 women at that event;
- ``co_attends(a, b)``: the share of a's events that b attended too (a != b, at least one in common);
- ``shares_guests(e, f)``: the share of e's guests who came to f too (e != f, at least one in common).

Each relation joins its own kinds of entity (woman->event, woman->woman, event->event), so no entity pair is
joined by two relations: the multi-edge query types 2m and im cannot exist on this graph. Names have spaces
("Evelyn Jefferson").
"""

from __future__ import annotations

from pathlib import Path

ATTENDANCE = {
    "Evelyn Jefferson": (1, 2, 3, 4, 5, 6, 8, 9),
    "Laura Mandeville": (1, 2, 3, 5, 6, 7, 8),
    "Theresa Anderson": (2, 3, 4, 5, 6, 7, 8, 9),
    "Brenda Rogers": (1, 3, 4, 5, 6, 7, 8),
    "Charlotte McDowd": (3, 4, 5, 7),
    "Frances Anderson": (3, 5, 6, 8),
    "Eleanor Nye": (5, 6, 7, 8),
    "Pearl Oglethorpe": (6, 8, 9),
    "Ruth DeSand": (5, 7, 8, 9),
    "Verne Sanderson": (7, 8, 9, 12),
    "Myra Liddel": (8, 9, 10, 12),
    "Katherina Rogers": (8, 9, 10, 12, 13, 14),
    "Sylvia Avondale": (7, 8, 9, 10, 12, 13, 14),
    "Nora Fayette": (6, 7, 9, 10, 11, 12, 13, 14),
    "Helen Lloyd": (7, 8, 10, 11, 12),
    "Dorothy Murchison": (8, 9),
    "Olivia Carleton": (9, 11),
    "Flora Price": (9, 11),
}


def women_facts() -> list[tuple[str, str, str, float]]:
    """The 499 (head, relation, tail, confidence) facts, in a fixed order."""
    events = {f"E{i}": {w for w, evs in ATTENDANCE.items() if i in evs} for i in range(1, 15)}
    women = {w: {f"E{i}" for i in evs} for w, evs in ATTENDANCE.items()}
    facts = [(w, "attends", e, round(len(events[e]) / len(women), 4)) for w in women for e in sorted(
        women[w], key=lambda e: int(e[1:]))]
    for a in women:
        for b in women:
            if a != b and women[a] & women[b]:
                facts.append((a, "co_attends", b, round(len(women[a] & women[b]) / len(women[a]), 4)))
    for e in events:
        for f in events:
            if e != f and events[e] & events[f]:
                facts.append((e, "shares_guests", f, round(len(events[e] & events[f]) / len(events[e]), 4)))
    return facts


def write_women_tsv(path: str | Path) -> Path:
    """The graph as a named-triple TSV (``pipeline ingest NAME --from PATH``)."""
    path = Path(path)
    lines = ["head\trelation\ttail\tconfidence"] + [f"{h}\t{r}\t{t}\t{c}" for h, r, t, c in women_facts()]
    path.write_text("\n".join(lines) + "\n")
    return path
