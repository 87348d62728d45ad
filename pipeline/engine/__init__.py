"""The SRC engine: exact max-plus search over the query graph (design section 2).

>>> adj = Adjacency.from_graph(observed_graph(kg, "test"))   # index once
>>> u = search_query(parse("#0(#12, ?y)"), adj)               # (n_entities,) float32, -inf = fails
>>> ids, vals = top_answers(u, k=10)
"""

from pipeline.engine.adjacency import Adjacency, as_adjacency
from pipeline.engine.search import SearchResult, search_batch, search_query, solve, top_answers

__all__ = ["Adjacency", "SearchResult", "as_adjacency", "search_batch", "search_query", "solve", "top_answers"]
