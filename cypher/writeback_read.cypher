// A query's answers of one method, best first (for browsing and tests): the committed generation only.
MATCH (c:WriteBack {dataset: $dataset, set: $set, method: $method})
MATCH (q:Query {dataset: $dataset, set: $set, qid: $qid})-[a:ANSWER {method: $method}]->(e:Entity)
WHERE q.pending IS NULL AND a.generation = c.generation
RETURN e.eid AS eid, e.name AS name, a.rank AS rank, a.utility AS utility, a.truth_utility AS truth_utility
ORDER BY a.rank
