"""The published SQUK benchmark query files: reading them (:mod:`.files`) and importing them as our query
sets with our engine's answers beside the published ones (the `pipeline import-squk` stage,
:mod:`pipeline.stages.import_squk`)."""
