"""Splitting one file of named facts into train/valid/test deterministically, and checking given splits:
every relation, head and tail of valid/test must occur in train (a model cannot embed what it never saw)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.core.errors import DataFormatError, PipelineError


def parse_fractions(text: str) -> tuple[float, float, float]:
    """``--split 0.8,0.1,0.1`` -> three fractions summing to 1 (train > 0)."""
    if not isinstance(text, str):
        raise PipelineError(f"--split {text!r}: expected three numbers, e.g. 0.8,0.1,0.1")
    try:
        parts = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise PipelineError(f"--split {text!r}: expected three numbers, e.g. 0.8,0.1,0.1") from None
    # every part finite and >= 0, train > 0, summing to 1 (NaN passed the old comparisons and wrote NaN
    # fractions). 1,0,0 is a data set to query only: training refuses it (no valid facts to select on)
    if (len(parts) != 3 or not all(math.isfinite(p) and p >= 0 for p in parts) or parts[0] <= 0
            or abs(sum(parts) - 1.0) > 1e-6):
        raise PipelineError(f"--split {text!r}: expected three fractions >= 0 summing to 1, train > 0, e.g. 0.8,0.1,0.1")
    return parts  # type: ignore[return-value]


def split_triples(
    heads: np.ndarray, relations: np.ndarray, tails: np.ndarray, movable: np.ndarray,
    fractions: tuple[float, float, float], seed: int,
) -> np.ndarray:
    """Assign each distinct triple (integer codes) a split 0 = train, 1 = val, 2 = test.

    Triples are visited in a seeded random order; one moves to val (then test) only while its head,
    tail and relation keep at least one other triple in train, so every val/test fact's head, tail and
    relation occurs in train. Greedy, so a very sparse graph may get fewer val/test facts than asked."""
    n = len(heads)
    want_val, want_test = round(fractions[1] * n), round(fractions[2] * n)
    n_ent = int(max(heads.max(initial=-1), tails.max(initial=-1))) + 1
    deg = np.bincount(heads, minlength=n_ent) + np.bincount(tails, minlength=n_ent)
    rel = np.bincount(relations, minlength=int(relations.max(initial=-1)) + 1)
    out = np.zeros(n, dtype=np.int8)
    moved = 0
    for i in np.random.default_rng(seed).permutation(n):
        if moved >= want_val + want_test:
            break
        h, r, t = heads[i], relations[i], tails[i]
        if not movable[i] or rel[r] < 2:
            continue
        if (h == t and deg[h] < 3) or (h != t and (deg[h] < 2 or deg[t] < 2)):
            continue
        deg[h] -= 1
        deg[t] -= 1
        rel[r] -= 1
        out[i] = 1 if moved < want_val else 2
        moved += 1
    return out


def split_rows(rows: pd.DataFrame, fractions: tuple[float, float, float], seed: int) -> dict[str, pd.DataFrame]:
    """Split named rows (head, relation, tail, conf, line) by distinct triple; all rows of a triple go
    together, confidence-0 triples stay in train."""
    ent_codes, _ = pd.factorize(pd.concat([rows["head"], rows["tail"]], ignore_index=True), sort=True)
    h, t = ent_codes[: len(rows)], ent_codes[len(rows):]
    r, _ = pd.factorize(rows["relation"], sort=True)
    keys = pd.DataFrame({"h": h, "r": r, "t": t, "conf": rows["conf"].to_numpy()})
    triples = keys.groupby(["h", "r", "t"], sort=True, as_index=False)["conf"].mean()
    which = split_triples(
        triples["h"].to_numpy(), triples["r"].to_numpy(), triples["t"].to_numpy(),
        (triples["conf"] > 0).to_numpy(), fractions, seed,
    )
    triples["split"] = which
    split = keys.merge(triples[["h", "r", "t", "split"]], on=["h", "r", "t"], how="left")["split"].to_numpy()
    return {role: rows[split == k].reset_index(drop=True) for k, role in enumerate(("train", "val", "test"))}


def check_seen(tables: dict[str, pd.DataFrame], files: dict[str, Path]) -> None:
    """Every relation, head and tail of val/test occurs in train; else DataFormatError at the first row."""
    train = tables["train"]
    ents = set(train["head"]) | set(train["tail"])
    rels = set(train["relation"])
    for role in ("val", "test"):
        tab = tables[role]
        for fld, known in (("relation", rels), ("head", ents), ("tail", ents)):
            bad = ~tab[fld].isin(known).to_numpy()
            if bad.any():
                j = int(np.argmax(bad))
                kind = "relation" if fld == "relation" else "entity"
                raise DataFormatError(
                    files[role], int(tab["line"].iloc[j]), fld,
                    f"{kind} {tab[fld].iloc[j]!r} does not occur in train (every {kind} of valid/test must)",
                )


