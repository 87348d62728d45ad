// Mark $dataset as being loaded (complete = false) before anything else is written.
MERGE (d:Dataset {name: $dataset})
SET d.key = $key, d.complete = false
