// Browse one query in Neo4j Browser (or FalkorDB Browser / `pipeline cypher`): the query, its
// anchors, its ranked answers per method and, for the explained ones, why: the witness and its atoms with
// the entities they join. One row per answer; the Graph view draws every node and relationship returned.
// Only the committed write-back of each method is shown (the (:WriteBack) pointer, writeback_commit).
MATCH (q:Query {dataset: $dataset, set: $set, qid: $qid})
WHERE q.pending IS NULL
OPTIONAL MATCH (q)-[anchor:ANCHOR]->(anchored:Entity)
WITH q, collect(anchor) AS anchor_edges, collect(anchored) AS anchors
OPTIONAL MATCH (q)-[answer:ANSWER]->(entity:Entity), (c:WriteBack {dataset: $dataset, set: $set})
  WHERE c.method = answer.method AND answer.generation = c.generation
OPTIONAL MATCH (q)-[explained:EXPLAINED_BY]->(w:Witness)-[to_answer:FOR]->(entity)
  WHERE w.method = answer.method AND w.rank = answer.rank AND w.generation = answer.generation
OPTIONAL MATCH (w)-[uses:USES]->(atom:Atom)-[atom_end:HEAD|TAIL]->(joined:Entity)
WITH q, anchor_edges, anchors, answer, entity, explained, w, to_answer,
     collect(DISTINCT uses) AS uses, collect(DISTINCT atom) AS atoms, collect(atom_end) AS atom_ends, collect(DISTINCT joined) AS joined
RETURN q, anchor_edges, anchors, answer.method AS method, answer.rank AS rank, answer, entity, explained,
       w AS witness, to_answer, uses, atoms, atom_ends, joined
ORDER BY method, rank
