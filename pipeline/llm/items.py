"""Multiple-choice items from a soft query set (paper: "The accuracy of manually annotated queries").

One item per kept query: the prompt (:mod:`pipeline.llm.prompt`), four candidates for ``?y`` and the letter
of the correct one. The rules, stated once here and in docs/llm.md:

- **True utility**: the exact engine's utility of every entity on the observed graph of the query set's
  split (the graph its ground truth comes from). An entity with a finite utility > 0 is an *answer*; any
  other entity is a *non-answer* and counts as utility 0 for the margin.
- **Candidates**: the correct one has the highest true utility among the readable answers (drawn among
  those of that utility; the question asks for the best of the four shown, not of all entities). Each next candidate is drawn among the readable answers of the highest
  utility that is at least ``margin`` below the previous candidate's; when no such answer is left, one
  readable non-answer (drawn uniformly) takes the next place if the previous candidate's utility is at
  least ``margin`` (a second non-answer would tie with it). So the four true utilities, best first, differ pairwise by at least ``margin``; a query without four
  such candidates gives no item (reason ``no 4 candidates``).
- **Readable**: every entity named in the prompt (anchors and candidates) has a name of at most 40
  characters with at least two letters, no digit, and used by no other entity (so the prompt never falls
  back to ``#id``); a query whose anchors are not readable gives no item (reason ``unreadable anchor``).
- **Shuffle**: the four candidates are put in a random order drawn from a generator seeded by
  ``(seed, crc32(query id))``, so an item does not depend on which other queries were built.

Items JSONL, one object per line: id, type, dataset, split, query (text with names), query_ids (the query
set's ``#id`` text), prompt, candidates [{letter, eid, name, true_utility (null = non-answer)}], correct
(letter), margin, seed; with an adjacency export, ``src`` {utilities (per letter, null = fails), pick}.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import jsontext
from pipeline.core.errors import DataFormatError, PipelineError, printable
from pipeline.llm.prompt import LETTERS, anchors, render_prompt
from pipeline.softquery.printer import to_text
from pipeline.softquery.vocab import Vocabulary

# The paper's 370 items per type (1p 100, 2p 50, 2i 100, 2in 50, 2il 15, 2m 10, 3in 15, ip 15, im 15).
PAPER_COUNTS = {"1p": 100, "2p": 50, "2i": 100, "2in": 50, "2il": 15, "2m": 10, "3in": 15, "ip": 15, "im": 15}
DEFAULT_MARGIN = 0.1
DOMAINS = {
    "cn15k": "commonsense (ConceptNet)",
    "ppi5k": "protein-protein interaction (STRING)",
    "onet20k": "occupations, skills and abilities (O*NET)",
}
MAX_NAME = 40
_LETTER = re.compile(r"[^\W\d_]")


def readable_name(name: str) -> bool:
    """The readability rule for one entity name: <= 40 characters, >= 2 letters, no digit."""
    return len(name) <= MAX_NAME and len(_LETTER.findall(name)) >= 2 and not any(c.isdigit() for c in name)


def readable_mask(vocab: Vocabulary) -> np.ndarray:
    """(n_entities,) bool: the entity's name is readable and names it alone."""
    return np.array(
        [readable_name(n) and vocab.entity_unique(i) for i, n in enumerate(vocab.entities)], dtype=bool
    )


def choose_candidates(
    utility: np.ndarray, readable: np.ndarray, margin: float, rng: np.random.Generator
) -> list[int] | None:
    """Four entity ids, best first, by the rule of the module docstring; None when there are not four.

    utility: (n_entities,) true utilities (-inf = fails); readable: (n_entities,) bool."""
    u = np.asarray(utility, dtype=np.float64)
    answer = np.isfinite(u) & (u > 0)
    ok = answer & readable
    if not ok.any():
        return None
    top = u[ok].max()
    best = np.flatnonzero(ok & (u == top))
    chosen = [int(rng.choice(best))]
    prev = top
    eps = 1e-9  # utilities are float32 sums; a margin of exactly 0.1 must count as 0.1
    while len(chosen) < len(LETTERS):
        below = ok & (u <= prev - margin + eps)
        if below.any():
            level = u[below].max()
            pick = int(rng.choice(np.flatnonzero(below & (u == level))))
            chosen.append(pick)
            prev = level
            continue
        if prev < margin - eps:
            return None
        non = np.flatnonzero(~answer & readable)
        non = non[~np.isin(non, chosen)]
        if len(non) == 0:
            return None
        chosen.append(int(rng.choice(non)))
        prev = 0.0
        if len(chosen) < len(LETTERS):
            return None  # a second non-answer would tie with the first
    return chosen


