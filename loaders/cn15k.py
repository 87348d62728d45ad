"""CN15k: a ConceptNet subset of 15,000 concepts and 36 relations (commonsense)."""

from loaders.base import DatasetSpec, FileSpec

_BEURRE = "https://raw.githubusercontent.com/stasl0217/beurre/main/data/cn15k/"
_UKGE = "https://raw.githubusercontent.com/stasl0217/UKGE/master/data/cn15k/"

SPEC = DatasetSpec(
    name="cn15k",
    domain="commonsense",
    description="ConceptNet subset (the soft-query literature's split, from BEUrRE)",
    files=(
        FileSpec("train", "train.tsv", _BEURRE + "train.tsv", "8bf2ecc8f34e7b3b544afc30abaac478", 204_984),
        FileSpec("val", "val.tsv", _BEURRE + "val.tsv", "15b63ebd7428a262ad5fe869cc944208", 16_881),
        FileSpec("test", "test.tsv", _BEURRE + "test.tsv", "ecb192193d56f571a7226277e425bb43", 34_154),
        FileSpec(
            "entities",
            "concept_id.csv",
            _BEURRE + "concept_id.csv",
            "6521c98ecfa9c37757bc3649334030a1",
            15_001,
        ),
        FileSpec(
            "relations",
            "relation_id.csv",
            _BEURRE + "relation_id.csv",
            "d32a58e5281aeb5ab23b5612163655b8",
            37,
        ),
        FileSpec(
            "softlogic", "softlogic.tsv", _UKGE + "softlogic.tsv", "0a40d2fc220e548cbe7c77e5f62c4752", 7_927
        ),
    ),
    n_entities=15_000,
    n_relations=36,
    id_format="ids",
    id_map_header=True,
    # positive rows per split as read (test: 34,154 lines = 17,077 facts + 17,077 sampled negatives)
    facts={"train": 204_984, "val": 16_881, "test": 17_077},
)
