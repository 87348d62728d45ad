// The commit of an ingest: ONE statement (FalkorDB and Neo4j apply a statement whole or not at all, and
// FalkorDB's append-only file logs it as one command). What readers saw under $dataset (entities and
// relation vocabulary) is renamed $old, deleted after the commit; the version loaded under $staging becomes
// $dataset; one load marker says complete with its content key and counts. Readers match entities and the
// vocabulary by `dataset` and reach facts only through those entities, so they see the previous complete
// version or the new one, never a mixture. O(entities): the facts are not touched.
OPTIONAL MATCH (d:Dataset {name: $dataset})
DETACH DELETE d
WITH count(*) AS step
OPTIONAL MATCH (e:Entity {dataset: $dataset})
SET e.dataset = $old
WITH count(*) AS step
OPTIONAL MATCH (r:Relation {dataset: $dataset})
SET r.dataset = $old
WITH count(*) AS step
OPTIONAL MATCH (e:Entity {dataset: $staging})
SET e.dataset = $dataset
WITH count(*) AS step
OPTIONAL MATCH (r:Relation {dataset: $staging})
SET r.dataset = $dataset
WITH count(*) AS step
CREATE (m:Dataset {name: $dataset, key: $key, complete: true, entities: $entities, relations: $relations,
                   facts: $facts})
RETURN m.complete AS complete
