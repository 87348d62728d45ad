// Browsable copies of a query set in the store: one (:Query) node per query, keyed by (dataset, set, qid),
// with an [:ANCHOR {position}] edge to each anchor entity. MERGE keeps re-runs idempotent.
UNWIND $rows AS row
MERGE (q:Query {dataset: row.dataset, set: row.set, qid: row.qid})
SET q.type = row.type, q.text = row.text, q.split = row.split, q.n_easy = row.n_easy, q.n_hard = row.n_hard,
    q.top_answers = row.top_answers
WITH q, row
UNWIND row.anchors AS anchor
MATCH (e:Entity {dataset: row.dataset, eid: anchor.eid})
MERGE (q)-[:ANCHOR {position: anchor.position}]->(e)
