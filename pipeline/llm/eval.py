"""Accuracy of multiple-choice answers per query type, with a 95% Wilson interval, for every model asked
and for SRC's pick on the same items. Pure functions over item and response records."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.softquery.types import ordered_types

Z95 = 1.959963984540054

# The paper's table (CN15k items, accuracy %): 370 items, 100 1p, 50 2p, 100 2i, 50 2in, 15 2il, 10 2m,
# 15 3in, 15 ip, 15 im; only the overall accuracy is published.
PAPER_ACCURACY = {
    "Llama3.3-70B": 42.6,
    "Gemini-1.5-pro": 37.1,
    "GPT-3.5-turbo": 34.3,
    "GPT-4-preview": 37.8,
    "SRC": 48.9,
}


def wilson(correct: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion correct/n, as fractions (0, 0 when n = 0)."""
    if n == 0:
        return (0.0, 0.0)
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def credit(pick: str | Sequence[str] | None, correct: str) -> float:
    """1 for the right letter; for a tie of letters (a list), 1/len when it holds the right one (the
    expected credit of a random choice among them); 0 otherwise."""
    if pick is None:
        return 0.0
    if isinstance(pick, str):
        return float(pick == correct)
    return 1.0 / len(pick) if correct in pick else 0.0


def accuracy_table(
    items: Sequence[Mapping[str, Any]], picks: Mapping[str, str | Sequence[str] | None]
) -> dict[str, dict]:
    """Per type and 'all': {n, correct, accuracy, low, high, no_letter} (accuracy/low/high in %).

    picks: item id -> the chosen letter, or a list of tied letters (credited 1/len, so correct may be
    fractional); None = no clear letter, counted wrong; an item without a pick, e.g. a request that
    failed, also counts wrong and is counted in no_letter."""
    rows: dict[str, dict[str, Any]] = {}
    for it in items:
        pick = picks.get(it["id"])
        for key in (str(it["type"]), "all"):
            r = rows.setdefault(key, {"n": 0, "correct": 0, "no_letter": 0})
            r["n"] += 1
            r["correct"] += credit(pick, it["correct"])
            r["no_letter"] += int(pick is None)
    out = {}
    for key in [*ordered_types([k for k in rows if k != "all"]), "all"]:
        if key not in rows:
            continue
        r = rows[key]
        lo, hi = wilson(r["correct"], r["n"])
        out[key] = {
            **r,
            "accuracy": 100.0 * r["correct"] / r["n"] if r["n"] else 0.0,
            "low": 100.0 * lo,
            "high": 100.0 * hi,
        }
    return out


def src_picks(items: Sequence[Mapping[str, Any]]) -> dict[str, str | list[str] | None]:
    """SRC's pick of each item that carries one (built with an adjacency export): its letter, or the list
    of letters tied at SRC's best utility (items written before ``tied`` existed: the letter)."""
    out: dict[str, str | list[str] | None] = {}
    for it in items:
        src = it.get("src")
        if isinstance(src, Mapping):
            tied = src.get("tied")
            out[it["id"]] = list(tied) if isinstance(tied, list) and len(tied) > 1 else src["pick"]
    return out


def model_picks(records: Sequence[Mapping[str, Any]]) -> dict[str, str | None]:
    """The parsed letter of each response record (None for failed requests and unclear replies)."""
    return {r["id"]: (r["letter"] if r.get("status") == "ok" else None) for r in records}


def markdown(tables: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """One row per method, one column per type and 'all': 'accuracy [low, high]' in %, n in the header."""
    types: list[str] = []
    for t in tables.values():
        types += [k for k in t if k not in types]
    ordered = [*ordered_types([k for k in types if k != "all"]), "all"]
    first = next(iter(tables.values()), {})
    head = "| method | " + " | ".join(f"{k} (n={first.get(k, {}).get('n', 0)})" for k in ordered) + " |"
    lines = [head, "|---|" + "---:|" * len(ordered)]
    for name, t in tables.items():
        cells = [
            f"{t[k]['accuracy']:.1f} [{t[k]['low']:.1f}, {t[k]['high']:.1f}]" if k in t else "-"
            for k in ordered
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
