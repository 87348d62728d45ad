"""`pipeline browse QUERY_ID --html FILE`: an interactive page of one stored query's answer subgraph, read
from the graph store with the browsing statement (cypher/browse_query.cypher) and drawn with neo4j-viz
(the Neo4j Visualization Library, NVL, wrapped for Python; the `[browse]` extra), no hand-written JS.

What the page shows: the query node, its anchors, its ranked answers (edge width by utility) and, for each
explained answer, the atoms of its witness as edges head -> tail labelled with the relation and the
confidence used (width by confidence; colour by source: observed, predicted, missing; negated atoms in red).
An atom shared by several answers' witnesses is drawn once. Above the graph, as plain HTML: the query text
with names and the ranked answers with their witnesses, so the page reads without the canvas too.

:func:`page_graph` is pure (rows in, nodes and edges out); only :func:`write_page` needs neo4j-viz.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError

# colours a person tells apart (and a legend names)
QUERY, ANCHOR, ANSWER, VIA = "#6A1B9A", "#F57C00", "#2E7D32", "#78909C"
OBSERVED_COLOR, PREDICTED_COLOR, MISSING_COLOR = "#1B5E20", "#1565C0", "#9E9E9E"
SOURCE_COLORS = {"observed": OBSERVED_COLOR, "predicted": PREDICTED_COLOR, "missing": MISSING_COLOR}
NEGATED, LINK = "#C62828", "#B0BEC5"
INSTALL = "pip install 'soft-queries[browse]'  (or: pip install neo4j-viz)"


@dataclass
class PageGraph:
    """What the page draws: nodes {id, caption, color, size, x, y, properties} and edges {id, source, target,
    caption, color, width, properties}, plus the text above the graph."""

    title: str
    query: str
    method: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)  # {rank, name, utility, assignment, atoms}


def find_query(store: Any, qid: str, dataset: str | None = None, set_name: str | None = None) -> dict[str, Any]:
    """The one stored query an id names: {dataset, set, text, error, methods}; PipelineError when none or
    several."""
    from pipeline.store import cypher_text

    found = store.run(cypher_text("browse_find"), {"qid": qid, "dataset": dataset, "set": set_name})
    if not found:
        raise PipelineError(f"no (:Query {{qid: '{qid}'}}) in the store" + (f" of '{dataset}'" if dataset else "")
                            + (f" in set '{set_name}'" if set_name else ""))
    if len(found) > 1:
        where = "; ".join(f"--dataset {r['dataset']} --set {r['set']}" for r in found)
        raise PipelineError(f"query id '{qid}' is in {len(found)} sets; name one: {where}")
    from pipeline.stages.writeback import check_set_version, dataset_version

    ds, name = found[0]["dataset"], found[0]["set"]
    check_set_version(store, ds, name, dataset_version(store, ds),
                      f"Sample a new set from the stored '{ds}' (`pipeline sample {ds} ...`), answer and write it back")
    return found[0]


def choose_method(methods: list[str], method: str | None, qid: str, written: list[str] | None = None) -> str:
    """The method whose answers the page draws. methods: those with answers to this query; written: those
    whose committed write-back of the query's set exists (holding answers to this query or not)."""
    written = sorted(set(written or ()) | set(methods))
    found_none = [m for m in written if m not in methods]  # written back, but nothing for this query

    def nothing(m: str) -> PipelineError:
        return PipelineError(f"query {qid} has no answers by method '{m}': its write-back holds none for this query "
                             "(the method predicted no entity above 0 for it)")

    if method is not None:
        if method in found_none:
            raise nothing(method)
        if method not in methods:
            raise PipelineError(f"query {qid} has no answers of method '{method}'; it has: {', '.join(methods) or 'none'}"
                                + (f" (written back without answers to it: {', '.join(found_none)})" if found_none else ""))
        return method
    if not methods and len(found_none) == 1:
        raise nothing(found_none[0])
    if not methods and found_none:
        raise PipelineError(f"query {qid} has no answers by any of the methods written back for its set "
                            f"({', '.join(found_none)}): none of them predicted an entity above 0 for it")
    if len(methods) != 1:
        hint = f"give --method, one of: {', '.join(repr(m) for m in methods)}" if methods else (
            "write answers back first: pipeline answer ... --write-back")
        raise PipelineError(f"query {qid} has answers of {len(methods)} methods; {hint}")
    return methods[0]


