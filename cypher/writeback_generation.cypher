// The committed generation of one method's write-back of a set (no row: never committed).
MATCH (c:WriteBack {dataset: $dataset, set: $set, method: $method})
RETURN c.generation AS generation
