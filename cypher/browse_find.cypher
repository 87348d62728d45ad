// Which stored queries an id names (optionally within one data set and set), the methods with committed
// answers for it (writeback_commit), the methods whose committed write-back of the set holds none for it
// (the method found no answer to this query), and the error `answer --from-store` stored on a text that
// did not parse.
MATCH (q:Query {qid: $qid})
WHERE ($dataset IS NULL OR q.dataset = $dataset) AND ($set IS NULL OR q.set = $set) AND q.pending IS NULL
OPTIONAL MATCH (q)-[a:ANSWER]->(:Entity), (c:WriteBack {dataset: q.dataset, set: q.set})
  WHERE c.method = a.method AND a.generation = c.generation
WITH q, collect(DISTINCT a.method) AS methods
OPTIONAL MATCH (w:WriteBack {dataset: q.dataset, set: q.set})
RETURN q.dataset AS dataset, q.set AS set, q.text AS text, q.error AS error, methods,
       collect(DISTINCT w.method) AS written
ORDER BY dataset, set
