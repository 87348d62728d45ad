"""A benchmark record as Markdown: what the runner prints and what docs/benchmarks.md shows (through
tools/tables_benchmarks.py), one renderer for both. Reads only the record: no torch, no pipeline import."""

from __future__ import annotations

from typing import Any

ARROWS = {">=": "≥", "<=": "≤"}


def number(value: float, spec: str | None = None) -> str:
    """A figure as the tables show it: ``spec`` if given; else integers with thousands separators and
    floats to three significant figures or so (1,234 / 56.7 / 0.89 / 0.0044)."""
    if spec:
        return format(value, spec)
    if isinstance(value, int):
        return f"{value:,}"
    a = abs(value)
    if a >= 100 or a == 0:
        return f"{value:,.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 0.1:
        return f"{value:.2f}"
    return f"{value:.2g}"


def cell(value: Any, spec: str | None = None) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return number(value, spec)
    return str(value).replace("|", "\\|")


def table(t: dict[str, Any]) -> list[str]:
    cols, formats = t["columns"], t.get("formats") or {}

    def number_column(i: int) -> bool:
        cells = [r[i] for r in t["rows"] if r[i] is not None]
        return bool(cells) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cells)

    numeric = [number_column(i) for i in range(len(cols))]
    out = [f"**{t['title']}**", ""] if t.get("title") else []
    out.append("| " + " | ".join(cell(c) for c in cols) + " |")
    out.append("|" + "|".join("---:" if n and i else "---" for i, n in enumerate(numeric)) + "|")
    out += [
        "| " + " | ".join(cell(v, formats.get(c)) for c, v in zip(cols, row, strict=True)) + " |"
        for row in t["rows"]
    ]
    return out


def machine_line(m: dict[str, Any]) -> str:
    """One line: the machine as recorded (or as a transcribed page described it)."""
    if m.get("description"):
        return m["description"]
    parts = [
        f"{m.get('cores')} cores {m.get('arch') or ''}".rstrip() + (f" ({m['cpu']})" if m.get("cpu") else "")
    ]
    if m.get("memory_gib"):
        parts.append(f"{m['memory_gib']:g} GiB")
    if m.get("torch"):
        parts.append(f"torch {m['torch']}")
    parts.append(m["gpu"] if m.get("gpu") else "no GPU")
    load = m.get("load") or []
    if load:
        parts.append("load average " + " → ".join(f"{x:g}" for x in load))
    return ", ".join(parts)


def provenance(r: dict[str, Any]) -> str:
    """The record's command, machine and date, in one line."""
    line = f"`{r['command']}`"
    if r.get("rerun"):
        line += f" (the suite: `{r['rerun']}`)"
    line += f" · {machine_line(r['machine'])} · {r['date']}"
    if r.get("quick"):
        line += " · quick size"
    return line


def goal_text(g: dict[str, Any]) -> str:
    unit = f" {g['unit']}" if g.get("unit") else ""
    return f"{g['text']} {ARROWS[g['direction']]} {g['target']:,g}{unit}"


def verdict(g: dict[str, Any]) -> str:
    if g.get("value") is None:
        return "not measured"
    return f"{number(g['value'])}, " + ("met" if g["met"] else "**not met**")


def record(r: dict[str, Any], with_goals: bool = True) -> str:
    """The Markdown of one record: its provenance line, its goals (a page with the goals' own table leaves
    them out), its tables, its notes."""
    out = [provenance(r), ""]
    goals = [g for g in r["goals"] if g.get("value") is not None] if with_goals else []
    if goals:
        out += [f"- Goal: {goal_text(g)}. Now: {verdict(g)}." for g in goals] + [""]
    for t in r["tables"]:
        out += table(t) + [""]
    out += [f"{n}" for n in r.get("notes", [])]
    return "\n".join(out).rstrip("\n")


def goals(doc: dict[str, Any], where: dict[str, str] | None = None) -> str:
    """Every goal against its current figure: one row per record, each goal it measures with its figure now,
    and where the record's tables are (``where``: record key -> Markdown, e.g. a link); then each goal of a
    benchmark that none of its records measures, as "not measured"."""
    where = where or {}
    rows, seen, every = [], set(), {}
    for key, r in doc["benchmarks"].items():
        measured = []
        for g in r["goals"]:
            every.setdefault(r["benchmark"], {}).setdefault(g["key"], g)
            if g.get("value") is not None:
                seen.add((r["benchmark"], g["key"]))
                measured.append(f"{goal_text(g)}; now {verdict(g)}")
        if measured:
            rows.append([f"`{key}`", "<br>".join(measured), r["date"].split(" ")[0], where.get(key, "-")])
    for name, gs in every.items():
        rows += [
            [f"`{name}`", f"{goal_text(g)}; not measured", "-", "-"]
            for k, g in gs.items()
            if (name, k) not in seen
        ]
    head = ["| record | goals, and the figure now | measured | tables |", "|---|---|---|---|"]
    return "\n".join(head + ["| " + " | ".join(row) + " |" for row in rows])
