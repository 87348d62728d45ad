// The relation names of a data set by id.
MATCH (r:Relation {dataset: $dataset})
RETURN r.rid AS rid, r.name AS name
ORDER BY rid
