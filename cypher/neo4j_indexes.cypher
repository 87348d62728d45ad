// Neo4j 5: existing indexes.
SHOW INDEXES YIELD labelsOrTypes, properties, entityType
RETURN labelsOrTypes, properties, entityType
