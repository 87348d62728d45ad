"""The artifact formats, one module each: query sets (:mod:`.queryset`), answers (:mod:`.answers`),
neural adjacency exports (:mod:`.adjacency`) and results tables (:mod:`.results`). Run directories are
owned by :mod:`pipeline.models.runs`. Every file is written through :mod:`pipeline.core.atomic` and its metadata
carries the provenance of :mod:`pipeline.core.provenance`, sealed with a digest (:mod:`.meta`)."""
