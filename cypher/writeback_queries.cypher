// Write-back, step 2: the (:Query) nodes (keyed like the sampling's browsable copies) and their anchors.
UNWIND $rows AS row
MERGE (q:Query {dataset: $dataset, set: $set, qid: row.qid})
SET q.type = row.type, q.text = row.text
WITH q, row
UNWIND row.anchors AS anchor
MATCH (e:Entity {dataset: $dataset, eid: anchor.eid})
MERGE (q)-[:ANCHOR {position: anchor.position}]->(e)
