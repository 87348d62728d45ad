// The commit of a set's (:Query) nodes written on their own (sampling): ONE statement makes every pending
// node of the set visible at once.
MATCH (q:Query {dataset: $dataset, set: $set})
WHERE q.pending IS NOT NULL
SET q.pending = null
RETURN count(q) AS shown
