// Which stored queries an id names (optionally within one data set and set), and the methods with answers.
MATCH (q:Query {qid: $qid})
WHERE ($dataset IS NULL OR q.dataset = $dataset) AND ($set IS NULL OR q.set = $set)
OPTIONAL MATCH (q)-[a:ANSWER]->(:Entity)
RETURN q.dataset AS dataset, q.set AS set, collect(DISTINCT a.method) AS methods
ORDER BY dataset, set
