// The validated relation vocabulary of $dataset: rows {rid, name, type, p25, p50, p75}; p25/p50/p75 are the
// relation's low/normal/high alpha levels (null for a relation without rows), computed by
// pipeline.sampling.requirements.alpha_percentiles from every published row (duplicates kept).
UNWIND $rows AS row
CREATE (:Relation {dataset: $dataset, rid: row.rid, name: row.name, type: row.type,
                   p25: row.p25, p50: row.p50, p75: row.p75})
