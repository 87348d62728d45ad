"""O*NET20k: jobs, skills, abilities and their levels (employment). Entities and relations are named in
the triple files, e.g. `Job_27-1021.00  has_ability_LV  1.A.1.b.2  0.6257143`; ids are assigned in order
of first appearance over train, valid, test."""

from loaders.base import DatasetSpec, FileSpec

_ZIP = "https://s3-eu-west-1.amazonaws.com/ampligraph/datasets/onet20k.zip"

SPEC = DatasetSpec(
    name="onet20k",
    domain="employment",
    description="O*NET jobs and skills (AmpliGraph's load_onet20k)",
    files=(
        FileSpec(
            "train", "train.tsv", _ZIP, "516220427a9a18516fd7a804a6944d64", 461_932, archive="onet20k.zip"
        ),
        FileSpec("val", "valid.tsv", _ZIP, "d7806951ac3d916c5c5a0304eea064d2", 850, archive="onet20k.zip"),
        FileSpec("test", "test.tsv", _ZIP, "e5baec19037cb0bddc5a2fe3c0f4445a", 2_000, archive="onet20k.zip"),
    ),
    n_entities=20_643,
    n_relations=19,
    id_format="names",
    facts={"train": 461_932, "val": 850, "test": 2_000},
)
