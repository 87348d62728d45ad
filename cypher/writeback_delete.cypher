// Write-back, step 1: remove one method's answers of one query set, so a re-run replaces them.
MATCH (q:Query {dataset: $dataset, set: $set})-[a:ANSWER {method: $method}]->(:Entity)
DELETE a
