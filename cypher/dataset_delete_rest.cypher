// After the entities: the relation vocabulary and the marker of $dataset.
OPTIONAL MATCH (r:Relation {dataset: $dataset})
OPTIONAL MATCH (d:Dataset {name: $dataset})
DETACH DELETE r, d
