// Node indexes of the graph model (one per line; the store checks existence first, the subset has no
// IF NOT EXISTS).
CREATE INDEX FOR (n:Entity) ON (n.eid)
CREATE INDEX FOR (n:Entity) ON (n.dataset)
CREATE INDEX FOR (n:Relation) ON (n.dataset)
CREATE INDEX FOR (n:Dataset) ON (n.name)
