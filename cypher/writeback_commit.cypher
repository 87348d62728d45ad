// Write-back, the commit: ONE statement (FalkorDB and Neo4j apply a statement whole or not at all, and
// FalkorDB's append-only file logs it as one command), so readers see the set's previous complete
// write-back of this method or the new complete one, never a mixture. It shows the set's pending (:Query)
// nodes and points the (set, method) at the new generation of ANSWER edges and witnesses; readers follow
// only that pointer, and edges or witnesses of any other generation are leftovers (writeback_delete).
MATCH (q:Query {dataset: $dataset, set: $set})
WHERE q.pending IS NOT NULL
SET q.pending = null
WITH count(q) AS shown
MERGE (c:WriteBack {dataset: $dataset, set: $set, method: $method})
SET c.generation = $generation, c.answers = $answers, c.witnesses = $witnesses, c.at = $at,
    c.dataset_version = $version
RETURN shown
