// The query sets of $dataset in the store recorded with another version than $version (made stale by a
// replacing ingest; pipeline.writeback refuses them).
MATCH (q:Query {dataset: $dataset})
WHERE q.pending IS NULL AND q.dataset_version IS NOT NULL AND q.dataset_version <> $version
RETURN DISTINCT q.set AS set
ORDER BY set
