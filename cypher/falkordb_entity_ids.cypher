// FalkorDB bulk load: the internal node id of every entity of $dataset (GRAPH.BULK edges name node ids).
MATCH (n:Entity {dataset: $dataset})
RETURN n.eid AS eid, ID(n) AS id
