// The relation types of $dataset that another data set's vocabulary uses too.
MATCH (r:Relation {dataset: $dataset}), (o:Relation)
WHERE o.type = r.type AND o.dataset <> $dataset
RETURN DISTINCT r.type AS type
