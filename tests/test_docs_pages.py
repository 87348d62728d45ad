"""The documentation's generated tables (tools/pages.py): the mechanism on hand-made pages, and every table of
docs/ equal to what its data renders today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pages():
    spec = importlib.util.spec_from_file_location("_tools_pages", ROOT / "tools" / "pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pages = _pages()
TABLES = {"t.one": lambda docs: "| a |\n|---|\n| 1 |", "t.two": lambda docs: f"from {docs.name}"}


def test_a_block_is_replaced_by_its_table_and_the_rest_is_kept_byte_for_byte():
    text = "# Title\n\nprose\n<!-- table t.one -->\nold stale row\n<!-- /table -->\nafter\n"
    new, changed = pages.render_page(text, TABLES, Path("docs"))
    assert new == "# Title\n\nprose\n<!-- table t.one -->\n| a |\n|---|\n| 1 |\n<!-- /table -->\nafter\n"
    assert changed == ["t.one"]
    again, changed_again = pages.render_page(new, TABLES, Path("docs"))
    assert again == new and changed_again == []


def test_two_blocks_each_get_their_own_table():
    text = "<!-- table t.two -->\n<!-- /table -->\nx\n<!-- table t.one -->\n| a |\n|---|\n| 1 |\n<!-- /table -->"
    new, changed = pages.render_page(text, TABLES, Path("site/docs"))
    assert new.split("\n")[1] == "from docs"
    assert changed == ["t.two"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a\n<!-- table nope -->\n<!-- /table -->", "page.md:2: no table named 'nope' (known: t.one, t.two)"),
        ("a\nb\n<!-- table t.one -->\n| a |", "page.md:3: table 't.one' is never closed"),
        ("<!-- /table -->", "page.md:1: '<!-- /table -->' closes no open table"),
        ("<!-- table t.one -->\n<!-- table t.two -->\n<!-- /table -->", "page.md:2: a table opens inside table 't.one'"),
    ],
)
def test_a_wrong_marker_names_the_page_and_line(text, message):
    with pytest.raises(pages.PageError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        pages.render_page(text, TABLES, Path("docs"), "page.md")


def test_check_writes_nothing_and_names_the_stale_block(tmp_path):
    page = tmp_path / "sub" / "p.md"
    page.parent.mkdir()
    page.write_text("<!-- table t.one -->\nstale\n<!-- /table -->\n", encoding="utf-8")
    assert pages.regenerate(tmp_path, check=True, tables=TABLES) == ["sub/p.md: t.one"]
    assert "stale" in page.read_text(encoding="utf-8")
    assert pages.regenerate(tmp_path, check=False, tables=TABLES) == ["sub/p.md: t.one"]
    assert pages.regenerate(tmp_path, check=True, tables=TABLES) == []


def test_every_generated_table_of_the_docs_matches_its_data():
    stale = pages.regenerate(ROOT / "docs", check=True)
    assert stale == [], "run `python tools/pages.py` to regenerate: " + ", ".join(stale)
