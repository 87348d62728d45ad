// Write-back of witnesses: one (:Witness) per explained (query, method, answer), linked from its query and
// to its answer, and one (:Atom) per atom of the winning DNF branch. An atom is a node of its own, not a
// relationship between the two entities, so it can never be mistaken for (or merged with) an observed fact
// of the KG: (:Atom)-[:HEAD]->(:Entity) and (:Atom)-[:TAIL]->(:Entity) give its two ends. Of generation
// $generation: invisible until writeback_commit points the (set, method) at it.
UNWIND $rows AS row
MATCH (q:Query {dataset: $dataset, set: $set, qid: row.qid})
MATCH (e:Entity {dataset: $dataset, eid: row.eid})
CREATE (q)-[:EXPLAINED_BY {method: $method, rank: row.rank, generation: $generation}]->(w:Witness {
          generation: $generation,
          dataset: $dataset, set: $set, qid: row.qid, method: $method, rank: row.rank, answer: row.answer,
          utility: row.utility, branch: row.branch, assignment: row.assignment, query: row.query})
CREATE (w)-[:FOR]->(e)
WITH w, row
UNWIND row.atoms AS atom
MATCH (h:Entity {dataset: $dataset, eid: atom.head_eid})
MATCH (t:Entity {dataset: $dataset, eid: atom.tail_eid})
CREATE (w)-[:USES {position: atom.position}]->(a:Atom {
          dataset: $dataset, position: atom.position, relation: atom.relation, head: atom.head,
          tail: atom.tail, head_eid: atom.head_eid, tail_eid: atom.tail_eid, negated: atom.negated, confidence: atom.confidence, source: atom.source,
          alpha: atom.alpha, beta: atom.beta, value: atom.value, branch: row.branch, text: atom.text})
CREATE (a)-[:HEAD]->(h)
CREATE (a)-[:TAIL]->(t)
