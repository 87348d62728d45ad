// The version of a data set in the store: the content key its load marker carries (pipeline.store.ingest
// content_key: equal keys mean an identical graph). Query nodes and write-backs record it.
MATCH (d:Dataset {name: $dataset})
RETURN d.key AS version
