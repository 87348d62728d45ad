// Easy answers by Cypher: the entities y with finite utility u > 0 on the graph {CONF} names, for a query
// whose atoms all have alpha > 0 (so a missing fact fails a positive atom; a negated atom on a missing fact
// is worth beta). {Rk} are relation types formatted from the validated vocabulary; all else is a parameter:
// $dataset, anchors $e1.., alphas $a1.., betas $b1.. (atom k = rk of the design text).
// 3in: !r1(e1,y) & r2(e2,y) & r3(e3,y)
MATCH (e2:Entity {dataset: $dataset, eid: $e2})-[f2:{R2}]->(y:Entity)
WHERE f2.{CONF} >= $a2
MATCH (e3:Entity {dataset: $dataset, eid: $e3})-[f3:{R3}]->(y)
WHERE f3.{CONF} >= $a3
OPTIONAL MATCH (e1:Entity {dataset: $dataset, eid: $e1})-[f1:{R1}]->(y)
WITH y, f2, f3, coalesce(f1.{CONF}, 0.0) AS c1
WHERE 1.0 - c1 >= $a1
WITH y, max($b1 * (1.0 - c1) + $b2 * f2.{CONF} + $b3 * f3.{CONF}) AS u
WHERE u > 0
RETURN y.eid AS eid, u
ORDER BY u DESC, eid
