// Written last: a marker with complete = true means the whole data set is in the store.
MATCH (d:Dataset {name: $dataset})
SET d.complete = true, d.entities = $entities, d.relations = $relations, d.facts = $facts
RETURN d.complete AS complete