def _width(x: float | None, lo: float, hi: float) -> float:
    """An edge width in pixels for a value in [0, 1] (None or out of range clipped)."""
    x = 0.0 if x is None else min(max(float(x), 0.0), 1.0)
    return round(lo + (hi - lo) * x, 2)


def page_graph(rows: list[dict[str, Any]], method: str) -> PageGraph:
    """The page's graph from the browsing statement's rows (one per answer; pipeline.store rows, nodes and
    relationships as property maps) for one method."""
    rows = [r for r in rows if r["method"] == method]
    if not rows:
        raise PipelineError(f"no answers of method '{method}' stored for this query")
    q = rows[0]["q"]
    text = q.get("query") or q.get("text") or ""
    g = PageGraph(title=f"{q.get('dataset')} · {q.get('set')} · {q.get('qid')}", query=text, method=method)
    nodes: dict[str, dict[str, Any]] = {}
    qnode = f"q:{q.get('qid')}"
    nodes[qnode] = {"id": qnode, "caption": f"{q.get('type') or ''} query".strip(), "color": QUERY, "size": 44,
                    "properties": {"query": text, "type": q.get("type"), "set": q.get("set")}}

    def entity(e: dict[str, Any], color: str, caption: str | None = None, size: float = 40) -> str:
        key = f"e:{e['eid']}"
        if key not in nodes:
            nodes[key] = {"id": key, "caption": caption or e["name"], "color": color, "size": size,
                          "properties": {"name": e["name"], "eid": e["eid"]}}
        return key

    for a in rows[0]["anchors"]:
        g.edges.append({"id": f"anchor:{a['eid']}", "source": qnode, "target": entity(a, ANCHOR, size=44),
                        "caption": "", "color": LINK, "width": 1.5, "properties": {}})
    utilities = [r["answer"]["utility"] for r in rows if r["answer"]["utility"] is not None]
    top = max(utilities, default=1.0) or 1.0
    atoms_seen: set[str] = set()
    for r in rows:
        ans, e = r["answer"], r["entity"]
        u = ans["utility"]
        # the name alone fits the node (NVL cuts long captions); the rank is on the ANSWER edge
        key = entity(e, ANSWER, size=48 - min(int(ans["rank"]), 10))
        if nodes[key]["color"] != ANCHOR:  # an anchor stays an anchor (also the anchor of a negated atom)
            nodes[key]["color"] = ANSWER
        nodes[key]["role"] = ANSWER  # placed among the answers by rank, whatever its colour
        nodes[key]["properties"]["rank"] = ans["rank"]
        g.edges.append({"id": f"answer:{ans['rank']}", "source": qnode, "target": key,
                        "caption": f"#{ans['rank']} u={u:.3g}", "color": ANSWER,
                        "width": _width(u / top if u is not None and top > 0 else 0.0, 1.0, 4.0),
                        "properties": {"rank": ans["rank"], "utility": u, "truth_utility": ans.get("truth_utility")}})
        w = r.get("witness")
        atoms = sorted(r.get("atoms") or [], key=lambda a: a.get("position", 0))
        g.answers.append({"rank": ans["rank"], "name": e["name"], "utility": u,
                          "assignment": (w or {}).get("assignment", ""), "atoms": [a.get("text", "") for a in atoms]})
        joined = {j["eid"]: j for j in r.get("joined") or []}
        for a in atoms:
            akey = f"atom:{a['relation']}:{a['head_eid']}:{a['tail_eid']}:{a['negated']}"
            if akey in atoms_seen:
                continue
            atoms_seen.add(akey)
            head = entity(joined.get(a["head_eid"], {"eid": a["head_eid"], "name": a["head"]}), VIA)
            tail = entity(joined.get(a["tail_eid"], {"eid": a["tail_eid"], "name": a["tail"]}), VIA)
            neg = "NOT " if a["negated"] else ""
            g.edges.append({
                "id": akey, "source": head, "target": tail,
                "caption": f"{neg}{a['relation']} {a['confidence']:.3g}",  # the colour says observed/predicted/missing
                "color": NEGATED if a["negated"] else SOURCE_COLORS.get(a["source"], VIA),
                "width": _width(a["confidence"], 0.5, 4.5),
                "properties": {k: a.get(k) for k in ("relation", "head", "tail", "confidence", "source", "alpha",
                                                     "beta", "value", "negated", "branch")},
            })
    g.nodes = list(nodes.values())
    for n in g.nodes:
        fit_caption(n)
    place(g.nodes)
    return g


