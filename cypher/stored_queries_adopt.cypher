// Queries a person created in the store with only a text (e.g. in Neo4j Browser: CREATE (:Query {dataset:
// 'ppi5k', text: 'binding(883.DvMF_1608, ?y, 0.5)'})) join the set $set with the next free ids t<n>
// in the order they were created (the first typed node becomes t0: the store's internal node id grows with
// creation; a store that reuses a deleted node's id may number a later node first, so ties and reuse fall
// back to the text); a qid the person gave is kept.
MATCH (q:Query {dataset: $dataset})
WHERE q.set IS NULL
WITH q ORDER BY id(q), q.text
WITH collect(q) AS new
UNWIND range(0, size(new) - 1) AS i
WITH new[i] AS q, i
SET q.set = $set, q.qid = coalesce(q.qid, 't' + toString($offset + i))
RETURN count(q) AS adopted
