// Release $name if $owner still holds it (the node goes: nothing is left in the graph); one row if so.
MATCH (l:Lock {name: $name})
WHERE l.owner = $owner
WITH l, l.name AS name
DETACH DELETE l
RETURN name
