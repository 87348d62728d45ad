// The (:Query) nodes of one set of a data set: their ids, texts and, for a sampled set, type and split.
MATCH (q:Query {dataset: $dataset, set: $set})
WHERE q.pending IS NULL
RETURN q.qid AS qid, q.text AS text, q.type AS type, q.split AS split
ORDER BY qid