def check_margin(margin: Any) -> float:
    """The least difference between two candidates' true utilities: a finite number > 0 (an infinite one
    leaves no candidate below the best, so every query would be dropped without a useful word)."""
    from pipeline.core.checks import check_float
    from pipeline.core.errors import option

    return check_float(margin, option("margin"), 0.0, None, lo_open=True)


def item_rng(seed: int, query_id: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(str(query_id).encode())])


@dataclass(frozen=True)
class BuildReport:
    """What a build kept and dropped: items per type, dropped queries by reason."""

    kept: dict[str, int]
    dropped: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"kept": self.kept, "dropped": self.dropped, "items": sum(self.kept.values())}


def build_items(
    queries: Any,
    vocab: Vocabulary,
    true_utility: Any,
    margin: float = DEFAULT_MARGIN,
    seed: int = 0,
    counts: Mapping[str, int] | None = None,
    dataset: str | None = None,
) -> tuple[list[dict[str, Any]], BuildReport]:
    """Items from a query set (pipeline.sampling.QuerySet), in the query set's order.

    true_utility(list of Query) -> (B, n_entities) array of true utilities; counts: at most this many items
    per type (types absent are skipped; None = every query)."""
    check_margin(margin)
    frame = queries.frame
    dataset = dataset or str(queries.meta.get("dataset", ""))
    readable = readable_mask(vocab)
    parsed = queries.queries()
    want = [i for i, t in enumerate(frame["type"].astype(str)) if counts is None or counts.get(t, 0) > 0]
    dropped: Counter[str] = Counter()
    usable = []
    for i in want:
        if all(readable[e] for e in anchors(parsed[i])):
            usable.append(i)
        else:
            dropped["unreadable anchor"] += 1
    kept: Counter[str] = Counter()
    items: list[dict[str, Any]] = []
    # one engine call per type keeps batches of one shape; utilities of queries past a full quota are
    # computed but cheap next to building the graph
    by_type: dict[str, list[int]] = {}
    for i in usable:
        by_type.setdefault(str(frame["type"].iloc[i]), []).append(i)
    order = {i: k for k, i in enumerate(usable)}
    built: dict[int, dict[str, Any]] = {}
    for qtype, idx in by_type.items():
        util = np.asarray(true_utility([parsed[i] for i in idx]), dtype=np.float64)
        for row, i in zip(util, idx, strict=True):
            if counts is not None and kept[qtype] >= counts.get(qtype, 0):
                dropped["over the type's count"] += 1
                continue
            qid = str(frame["id"].iloc[i])
            rng = item_rng(seed, qid)
            cands = choose_candidates(row, readable, margin, rng)
            if cands is None:
                dropped["no 4 candidates"] += 1
                continue
            perm = rng.permutation(len(LETTERS))
            shown = [cands[p] for p in perm]
            correct = LETTERS[int(np.flatnonzero(perm == 0)[0])]
            names = [vocab.entities[e] for e in shown]
            built[i] = {
                "id": qid,
                "type": qtype,
                "dataset": dataset,
                "split": queries.meta.get("split"),
                "query": to_text(parsed[i], vocab),
                "query_ids": str(frame["text"].iloc[i]),
                "prompt": render_prompt(parsed[i], vocab, names, DOMAINS.get(dataset, dataset)),
                "candidates": [
                    {
                        "letter": letter,
                        "eid": int(e),
                        "name": vocab.entities[e],
                        "true_utility": float(row[e]) if np.isfinite(row[e]) and row[e] > 0 else None,
                    }
                    for letter, e in zip(LETTERS, shown, strict=True)
                ],
                "correct": correct,
                "margin": margin,
                "seed": int(seed),
            }
            kept[qtype] += 1
    items = [built[i] for i in sorted(built, key=order.__getitem__)]
    return items, BuildReport(dict(kept), dict(dropped))


