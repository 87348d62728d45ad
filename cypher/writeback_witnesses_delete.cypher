// Write-back of witnesses, clean-up 1: remove the (:Atom) nodes of one method's witnesses of a set that
// are not of generation $keep (then writeback_witnesses_delete_nodes removes those witnesses), so a re-run
// replaces them and a run with another K leaves none behind.
MATCH (:Query {dataset: $dataset, set: $set})-[:EXPLAINED_BY]->(w:Witness {method: $method})-[:USES]->(a:Atom)
WHERE w.generation IS NULL OR w.generation <> $keep
DETACH DELETE a
