// Easy answers by Cypher: the entities y with finite utility u > 0 on the graph {CONF} names, for a query
// whose atoms all have alpha > 0 (so a missing fact fails a positive atom; a negated atom on a missing fact
// is worth beta). {Rk} are relation types formatted from the validated vocabulary; all else is a parameter:
// $dataset, anchors $e1.., alphas $a1.., betas $b1.. (atom k = rk of the design text).
// 2il: r1(e1,y) & r2(x,y)   (x ranges over all entities; with alpha > 0 only facts can pass)
MATCH (e1:Entity {dataset: $dataset, eid: $e1})-[f1:{R1}]->(y:Entity)
WHERE f1.{CONF} >= $a1
MATCH (x:Entity)-[f2:{R2}]->(y)
WHERE f2.{CONF} >= $a2
WITH y, max($b1 * f1.{CONF} + $b2 * f2.{CONF}) AS u
WHERE u > 0
RETURN y.eid AS eid, u
ORDER BY u DESC, eid
