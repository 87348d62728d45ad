"""The browse page shows whole names ("Evelyn Jefferso…" on a Southern Women page):
a node whose name has a word too wide for NVL's default caption gets a smaller caption size and a node
wide enough to keep the font; checked on the page graph and, as a person sees it, in headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipeline as pl
from loaders import load
from pipeline.core.kg import observed_graph
from pipeline.methods import SRC
from pipeline.stages.answer import AnswerOptions, answer_queries
from pipeline.stages.browse import SMALL_CAPTION_NODE, WORD_FITS, WORD_FITS_SMALL, read_page_graph, write_page
from tests.answer.test_browse import CHROMIUM, rendered_font_sizes


@pytest.fixture
def women_page(women, tmp_path: Path):
    qs = pl.sample("women", split="test", alpha="zero", beta="equal", per_type=2, seed=0, out=tmp_path / "q",
                   types="2p", progress=False)
    method = SRC.over(observed_graph(load("women"), "test"), "women", backbone="observed")
    answer_queries(qs.path, method, AnswerOptions(out=str(tmp_path / "a"), explain=2, write_back=True,
                                                  store=women["uri"], progress=False))
    qid = str(qs.frame["id"].iloc[0])
    return read_page_graph(women["store"], qid, dataset="women"), tmp_path


def test_every_node_caption_is_the_whole_name_sized_to_fit(women_page):
    g, _ = women_page
    entities = [n for n in g.nodes if n["id"].startswith("e:")]
    assert entities and all(n["caption"] == n["properties"]["name"] for n in entities)  # never shortened
    long = [n for n in entities if max(len(w) for w in n["properties"]["name"].split()) > WORD_FITS]
    assert long, "expected a Southern Women name with a long word (Jefferson, Anderson, ...)"
    for n in long:
        assert n["caption_size"] == 1 and n["size"] >= SMALL_CAPTION_NODE
    for i, a in enumerate(g.nodes):  # the grown nodes still keep apart
        for b in g.nodes[i + 1:]:
            assert ((a["x"] - b["x"]) ** 2 + (a["y"] - b["y"]) ** 2) ** 0.5 >= a["size"] + b["size"], (a["id"], b["id"])


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (Debian package chromium) on this machine")
def test_names_are_drawn_whole_in_chromium(women_page):
    pytest.importorskip("neo4j_viz", reason="the [browse] extra (neo4j-viz) is not installed")
    g, tmp_path = women_page
    page = write_page(g, tmp_path / "page.html")
    # every word that fits a node at caption size 1 is drawn whole (before: "Jefferso…", "Anderso…");
    # a longer one (Oglethorpe, Mandeville: 10 letters) is still cut by NVL
    words = {w for n in g.nodes if n["id"].startswith("e:") for w in n["caption"].split() if len(w) <= WORD_FITS_SMALL}
    drawn = rendered_font_sizes(page, tmp_path, sorted(words))
    assert words <= set(drawn), f"not drawn whole: {sorted(words - set(drawn))}"
    assert min(drawn[w] for w in words) >= 10  # this page's zoom: 10-16 px