def src_choice(items: list[dict[str, Any]], predicted: Any, queries: list[Any]) -> None:
    """Add SRC's pick to each item in place: ``src`` = {utilities per letter (None = fails), pick}.

    predicted(list of Query) -> (B, n_entities) predicted utilities. The pick is the candidate with the
    highest predicted utility (listed by entity id among equals); ``tied`` lists every letter sharing that
    utility (e.g. all fail), and accuracy credits a tie 1/len(tied) when it holds the right letter, as a
    random choice among them would: ids never decide."""
    if not items:
        return
    util = np.asarray(predicted(queries), dtype=np.float64)
    for item, row in zip(items, util, strict=True):
        eids = [c["eid"] for c in item["candidates"]]
        vals = [float(row[e]) for e in eids]
        best = sorted(range(len(eids)), key=lambda k: (-vals[k], eids[k]))[0]
        item["src"] = {
            "utilities": [v if np.isfinite(v) else None for v in vals],
            "pick": LETTERS[best],
            "tied": [LETTERS[k] for k in range(len(eids)) if vals[k] == vals[best]],
        }


# ------------------------------------------------------------------------------------------------ files


def write_items(items: list[dict[str, Any]], path: str | Path) -> Path:
    """JSONL, atomically (a crash never leaves a half file under the final name)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps(it, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


REQUIRED = ("id", "type", "prompt", "candidates", "correct")


def read_items(path: str | Path) -> list[dict[str, Any]]:
    """Items JSONL; DataFormatError names the file, line and field of the first bad item."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataFormatError(path, None, None, f"cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise DataFormatError(path, line, None, f"not valid UTF-8 (byte {exc.object[exc.start]:#04x})") from None
    items, seen = [], set()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            it = jsontext.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, n, None, f"not JSON ({exc.msg})") from None
        if not isinstance(it, dict):
            raise DataFormatError(path, n, None, "an item must be a JSON object")
        for f in REQUIRED:
            if f not in it:
                raise DataFormatError(path, n, f, "missing")
        if it["correct"] not in LETTERS:
            raise DataFormatError(path, n, "correct", f"{it['correct']!r} is not one of {', '.join(LETTERS)}")
        if not isinstance(it["candidates"], list) or len(it["candidates"]) != len(LETTERS):
            raise DataFormatError(path, n, "candidates", f"expected {len(LETTERS)} candidates")
        if it["id"] in seen:
            raise DataFormatError(path, n, "id", f"{it['id']!r} appears twice")
        seen.add(it["id"])
        items.append(it)
    return items


def parse_counts(text: str | None) -> dict[str, int] | None:
    """--per-type: 'paper' (the paper's 370), 'all' (None), a number for every type of the paper's list,
    or 'TYPE=N,...' (each TYPE a query type in any case, once; each N at least 1). Anything else is one
    PipelineError naming the part: a type name that is none (with the close ones) is never dropped."""
    from pipeline.core.errors import option
    from pipeline.sampling import MAX_PER_TYPE
    from pipeline.softquery.types import QUERY_TYPES

    if text is None:
        return dict(PAPER_COUNTS)
    shown = option("per_type", text)
    word = text.strip().lower()
    if word == "paper":
        return dict(PAPER_COUNTS)
    if word == "all":
        return None

    def count(raw: str, part: str) -> int:
        digits = raw.strip()
        if not re.fullmatch(r"[0-9]+", digits):  # ASCII digits only: int() also reads '²' and '1_0'
            raise PipelineError(f"{shown}: expected paper, all, N or TYPE=N,... (bad part {part!r})")
        n = int(digits) if len(digits) <= 18 else MAX_PER_TYPE + 1  # (int() of 5,000 digits is an error)
        if not 1 <= n <= MAX_PER_TYPE:  # 0 items of a type is leaving the type out
            raise PipelineError(f"{shown}: bad count in {printable(part, 40)!r}; give 1 to {MAX_PER_TYPE:,} items "
                                "(leave a type out to take none of it)")
        return n

    if "=" not in text:
        n = count(text, text)
        return {t: n for t in PAPER_COUNTS}
    out: dict[str, int] = {}
    for part in text.split(","):
        name, sep, n = part.partition("=")
        if not sep:
            raise PipelineError(f"{shown}: expected paper, all, N or TYPE=N,... (bad part {part!r})")
        try:
            qtype = QUERY_TYPES.canonical(name.strip())
        except PipelineError as exc:
            raise PipelineError(f"{shown}: {exc}") from None
        if qtype in out:
            raise PipelineError(f"{shown}: type {qtype} is given twice")
        out[qtype] = count(n, part)
    return out
