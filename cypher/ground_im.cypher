// Easy answers by Cypher: the entities y with finite utility u > 0 on the graph __conf__ names, for a query
// whose atoms all have alpha > 0 (so a missing fact fails a positive atom; a negated atom on a missing fact
// is worth beta). __Rk__ are relation types formatted from the validated vocabulary; all else is a parameter:
// $dataset, anchors $e1.., alphas $a1.., betas $b1.. (atom k = rk of the design text).
// im: r1(e1,x) & r2(e2,x) & r3(x,y) & r4(x,y)
MATCH (e1:Entity {dataset: $dataset, eid: $e1})-[f1:__R1__]->(x:Entity)
WHERE f1.__conf__ >= $a1
MATCH (e2:Entity {dataset: $dataset, eid: $e2})-[f2:__R2__]->(x)
WHERE f2.__conf__ >= $a2
MATCH (x)-[f3:__R3__]->(y:Entity)
WHERE f3.__conf__ >= $a3
MATCH (x)-[f4:__R4__]->(y)
WHERE f4.__conf__ >= $a4
WITH y, max($b1 * f1.__conf__ + $b2 * f2.__conf__ + $b3 * f3.__conf__ + $b4 * f4.__conf__) AS u
WHERE u > 0
RETURN y.eid AS eid, u
ORDER BY u DESC, eid
