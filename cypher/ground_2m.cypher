// Easy answers by Cypher: the entities y with finite utility u > 0 on the graph {CONF} names, for a query
// whose atoms all have alpha > 0 (so a missing fact fails a positive atom; a negated atom on a missing fact
// is worth beta). {Rk} are relation types formatted from the validated vocabulary; all else is a parameter:
// $dataset, anchors $e1.., alphas $a1.., betas $b1.. (atom k = rk of the design text).
// 2m: r1(e1,x) & r2(x,y) & r3(x,y)   (separate MATCH clauses: r2 and r3 may be the same fact)
MATCH (e1:Entity {dataset: $dataset, eid: $e1})-[f1:{R1}]->(x:Entity)
WHERE f1.{CONF} >= $a1
MATCH (x)-[f2:{R2}]->(y:Entity)
WHERE f2.{CONF} >= $a2
MATCH (x)-[f3:{R3}]->(y)
WHERE f3.{CONF} >= $a3
WITH y, max($b1 * f1.{CONF} + $b2 * f2.{CONF} + $b3 * f3.{CONF}) AS u
WHERE u > 0
RETURN y.eid AS eid, u
ORDER BY u DESC, eid
