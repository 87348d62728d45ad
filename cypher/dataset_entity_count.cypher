// The entities of a data set (write-back refuses a data set the store does not hold).
MATCH (e:Entity {dataset: $dataset})
RETURN count(e) AS n
