// Which stored queries an id names (optionally within one data set and set), the methods with answers, and
// the error `answer --from-store` stored on a text that did not parse.
MATCH (q:Query {qid: $qid})
WHERE ($dataset IS NULL OR q.dataset = $dataset) AND ($set IS NULL OR q.set = $set)
OPTIONAL MATCH (q)-[a:ANSWER]->(:Entity)
RETURN q.dataset AS dataset, q.set AS set, q.text AS text, q.error AS error, collect(DISTINCT a.method) AS methods
ORDER BY dataset, set
