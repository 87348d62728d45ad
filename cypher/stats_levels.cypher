// The alpha levels (p25/p50/p75; null when a relation has no rows) that ingest stored on each relation of
// $dataset's vocabulary.
MATCH (r:Relation {dataset: $dataset})
RETURN r.rid AS rid, r.p25 AS p25, r.p50 AS p50, r.p75 AS p75
ORDER BY rid
