// The data set versions the (:Query) nodes of one set were written against (none recorded: null).
MATCH (q:Query {dataset: $dataset, set: $set})
WHERE q.pending IS NULL
RETURN DISTINCT q.dataset_version AS version
