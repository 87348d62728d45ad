// Neo4j 5 only (backend-specific, like neo4j_indexes): one (:Lock) node per name, so two first-time
// MERGEs of the same lock cannot both create one. Servers without constraints (FalkorDB's Bolt) skip it.
CREATE CONSTRAINT pipeline_lock_name IF NOT EXISTS FOR (l:Lock) REQUIRE l.name IS UNIQUE
