// The load marker(s) of $dataset next to what is really stored, counted: entities, the relation
// vocabulary (names in rid order) and facts. `complete` is true only for exactly one marker that says
// complete and whose counts are the stored ones, so a doubled or partial copy is never taken as loaded.
OPTIONAL MATCH (d:Dataset {name: $dataset})
WITH collect(d) AS markers
OPTIONAL MATCH (n:Entity {dataset: $dataset})
WITH markers, count(n) AS entities
OPTIONAL MATCH (r:Relation {dataset: $dataset})
WITH markers, entities, r ORDER BY r.rid
WITH markers, entities, collect(r.name) AS relation_names, count(r) AS relations
OPTIONAL MATCH (:Entity {dataset: $dataset})-[e]->()
WHERE e.dataset = $dataset
WITH markers, entities, relation_names, relations, count(e) AS facts
WITH markers, entities, relation_names, relations, facts, markers[0] AS d
RETURN size(markers) AS markers, d.key AS key, d.complete AS marked_complete,
       d.entities AS marked_entities, d.relations AS marked_relations, d.facts AS marked_facts,
       entities, relations, facts, relation_names,
       (size(markers) = 1 AND d.complete = true AND d.entities = entities AND d.relations = relations
        AND d.facts = facts) AS complete
