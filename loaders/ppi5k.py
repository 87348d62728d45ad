"""PPI5k: a STRING protein-protein interaction subset of 4,999 proteins and 7 relations (biology)."""

from loaders.base import DatasetSpec, FileSpec

_UKGE = "https://raw.githubusercontent.com/stasl0217/UKGE/master/data/ppi5k/"
# The id maps ship inside OpenUKGE's data/ppi5k.zip (branch dataset-branch).
_IDS = "https://raw.githubusercontent.com/Chienking1997/OpenUKGE/dataset-branch/data/ppi5k.zip"

SPEC = DatasetSpec(
    name="ppi5k",
    domain="biology",
    description="STRING protein-protein interactions (UKGE's split)",
    files=(
        FileSpec("train", "train.tsv", _UKGE + "train.tsv", "d8b54de3482c0d043118cbd05f2666cf", 230_929),
        FileSpec("val", "val.tsv", _UKGE + "val.tsv", "2bd094118f4be1f4f6d6a1d4707271c1", 19_017),
        FileSpec("test", "test.tsv", _UKGE + "test.tsv", "7e6e345f496ed9a0cc58b91d4877ddd6", 21_720),
        FileSpec(
            "entities", "entity_id.csv", _IDS, "8480c66b9b45e1c16d841326228552ab", 4_999, archive="ppi5k.zip"
        ),
        FileSpec(
            "relations", "relation_id.csv", _IDS, "7076ee67df3cc8d1d29aea174c690ab7", 7, archive="ppi5k.zip"
        ),
        FileSpec(
            "softlogic", "softlogic.tsv", _UKGE + "softlogic.tsv", "80e04b88aa8f458aacdc19422d2e55ed", 85_299
        ),
    ),
    n_entities=4_999,
    n_relations=7,
    id_format="ids",
    id_map_header=False,
    facts={"train": 230_929, "val": 19_017, "test": 21_720},
)
