// Per relation of $dataset, read from its relationships: facts in each nested graph and the 25/50/75th
// percentiles (linear interpolation) of its positive confidences over train+val+test (conf_test).
MATCH (:Entity {dataset: $dataset})-[e]->()
WHERE e.dataset = $dataset
WITH e.rid AS rid, e.conf_train AS ctr, e.conf_valid AS cva, e.conf_test AS cte
RETURN rid,
       count(ctr) AS train, count(cva) AS valid, count(cte) AS test,
       percentileCont(CASE WHEN cte > 0 THEN cte END, 0.25) AS p25,
       percentileCont(CASE WHEN cte > 0 THEN cte END, 0.5) AS p50,
       percentileCont(CASE WHEN cte > 0 THEN cte END, 0.75) AS p75
ORDER BY rid
