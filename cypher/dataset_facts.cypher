// The facts of $dataset counted by a scan of its entities' edges (when its relation types are shared).
MATCH (:Entity {dataset: $dataset})-[e]->()
WHERE e.dataset = $dataset
RETURN count(e) AS n
