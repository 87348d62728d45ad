// Easy answers by Cypher: the entities y with finite utility u > 0 on the graph __conf__ names, for a query
// whose atoms all have alpha > 0 (so a missing fact fails a positive atom; a negated atom on a missing fact
// is worth beta). __Rk__ are relation types formatted from the validated vocabulary; all else is a parameter:
// $dataset, anchors $e1.., alphas $a1.., betas $b1.. (atom k = rk of the design text).
// inp: !r1(e1,x) & r2(e2,x) & r3(x,y)
MATCH (e2:Entity {dataset: $dataset, eid: $e2})-[f2:__R2__]->(x:Entity)
WHERE f2.__conf__ >= $a2
OPTIONAL MATCH (e1:Entity {dataset: $dataset, eid: $e1})-[f1:__R1__]->(x)
WITH x, f2, coalesce(f1.__conf__, 0.0) AS c1
WHERE 1.0 - c1 >= $a1
MATCH (x)-[f3:__R3__]->(y:Entity)
WHERE f3.__conf__ >= $a3
WITH y, max($b1 * (1.0 - c1) + $b2 * f2.__conf__ + $b3 * f3.__conf__) AS u
WHERE u > 0
RETURN y.eid AS eid, u
ORDER BY u DESC, eid
