// Node indexes of the graph model, one statement each, separated by ';' (the store checks existence
// first: the common subset has no IF NOT EXISTS; pipeline.store.ingest.schema_indexes reads them).
CREATE INDEX FOR (n:Entity) ON (n.eid);
CREATE INDEX FOR (n:Entity) ON (n.dataset);
CREATE INDEX FOR (n:Relation) ON (n.dataset);
CREATE INDEX FOR (n:Dataset) ON (n.name);
