// Delete up to $limit entities of $dataset with their relationships; repeat until it returns 0.
MATCH (n:Entity {dataset: $dataset})
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(n) AS deleted
