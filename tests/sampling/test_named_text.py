"""Sampled query sets carry their text with names (a notebook showed
``#0(#25, ?y, 1, 0.1)`` only)."""

from __future__ import annotations

import pipeline as pl
from loaders import load
from pipeline.softquery import Vocabulary, parse


def test_named_text_parses_to_the_same_query_as_the_id_text(women, tmp_path):
    qs = pl.sample("women", split="test", alpha="normal", beta="random", per_type=3, seed=0, out=tmp_path,
                   types="1p,2i,up", progress=False, browse=False)
    vocab = Vocabulary.from_kg(load("women"))
    assert list(qs.frame.columns[:3]) == ["id", "type", "text"] and "named_text" in qs.frame
    for text, named in zip(qs.frame["text"], qs.frame["named_text"], strict=True):
        assert "#" in text and "#" not in named
        assert parse(named, vocab) == parse(text, vocab)
    # names with spaces are quoted, relations by name
    assert qs.frame["named_text"].str.contains('"').any()
    assert qs.frame["named_text"].str.match(r"^!?\(?(attends|co_attends|shares_guests)\(").all()