# where each kind of node goes around the query (angles in degrees, 0 = right, screen y grows downwards):
# anchors on the left, the witnesses' other entities above, the answers on an arc on the right (rank 1 on
# top), so a witness reads as a path anchor -> via -> answer and edges between answers stay visible chords
ARCS = {ANCHOR: (300.0, 150.0, 210.0), VIA: (260.0, 215.0, 325.0), ANSWER: (340.0, -75.0, 75.0)}
SHIFT_X = -100.0  # centre the drawing (NVL centres the origin)
STRETCH_X, STRETCH_Y = 1.5, 0.7  # a wide window: spread the arcs sideways, so names and edge labels get room
QUERY_Y = 110.0  # the query below the middle row: anchor -> answer edges do not run through it
ANSWERS_PER_COLUMN, ANSWER_ROW, ANSWER_COLUMN = 5, 120.0, 200.0
REFERENCE_CANVAS = (1400.0, 765.0)  # the graph's area in a 1400 x 900 window (85vh), for the initial zoom
# NVL's caption sizes: a node's font is a share of its diameter (3 = the largest, about half), an edge's is
# 6 px x caption_size at zoom 1; with the layout above NVL fits a page at a zoom near 1 in a 1400 x 900
# window, so names read at 12+ px and edge labels at 10+ px without zooming (tests/answer/test_browse.py)
NODE_CAPTION_SIZE, EDGE_CAPTION_SIZE = 2, 2
# NVL wraps a node's caption at spaces and cuts a word wider than the node ("Evelyn Jefferso…").
# Measured in headless Chromium (tests/answer/test_browse_names.py): at caption size 2 a word of up to 7
# characters fits whatever the node's size (the font grows with the node), at caption size 1 one of up to
# 9 ("Murchison" whole, "Oglethorp…" cut), legible (12+ px at the default zoom) from node size 60 on.
WORD_FITS, WORD_FITS_SMALL, SMALL_CAPTION_NODE = 7, 9, 60


def fit_caption(node: dict[str, Any]) -> None:
    """A node's caption sized to show its whole name where it can: caption size 1 (and a node big enough
    to keep it legible) for a word over WORD_FITS characters. A word over WORD_FITS_SMALL is still cut by
    NVL (breaking it ourselves drew "Pearl Ogle / thor‐ pe": worse); the name is in the node's properties
    and in the list above the graph."""
    if max((len(w) for w in str(node["caption"]).split()), default=0) > WORD_FITS:
        node["caption_size"] = 1
        node["size"] = max(node["size"], SMALL_CAPTION_NODE)


