// The committed write-backs of $dataset recorded with another version than $version (made stale by a
// replacing ingest; pipeline.writeback refuses them).
MATCH (c:WriteBack {dataset: $dataset})
WHERE c.dataset_version IS NOT NULL AND c.dataset_version <> $version
RETURN c.set AS set, c.method AS method
ORDER BY set, method
