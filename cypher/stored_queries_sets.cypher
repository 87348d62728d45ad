// The query sets of a data set in the store, with their sizes (for "which --set" messages).
MATCH (q:Query {dataset: $dataset})
WHERE q.pending IS NULL
RETURN q.set AS set, count(q) AS queries
ORDER BY set
