// Which stored queries an id names (optionally within one data set and set), and the methods with
// committed answers (writeback_commit).
MATCH (q:Query {qid: $qid})
WHERE ($dataset IS NULL OR q.dataset = $dataset) AND ($set IS NULL OR q.set = $set) AND q.pending IS NULL
OPTIONAL MATCH (q)-[a:ANSWER]->(:Entity), (c:WriteBack {dataset: q.dataset, set: q.set})
  WHERE c.method = a.method AND a.generation = c.generation
RETURN q.dataset AS dataset, q.set AS set, collect(DISTINCT a.method) AS methods
ORDER BY dataset, set
