// The load marker of $dataset and whether any of its entities exist (a killed load leaves some).
OPTIONAL MATCH (d:Dataset {name: $dataset})
OPTIONAL MATCH (n:Entity {dataset: $dataset})
WITH d, n LIMIT 1
RETURN d.key AS key, d.complete AS complete, n IS NOT NULL AS has_entities
