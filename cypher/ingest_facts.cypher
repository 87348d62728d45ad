// One relationship per distinct (h, r, t) of relation $rid; {REL} is its validated type.
// A null confidence leaves the property absent: the fact is not in that nested graph.
// $entity_dataset: the `dataset` of the endpoint entities (a staging name while an ingest is staged; the
// relationship itself always carries $dataset, and readers reach it only through its entities).
UNWIND $rows AS row
MATCH (h:Entity {dataset: $entity_dataset, eid: row.h})
MATCH (t:Entity {dataset: $entity_dataset, eid: row.t})
CREATE (h)-[:{REL} {dataset: $dataset, rid: $rid, conf_train: row.conf_train, conf_valid: row.conf_valid, conf_test: row.conf_test}]->(t)
