"""The front door: README.md a newcomer reads in ten minutes (the two commands, CI's own test command, the
notebook and the site within reach), no page naming a work item's number, and the documentation site built
with warnings as errors, its reference generated from the code (every command, every API function), its pages
drawn by a real browser. The site test skips where mkdocs (``pip install -e '.[docs]'``) or Chromium is absent;
.ci/run builds the site itself, with the tutorial notebook executed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
ISSUE = re.compile(r"\b[Ii]ssues? ?#?\d+")


def _pages() -> list[Path]:
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    # the test command it gives is the one CI runs
    ci = (REPO / ".ci" / "run").read_text()
    (ci_command,) = [ln.strip() for ln in ci.splitlines() if ln.strip().startswith("python -m pytest")]
    assert f"```bash\n{ci_command}\n```" in text
    # the install command installs the notebook extra, so that command runs the notebook test, and says so
    install = _bash_blocks(text)[0]
    assert install.startswith("python3 -m venv") and "pip install -e '.[dev,notebook]'" in install
    assert "tests/test_notebook.py" in text
    assert "examples/researcher_day.ipynb" in text and "mkdocs serve" in text
    assert "INSTALL_TIME" not in text and "TEST_TIME" not in text  # the measured times filled in
    # what opens the notebook is what the notebook extra installs
    (notebook,) = re.findall(r"^notebook = \[(.*)\]$", (REPO / "pyproject.toml").read_text(), re.M)
    assert re.search(r'"jupyterlab\b', notebook), notebook
    assert "jupyter lab examples/researcher_day.ipynb" in text
    # the store a command starts keeps running: said, with how to stop it
    assert "keeps running" in text and "`pipeline store stop`" in text


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def test_the_commands_to_copy_fit_their_box() -> None:
    """Every line of a command block of the README and of Getting started (what a newcomer copies) fits the
    site's code box, about 80 characters, with no horizontal scroll: long commands are split with `\\`."""
    wide = [f"{page.name}: {ln}" for page in (README, REPO / "docs" / "getting-started.md")
            for block in _bash_blocks(page.read_text(encoding="utf-8")) for ln in block.splitlines() if len(ln) > 80]
    assert wide == []


def test_the_test_count_is_written_once() -> None:
    """The suite's size is stated in Getting started only; the README points there (two counts drifted apart)."""
    readme, started = README.read_text(encoding="utf-8"), (REPO / "docs" / "getting-started.md").read_text()
    count = re.compile(r"\b\d[\d,]* tests\b")
    assert count.findall(readme) == [] and len(count.findall(started)) == 1
    assert "(docs/getting-started.md#run-the-tests)" in readme


def test_no_page_names_an_issue_number() -> None:
    found = [f"{p.relative_to(REPO)}:{i}: {ln.strip()[:100]}" for p in _pages()
             for i, ln in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if ISSUE.search(ln)]
    assert found == []


