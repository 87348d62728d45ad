// Entities that can answer a walk: every entity with at least one incoming fact in the split's graph.
// {CONF} is conf_train | conf_valid | conf_test (the graph's confidence property; null = not a fact there).
MATCH (:Entity {dataset: $dataset})-[f]->(t:Entity {dataset: $dataset})
WHERE f.{CONF} IS NOT NULL
RETURN DISTINCT t.eid AS eid
ORDER BY eid
