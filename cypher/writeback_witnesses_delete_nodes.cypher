// Write-back of witnesses, step 2: remove the (now atom-less) (:Witness) nodes of one method and query set.
MATCH (:Query {dataset: $dataset, set: $set})-[:EXPLAINED_BY]->(w:Witness {method: $method})
DETACH DELETE w