def test_every_doc_page_is_in_the_site() -> None:
    """A page in docs/ but not in mkdocs.yml's nav would be built but unreachable."""
    nav = (REPO / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    pages |= {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.ipynb")}
    missing = sorted(p for p in pages if f": {p}" not in nav)
    assert missing == []


def _commands(group, path: str = "pipeline"):
    """Every (command path, command) under ``group``, groups included."""
    for name, command in sorted(group.commands.items()):
        yield f"{path} {name}", command
        if hasattr(command, "commands"):
            yield from _commands(command, f"{path} {name}")


def test_every_command_summary_is_a_whole_sentence() -> None:
    """The one-line summaries of `pipeline --help` and of the command-line reference (mkdocs-click takes
    a command's short help, else its docstring's first line) are whole sentences, never cut mid-sentence
    (click's "..." or a docstring wrapped after its first line), and fit `pipeline --help`'s column."""
    from click.testing import CliRunner

    from pipeline.cli import cli

    commands = dict(_commands(cli))
    assert len(commands) >= 20
    cut = {}
    for path, command in commands.items():
        text = command.short_help or ""
        if not (text[:1].isupper() and text.endswith(".") and "..." not in text and "\n" not in text):
            cut[path] = text or (command.help or "").splitlines()[0]
    assert cut == {}
    # as the user reads them: each summary whole on its one line of `pipeline --help` / `pipeline store --help`
    for group_args, group in (([], cli), (["store"], cli.commands["store"])):
        shown = CliRunner().invoke(cli, [*group_args, "--help"]).output.splitlines()
        for name, command in group.commands.items():
            assert any(ln.split()[:1] == [name] and ln.endswith(command.short_help) for ln in shown), name
    mkdocs_click = pytest.importorskip("mkdocs_click._docs")
    page = "\n".join(mkdocs_click.make_command_docs("pipeline", cli, depth=1, list_subcommands=True))
    listed = re.findall(r"^- \*(?:\[)?([\w-]+)(?:\]\(#[\w-]+\))?\*: (.*)$", page, re.M)
    assert {name for name, _ in listed} >= set(cli.commands)
    for name, summary in listed:
        assert summary.endswith(".") and "..." not in summary, (name, summary)


@pytest.mark.slow
def test_the_site_builds_strict_and_shows_its_pages(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocs_click")
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("mkdocs_jupyter")
    import pipeline as pl
    from pipeline.cli import cli

    site = tmp_path / "site"
    env = {**os.environ, "SITE_EXECUTE_NOTEBOOKS": "false", "NO_MKDOCS_2_WARNING": "1",
           "PIPELINE_HOME": str(tmp_path / "home")}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    cli_page = (site / "reference" / "cli.html").read_text()
    for name in cli.commands:  # every command, from the code
        assert f'id="{name}"' in cli_page or f">{name}<" in cli_page, name
    api_page = (site / "reference" / "api.html").read_text()
    for name in (n for n in pl.__all__ if n[0].islower()):  # every function of the API, from its docstring
        assert f'id="pipeline.api.{name}"' in api_page, name
    assert "{options}" not in api_page and ":class:`" not in api_page and "Sentinel" not in cli_page
    assert "train_per_type" in api_page  # the declared options, as the signature help() shows
    for html in site.rglob("*.html"):
        assert not ISSUE.search(re.sub(r"<[^>]+>", " ", html.read_text())), html
    # opened from disk (file://, no server), as the README says: every link of every page names a file
    assert _links_not_to_files(site) == []

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed: the pages were built and their links checked, not drawn")
    from PIL import Image

    # index.html from disk, then the pages its links lead to, as a click resolves them under file://
    index = (site / "index.html").as_uri()
    hrefs = re.findall(r'href="([^"#]+)"', (site / "index.html").read_text())
    followed = [next(h for h in hrefs if h.startswith(page)) for page in ("getting-started", "reference/cli",
                                                                          "reference/api")]
    for url in (index, *(urljoin(index, h) for h in followed)):
        shot = tmp_path / (url.rsplit("/", 1)[-1] + ".png")
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={tmp_path / 'chromium'}", "--hide-scrollbars", "--window-size=1280,900",
                        f"--screenshot={shot}", url], capture_output=True, timeout=120, check=False)
        assert shot.exists(), url
        img = Image.open(shot).convert("RGB")
        colours = img.getcolors(maxcolors=1 << 16) or []
        # drawn: the theme's header bar (indigo) and text, not a blank page or a directory listing
        assert len(colours) > 50, url
        assert img.getpixel((10, 10))[2] > img.getpixel((10, 10))[0], url  # the header's indigo at the top left


def _links_not_to_files(site: Path) -> list[str]:
    """Every relative ``href``/``src`` of the built pages that does not name a file (a directory, a missing
    path) under ``site``: what a reader opening the site from disk would meet as a listing or an error.
    404.html is left out: only a server shows it, and its links are absolute by design."""
    bad = []
    for html in site.rglob("*.html"):
        if html.name == "404.html":
            continue
        for url in re.findall(r'(?:href|src)="([^"]*)"', html.read_text()):
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or not parts.path:
                continue
            if not (html.parent / unquote(parts.path)).resolve().is_file():
                bad.append(f"{html.relative_to(site)}: {url}")
    return bad
