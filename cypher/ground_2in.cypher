// Easy answers by Cypher: the entities y with finite utility u > 0 on the graph {CONF} names, for a query
// whose atoms all have alpha > 0 (so a missing fact fails a positive atom; a negated atom on a missing fact
// is worth beta). {Rk} are relation types formatted from the validated vocabulary; all else is a parameter:
// $dataset, anchors $e1.., alphas $a1.., betas $b1.. (atom k = rk of the design text).
// 2in: !r1(e1,y) & r2(e2,y)   (an absent r1 fact has c = 0, so it passes when 1 >= alpha)
MATCH (e2:Entity {dataset: $dataset, eid: $e2})-[f2:{R2}]->(y:Entity)
WHERE f2.{CONF} >= $a2
OPTIONAL MATCH (e1:Entity {dataset: $dataset, eid: $e1})-[f1:{R1}]->(y)
WITH y, f2, coalesce(f1.{CONF}, 0.0) AS c1
WHERE 1.0 - c1 >= $a1
WITH y, max($b1 * (1.0 - c1) + $b2 * f2.{CONF}) AS u
WHERE u > 0
RETURN y.eid AS eid, u
ORDER BY u DESC, eid
