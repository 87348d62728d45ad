// Queries a person created in the store with only a text (e.g. in Neo4j Browser: CREATE (:Query {dataset:
// 'ppi5k', text: 'binding(883.DvMF_1608, ?y, 0.5)'})) join the set $set with the next free ids t<n>
// (in text order, so the numbering is the same on every store); a qid the person gave is kept.
MATCH (q:Query {dataset: $dataset})
WHERE q.set IS NULL
WITH q ORDER BY q.text
WITH collect(q) AS new
UNWIND range(0, size(new) - 1) AS i
WITH new[i] AS q, i
SET q.set = $set, q.qid = coalesce(q.qid, 't' + toString($offset + i))
RETURN count(q) AS adopted
