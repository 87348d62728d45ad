// One backward step of a walk: the facts (head, relation, confidence) pointing at entity $eid in the
// split's graph, in a fixed order so that a seeded choice among them is reproducible.
MATCH (h:Entity {dataset: $dataset})-[f]->(t:Entity {dataset: $dataset, eid: $eid})
WHERE f.{CONF} IS NOT NULL
RETURN h.eid AS head, f.rid AS rid, f.{CONF} AS conf
ORDER BY rid, head
