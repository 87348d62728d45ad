// FalkorDB: existing indexes (label, properties, entitytype).
CALL db.indexes() YIELD label, properties, entitytype
RETURN label, properties, entitytype
