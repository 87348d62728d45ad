// The load marker(s) of $dataset next to cheap counts of what is stored (index lookups): entities and
// the relation vocabulary (names and types in rid order). `complete` is true only for exactly one marker
// that says complete and whose entity and relation counts are the stored ones, so a doubled load (two
// copies of every entity) or a partial one is never taken as loaded. The facts are checked against
// d.facts by pipeline/store/status.py (dataset_type_count / dataset_facts).
OPTIONAL MATCH (d:Dataset {name: $dataset})
WITH collect(d) AS markers
OPTIONAL MATCH (n:Entity {dataset: $dataset})
WITH markers, count(n) AS entities
OPTIONAL MATCH (r:Relation {dataset: $dataset})
WITH markers, entities, r ORDER BY r.rid
WITH markers, entities, collect(r.name) AS relation_names, collect(r.type) AS relation_types,
     count(r) AS relations
WITH markers, entities, relation_names, relation_types, relations, markers[0] AS d
RETURN size(markers) AS markers, d.key AS key, d.complete AS marked_complete,
       d.entities AS marked_entities, d.relations AS marked_relations, d.facts AS marked_facts,
       entities, relations, relation_names, relation_types,
       (size(markers) = 1 AND d.complete = true AND d.entities = entities AND d.relations = relations)
       AS complete
