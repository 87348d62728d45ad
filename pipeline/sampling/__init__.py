"""Sampling query sets from the graph store (design section 1): Cypher walks ground the query types
(:mod:`.walks`), soft requirements set alpha and beta (:mod:`.requirements`, :mod:`.levels`), the exact
engine computes the ground truth on the observed graphs (:mod:`.truth`), and valid/test queries are kept only
when useful (:mod:`.useful`). :mod:`.sampler` runs one split; the `pipeline sample` stage is
:mod:`pipeline.stages.sample`.
The query-set file format is :mod:`pipeline.formats.queryset`.
"""

from __future__ import annotations

# What sampling draws for the same inputs (data, seed, settings), including the alpha levels ingest stores
# on the relation vocabulary. Bumped whenever that changes (2: the SQUK benchmark's alpha-level definition;
# 3: the whole tie group at the top-100 cut of the ground truth; 4: valid and test sets keep the list the SQUK
# generator would have written, answers_paper), and part of the ingest and sample stage keys of `pipeline
# reproduce` (and its baselines and studies), so a reproduction never reuses a store or a query set written by
# older code.
SAMPLING_VERSION = 4

# Every sample size's bound whatever the graph (pipeline.sampling.capacity bounds it by the graph): twenty
# times the largest set of the literature (CN15k's 53,000 train queries per type); sampling that many takes
# hours already. Here, light, so that the options can declare it (the command line imports them at start).
MAX_PER_TYPE = 1_000_000
