// The marker, entity count and relation vocabulary of $dataset.
MATCH (d:Dataset {name: $dataset})
OPTIONAL MATCH (r:Relation {dataset: $dataset})
WITH d, r ORDER BY r.rid
WITH d, collect(r.name) AS relation_names
OPTIONAL MATCH (n:Entity {dataset: $dataset})
RETURN d.complete AS complete, d.key AS key, relation_names, count(n) AS entities
