// Write-back, step 3: one [:ANSWER] per (query, top answer) of one method; truth_utility is null for an
// entity that is not a ground-truth answer. Of generation $generation: invisible until writeback_commit.
UNWIND $rows AS row
MATCH (q:Query {dataset: $dataset, set: $set, qid: row.qid})
MATCH (e:Entity {dataset: $dataset, eid: row.eid})
CREATE (q)-[:ANSWER {rank: row.rank, utility: row.utility, method: $method, truth_utility: row.truth_utility,
                  generation: $generation}]->(e)
