// A query's answers of one method, best first (for browsing and tests).
MATCH (q:Query {dataset: $dataset, set: $set, qid: $qid})-[a:ANSWER {method: $method}]->(e:Entity)
RETURN e.eid AS eid, e.name AS name, a.rank AS rank, a.utility AS utility, a.truth_utility AS truth_utility
ORDER BY a.rank
