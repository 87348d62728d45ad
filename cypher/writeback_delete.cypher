// Write-back, clean-up: remove one method's ANSWER edges of a set that are not of generation $keep (the
// committed one): leftovers of a killed write-back (before writing) or the replaced ones (after the commit).
MATCH (:Query {dataset: $dataset, set: $set})-[a:ANSWER {method: $method}]->(:Entity)
WHERE a.generation IS NULL OR a.generation <> $keep
DELETE a
