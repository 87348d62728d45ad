// The validated relation vocabulary of $dataset: rows {rid, name, type}.
UNWIND $rows AS row
CREATE (:Relation {dataset: $dataset, rid: row.rid, name: row.name, type: row.type})
