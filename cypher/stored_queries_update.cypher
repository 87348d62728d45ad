// After parsing the stored texts: the parse error on the node (null = parsed, which removes an old one),
// the text with names, the type of a typed query, its anchors (replaced, never added to) and the data set
// version they were parsed against.
UNWIND $rows AS row
MATCH (q:Query {dataset: $dataset, set: $set, qid: row.qid})
SET q.error = row.error, q.query = coalesce(row.query, q.query), q.type = coalesce(row.type, q.type),
    q.dataset_version = $version
WITH q, row
OPTIONAL MATCH (q)-[old:ANCHOR]->(:Entity)
DELETE old
WITH DISTINCT q, row
UNWIND row.anchors AS anchor
MATCH (e:Entity {dataset: $dataset, eid: anchor.eid})
CREATE (q)-[:ANCHOR {position: anchor.position}]->(e)
