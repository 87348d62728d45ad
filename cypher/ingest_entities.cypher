// One (:Entity) per row {eid, name} of data set $dataset (portable path; FalkorDB uses GRAPH.BULK).
UNWIND $rows AS row
CREATE (:Entity {dataset: $dataset, eid: row.eid, name: row.name})
