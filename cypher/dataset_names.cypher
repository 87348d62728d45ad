// The names of the data sets with a load marker in this graph (for "did you mean" messages).
MATCH (d:Dataset)
RETURN DISTINCT d.name AS name
ORDER BY name
