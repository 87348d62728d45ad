// The relationship type of each relation id of $dataset (its validated vocabulary), for grounding queries.
MATCH (r:Relation {dataset: $dataset})
RETURN r.rid AS rid, r.type AS type
ORDER BY rid
