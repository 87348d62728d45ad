// The commit of an ingest: ONE statement (FalkorDB and Neo4j apply a statement whole or not at all, and
// FalkorDB's append-only file logs it as one command). It first checks what it commits: the entities,
// relation vocabulary and facts staged under $staging must be exactly the $entities, $relations and
// $facts the loader wrote, with the $checksum of their (head eid, tail eid, rid) triples; otherwise it
// changes nothing and returns no row. The check runs again wherever the statement runs again (a restart
// replays the log statement by statement), so a staged copy that came out different there (facts wired
// to other nodes) is never committed either: the previous version stays. Then what readers saw under
// $dataset (entities and relation vocabulary) is renamed $old, deleted after the commit; the version
// loaded under $staging becomes $dataset; one load marker says complete with its content key and counts.
// Readers match entities and the vocabulary by `dataset` and reach facts only through those entities, so
// they see the previous complete version or the new one, never a mixture. O(entities + facts).
OPTIONAL MATCH (s:Entity {dataset: $staging})
WITH count(s) AS staged_entities
OPTIONAL MATCH (sr:Relation {dataset: $staging})
WITH staged_entities, count(sr) AS staged_relations
OPTIONAL MATCH (h:Entity {dataset: $staging})-[f]->(t:Entity {dataset: $staging})
WHERE f.dataset = $dataset
WITH staged_entities, staged_relations, count(f) AS staged_facts,
     sum(((((h.eid * 1000003 + t.eid) % 2147483647) * (h.eid + 2 * t.eid + 7919)) % 2147483647 * 131
         + f.rid) % 2147483647) AS staged_checksum
WITH (staged_entities = $entities AND staged_relations = $relations AND staged_facts = $facts
      AND staged_checksum = $checksum) AS ok
WHERE ok
OPTIONAL MATCH (d:Dataset {name: $dataset})
DETACH DELETE d
WITH ok, count(*) AS step
OPTIONAL MATCH (e:Entity {dataset: $dataset})
SET e.dataset = $old
WITH ok, count(*) AS step
OPTIONAL MATCH (r:Relation {dataset: $dataset})
SET r.dataset = $old
WITH ok, count(*) AS step
OPTIONAL MATCH (e:Entity {dataset: $staging})
SET e.dataset = $dataset
WITH ok, count(*) AS step
OPTIONAL MATCH (r:Relation {dataset: $staging})
SET r.dataset = $dataset
WITH ok, count(*) AS step
CREATE (m:Dataset {name: $dataset, key: $key, complete: true, entities: $entities, relations: $relations,
                   facts: $facts})
RETURN m.complete AS complete
