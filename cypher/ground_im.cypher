// Easy answers by Cypher: the entities y with finite utility u > 0 on the graph {CONF} names, for a query
// whose atoms all have alpha > 0 (so a missing fact fails a positive atom; a negated atom on a missing fact
// is worth beta). {Rk} are relation types formatted from the validated vocabulary; all else is a parameter:
// $dataset, anchors $e1.., alphas $a1.., betas $b1.. (atom k = rk of the design text).
// im: r1(e1,x) & r2(e2,x) & r3(x,y) & r4(x,y)
MATCH (e1:Entity {dataset: $dataset, eid: $e1})-[f1:{R1}]->(x:Entity)
WHERE f1.{CONF} >= $a1
MATCH (e2:Entity {dataset: $dataset, eid: $e2})-[f2:{R2}]->(x)
WHERE f2.{CONF} >= $a2
MATCH (x)-[f3:{R3}]->(y:Entity)
WHERE f3.{CONF} >= $a3
MATCH (x)-[f4:{R4}]->(y)
WHERE f4.{CONF} >= $a4
WITH y, max($b1 * f1.{CONF} + $b2 * f2.{CONF} + $b3 * f3.{CONF} + $b4 * f4.{CONF}) AS u
WHERE u > 0
RETURN y.eid AS eid, u
ORDER BY u DESC, eid