def place(nodes: list[dict[str, Any]]) -> None:
    """Fixed coordinates (x, y) for every node, by kind (answers by rank, the others in the given order): the page draws the same
    picture every time and needs no layout run in the browser to be readable."""
    import math

    groups: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        groups.setdefault(n.get("role", n["color"]), []).append(n)
    for kind, members in groups.items():
        if kind == QUERY:
            for n in members:
                n["x"], n["y"] = SHIFT_X, QUERY_Y
            continue
        radius, lo, hi = ARCS.get(kind, ARCS[VIA])
        if kind == ANSWER:  # best first from the top, whatever role the entity had when first met
            place_answers(sorted(members, key=lambda n: n["properties"].get("rank", 0)), radius)
            continue
        k = len(members)
        for i, n in enumerate(members):
            angle = math.radians((lo + hi) / 2 if k == 1 else lo + (hi - lo) * i / (k - 1))
            n["x"] = round(SHIFT_X + STRETCH_X * radius * math.cos(angle), 1)
            n["y"] = round(STRETCH_Y * radius * math.sin(angle), 1)


def place_answers(members: list[dict[str, Any]], radius: float) -> None:
    """Answers in columns of at most ANSWERS_PER_COLUMN on the right, rank 1 top left, each column bowed
    like an arc and every other one shifted by half a row: busy pages keep their nodes apart, and the edges
    to the answers of one column do not run along those of the next."""
    rows = min(len(members), ANSWERS_PER_COLUMN)
    # nodes grown for long names (fit_caption) get the room they take
    step = max(ANSWER_ROW, 2 * max((n["size"] for n in members), default=0) + 4)
    across = max(ANSWER_COLUMN, 2 * max((n["size"] for n in members), default=0) + 80)
    for i, n in enumerate(members):
        col, row = divmod(i, ANSWERS_PER_COLUMN)
        y = (row - (rows - 1) / 2 + (col % 2) / 2) * step
        bow = step * rows / 2 + 1
        x = SHIFT_X + STRETCH_X * radius + col * across - 60 * (y / bow) ** 2
        n["x"], n["y"] = round(x, 1), round(y, 1)


def initial_view(nodes: list[dict[str, Any]]) -> tuple[float, tuple[float, float]]:
    """(zoom, pan centre) that show every node in REFERENCE_CANVAS with a margin: NVL draws coordinate
    layouts at a fixed zoom otherwise (0.75 measured), where captions come out at 5-7 px."""
    if not nodes:
        return 1.0, (0.0, 0.0)
    pad = 1.12  # a margin around the outermost nodes
    xs = [n["x"] for n in nodes]
    ys = [n["y"] for n in nodes]
    r = max(n["size"] for n in nodes)
    w, h = max(xs) - min(xs) + 2 * r, max(ys) - min(ys) + 2 * r
    zoom = min(REFERENCE_CANVAS[0] / (w * pad), REFERENCE_CANVAS[1] / (h * pad), 2.0)
    return round(zoom, 3), (round((max(xs) + min(xs)) / 2, 1), round((max(ys) + min(ys)) / 2, 1))


def read_page_graph(store: Any, qid: str, method: str | None = None, dataset: str | None = None,
                    set_name: str | None = None) -> PageGraph:
    """Find the query, choose the method, run the browsing statement and build the page's graph."""
    from pipeline.store import cypher_text

    found = find_query(store, qid, dataset, set_name)
    if found.get("error") and not found["methods"]:
        raise PipelineError(
            f"query {qid}'s text did not parse, so it has no answers to draw: {found['error']} "
            f"(text: {found.get('text')!r}); fix the node's text and run `pipeline answer --from-store ... --write-back`"
        )
    chosen = choose_method(sorted(found["methods"]), method, qid, found.get("written"))
    rows = store.run(cypher_text("browse_query"), {"dataset": found["dataset"], "set": found["set"], "qid": qid})
    return page_graph(rows, chosen)


