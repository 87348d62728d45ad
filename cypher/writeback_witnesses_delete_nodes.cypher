// Write-back of witnesses, clean-up 2: remove the (now atom-less) (:Witness) nodes of one method and set
// that are not of generation $keep.
MATCH (:Query {dataset: $dataset, set: $set})-[:EXPLAINED_BY]->(w:Witness {method: $method})
WHERE w.generation IS NULL OR w.generation <> $keep
DETACH DELETE w
