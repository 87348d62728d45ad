"""Sampling query sets from the graph store (design section 1): Cypher walks ground the query types
(:mod:`.walks`), soft requirements set alpha and beta (:mod:`.requirements`, :mod:`.levels`), the exact
engine computes the ground truth on the observed graphs (:mod:`.truth`), and valid/test queries are kept only
when useful (:mod:`.useful`). :mod:`.sampler` runs one split, :mod:`.run` the whole `pipeline sample` stage.
The query-set file format is :mod:`pipeline.formats.queryset`.
"""
