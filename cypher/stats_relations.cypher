// Per relation of $dataset, read from its relationships: distinct facts in each nested graph.
MATCH (:Entity {dataset: $dataset})-[e]->()
WHERE e.dataset = $dataset
WITH e.rid AS rid, e.conf_train AS ctr, e.conf_valid AS cva, e.conf_test AS cte
RETURN rid, count(ctr) AS train, count(cva) AS valid, count(cte) AS test
ORDER BY rid