def _header(g: PageGraph) -> str:
    """The static HTML above the graph: the query with names, the method, the legend, the answers."""
    e = html.escape
    items = []
    for a in g.answers:
        why = f" — {e(a['assignment'])}" if a["assignment"] else ""
        atoms = "".join(f"<li><code>{e(t)}</code></li>" for t in a["atoms"])
        u = "" if a["utility"] is None else f"{a['utility']:.4g}"
        items.append(f"<li><b>{e(a['name'])}</b> u={u}{why}{f'<ul>{atoms}</ul>' if atoms else ''}</li>")
    legend = " ".join(f'<span style="color:{c}">■ {name}</span>' for name, c in (
        ("query", QUERY), ("anchor", ANCHOR), ("answer", ANSWER), ("via", VIA), ("observed", SOURCE_COLORS["observed"]),
        ("predicted", SOURCE_COLORS["predicted"]), ("missing", SOURCE_COLORS["missing"]), ("negated", NEGATED)))
    return (
        '<header style="padding:8px 16px;font-family:system-ui,sans-serif;font-size:14px">'
        f'<div style="font-size:18px"><b>{e(g.query)}</b></div>'
        f"<div>{e(g.title)} · method <b>{e(g.method)}</b> · {legend}</div>"
        f'<details><summary>answers ({len(g.answers)}), best first, with their witnesses</summary>'
        f'<ol id="answers">{"".join(items)}</ol></details></header>'
    )


def render_html(g: PageGraph) -> str:
    """The page as one self-contained HTML string (neo4j-viz inlines NVL); the same graph gives the same
    bytes (neo4j-viz's random container id is replaced by one derived from the graph)."""
    try:
        from neo4j_viz import Layout, Node, Relationship, VisualizationGraph
    except ImportError:
        raise PipelineError(f"pipeline browse draws with the neo4j-viz package, which is not installed: {INSTALL}") from None
    nodes = [Node(id=n["id"], caption=n["caption"], color=n["color"], size=n["size"], x=n["x"], y=n["y"],
                  caption_size=n.get("caption_size", NODE_CAPTION_SIZE), properties=n["properties"]) for n in g.nodes]
    rels = [Relationship(id=r["id"], source=r["source"], target=r["target"], caption=r["caption"], color=r["color"],
                         width=r["width"], caption_size=EDGE_CAPTION_SIZE,
                         properties={k: v for k, v in r["properties"].items() if v is not None})
            for r in g.edges]
    vg = VisualizationGraph(nodes, rels)
    # the coordinates of place(): the layout button of the page still offers NVL's force-directed layout
    zoom, pan = initial_view(g.nodes)
    page = vg.render(layout=Layout.COORDINATE, width="100%", height="85vh", theme="light", initial_zoom=zoom,
                     pan_position=pan).data
    digest = hashlib.sha256(repr((g.title, g.method, g.nodes, g.edges)).encode()).hexdigest()[:12]
    page = re.sub(r"neo4j-viz-[0-9a-f]{12}", f"neo4j-viz-{digest}", page)
    page = page.replace("<title>neo4j-viz</title>", f"<title>{html.escape(g.query)}</title>", 1)
    return page.replace("<body>", f"<body>{_header(g)}", 1)


def write_page(g: PageGraph, path: str | Path) -> Path:
    """Render and write the page atomically; returns its path."""
    from pipeline.core import atomic

    text = render_html(g)
    out = Path(path)
    atomic.write_with(out, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return out


def browse(qid: str, html_path: str | Path, method: str | None = None, dataset: str | None = None,
           set_name: str | None = None, store_uri: str | None = None) -> dict[str, Any]:
    """`pipeline browse`: read the query's answer subgraph from the store and write the page. Returns
    {path, dataset, set, method, query, nodes, edges, answers}."""
    from pipeline.store import open_store

    with open_store(store_uri) as store:
        g = read_page_graph(store, qid, method, dataset, set_name)
    path = write_page(g, html_path)
    return {"path": str(path), "title": g.title, "method": g.method, "query": g.query, "nodes": len(g.nodes),
            "edges": len(g.edges), "answers": [a["name"] for a in g.answers]}
