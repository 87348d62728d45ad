"""Query sets for training, calibration and evaluation (design section 1).

Walks over the graph store (Cypher) ground the query types, soft requirements set alpha and beta, the
exact engine computes ground truth on the observed graphs, and valid/test queries are kept only when
useful. Query sets are Parquet files (:func:`read_query_set`); published SQUK files import into the same
format (:func:`import_squk`).

>>> qs = read_query_set("queries/ppi5k_test_zero_equal.parquet")
>>> qs.frame[["id", "type", "text"]].head(); qs.queries()[0]
"""

from pipeline.sampling.queryset import QuerySet, read_query_set, write_query_set

__all__ = ["QuerySet", "read_query_set", "write_query_set"]
