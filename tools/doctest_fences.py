"""A griffe extension for the API reference (mkdocs.yml, mkdocstrings): the doctest examples of the
project's docstrings (``>>>`` lines and the output under them) shown as Python console code blocks, instead
of being read as Markdown text (where ``[f.name for f in ...][:3]`` looks like a link), and the docstrings'
Sphinx cross-references (``:class:`~pipeline.formats.queryset.QuerySet```) shown as code (the last name)."""

from __future__ import annotations

import re
from typing import Any

import griffe

# :class:`X`, :func:`~a.b.X`, :meth:`X <a.b.X>` ...: the name a reader knows, as code
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc):`~?([^`<]+?)(?:\s*<[^>]+>)?`")


def plain_roles(text: str) -> str:
    """Sphinx roles as code spans of their last name.

    >>> plain_roles("returns a :class:`~pipeline.formats.queryset.QuerySet`, see :mod:`pipeline.api`")
    'returns a `QuerySet`, see `pipeline.api`'
    """
    return _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1] if m.group(0).find('~') > 0 else m.group(1)}`", text)


def fence_doctests(text: str) -> str:
    r"""``text`` with each run of doctest lines (a ``>>>`` line, its ``...`` continuations and the output
    lines up to the next blank line) inside a ``pycon`` fenced block.

    >>> fence_doctests("Intro.\n\n>>> 1 + 1\n2\n\nAfter.").splitlines()
    ['Intro.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'After.']
    """
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        starts = line.lstrip().startswith(">>>")
        if starts and not inside:
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)


_OPTION = re.compile(r"^\s*([a-z_]+)((?: \(default .*?\))?): (.*)$")


def option_lists(text: str) -> str:
    r"""The options an API function's docstring lists after ``Options:`` (one ``name (default x): help``
    line each, :func:`pipeline.core.options.options_doc`) as a Markdown list.

    >>> option_lists("Options:\n\n    top (default 20): answers shown\n    seed (default 0): the seed\n\nMore.").splitlines()
    ['Options:', '', '- `top` (default 20): answers shown', '- `seed` (default 0): the seed', '', 'More.']
    """
    out: list[str] = []
    listing = False
    for line in text.splitlines():
        if line.rstrip().endswith("Options:"):
            listing = True
            out += [line, ""]
            continue
        m = _OPTION.match(line) if listing else None
        if m:
            out.append(f"- `{m.group(1)}`{m.group(2)}: {m.group(3)}")
        elif listing and not line.strip():
            if out and out[-1] != "":
                out.append("")
                listing = False
        else:
            listing = False
            out.append(line)
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences every docstring's doctests (see :func:`fence_doctests`)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(fence_doctests(option_lists(obj.docstring.value)))
