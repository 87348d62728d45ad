// Browsable copies of a query set in the store: one (:Query) node per query, keyed by (dataset, set, qid)
// where set names the query set by file stem AND content checksum (a re-sampled set is a new set), with an
// [:ANCHOR {position}] edge to each anchor entity; text as the query set holds it (ids, #n), query with
// names; dataset_version: the data set's content key it was written against. Re-writing a set replaces
// its anchors, never adds to them. A node created here is `pending` (no reader sees it) until the set's commit (write_queries_commit or writeback_commit) clears the flag in one
// statement, so a killed write never shows part of a new set; a committed node re-written with the same
// content (the set id includes its checksum) stays visible and unchanged to readers.
UNWIND $rows AS row
MERGE (q:Query {dataset: $dataset, set: $set, qid: row.qid})
ON CREATE SET q.pending = $generation
SET q.type = row.type, q.text = row.text, q.query = row.query, q.split = $split, q.n_easy = row.n_easy,
    q.n_hard = row.n_hard, q.top_answers = row.top_answers, q.file = $file, q.dataset_version = $version
WITH q, row
OPTIONAL MATCH (q)-[old:ANCHOR]->(:Entity)
DELETE old
WITH DISTINCT q, row
UNWIND row.anchors AS anchor
MATCH (e:Entity {dataset: $dataset, eid: anchor.eid})
CREATE (q)-[:ANCHOR {position: anchor.position}]->(e)
