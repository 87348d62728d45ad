"""Soft queries: the model (terms, atoms, conjunctions, DNF queries), the text grammar (parse / to_text),
the query graph, name resolution and the 12 query types.

>>> q = parse("#1(#2002, ?x, 0.24, 0.1) & #0(?x, ?y)")
>>> to_text(q)
'#1(#2002, ?x, 0.24, 0.1) & #0(?x, ?y)'
"""

from pipeline.softquery.graph import QueryGraph
from pipeline.softquery.model import FREE, Atom, Conjunction, Const, Query, Term, Var
from pipeline.softquery.parser import parse
from pipeline.softquery.printer import to_text
from pipeline.softquery.types import QUERY_TYPES, TRAIN_TYPES, QueryType, get_type, type_of
from pipeline.softquery.vocab import Vocabulary

__all__ = [
    "FREE",
    "QUERY_TYPES",
    "TRAIN_TYPES",
    "Atom",
    "Conjunction",
    "Const",
    "Query",
    "QueryGraph",
    "QueryType",
    "Term",
    "Var",
    "Vocabulary",
    "get_type",
    "parse",
    "to_text",
    "type_of",
]
