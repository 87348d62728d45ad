// Easy answers by Cypher: the entities y with finite utility u > 0 on the graph {CONF} names, for a query
// whose atoms all have alpha > 0 (so a missing fact fails a positive atom; a negated atom on a missing fact
// is worth beta). {Rk} are relation types formatted from the validated vocabulary; all else is a parameter:
// $dataset, anchors $e1.., alphas $a1.., betas $b1.. (atom k = rk of the design text).
// 2u: r1(e1,y) | r2(e2,y)   (both branches collected, then the max per entity)
OPTIONAL MATCH (e1:Entity {dataset: $dataset, eid: $e1})-[f1:{R1}]->(y1:Entity)
WHERE f1.{CONF} >= $a1
WITH collect({eid: y1.eid, u: $b1 * f1.{CONF}}) AS first
OPTIONAL MATCH (e2:Entity {dataset: $dataset, eid: $e2})-[f2:{R2}]->(y2:Entity)
WHERE f2.{CONF} >= $a2
WITH first, collect({eid: y2.eid, u: $b2 * f2.{CONF}}) AS second
UNWIND first + second AS row
WITH row.eid AS eid, max(row.u) AS u
WHERE eid IS NOT NULL AND u > 0
RETURN eid, u
ORDER BY u DESC, eid
