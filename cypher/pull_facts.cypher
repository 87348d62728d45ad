// `ingest NAME --from-store`: one page of the user's relationships carrying the confidence property
// {CONF} (read-only), endpoints named by their property {NAME}; $types: the relationship types to read,
// null for all. The pipeline's own nodes are skipped, so its copies are never read back.
MATCH (h)-[r]->(t)
WHERE r.{CONF} IS NOT NULL
  AND NOT h:Entity AND NOT t:Entity AND NOT h:Relation AND NOT t:Relation
  AND NOT h:Dataset AND NOT t:Dataset AND NOT h:Lock AND NOT t:Lock AND NOT h:Query AND NOT t:Query
  AND ($types IS NULL OR type(r) IN $types)
RETURN h.{NAME} AS head, type(r) AS relation, t.{NAME} AS tail, r.{CONF} AS conf
ORDER BY relation, head, tail, conf
SKIP $skip LIMIT $limit
