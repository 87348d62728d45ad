// The entity names of a data set by id (to write query texts with names on (:Query) nodes).
MATCH (e:Entity {dataset: $dataset})
RETURN e.eid AS eid, e.name AS name
ORDER BY eid
