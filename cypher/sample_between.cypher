// The relations of the facts from $head to $tail in the split's graph (a multi-edge of a query graph).
MATCH (h:Entity {dataset: $dataset, eid: $head})-[f]->(t:Entity {dataset: $dataset, eid: $tail})
WHERE f.{CONF} IS NOT NULL
RETURN f.rid AS rid, f.{CONF} AS conf
ORDER BY rid
