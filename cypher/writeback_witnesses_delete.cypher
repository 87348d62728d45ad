// Write-back of witnesses, step 1: remove one method's witnesses of one query set (their (:Atom) nodes
// first, then the (:Witness) nodes), so a re-run replaces them and a run with another K leaves none behind.
MATCH (:Query {dataset: $dataset, set: $set})-[:EXPLAINED_BY]->(w:Witness {method: $method})-[:USES]->(a:Atom)
DETACH DELETE a
