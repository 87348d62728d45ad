// Release $name if $owner still holds it: the node stays, without owner (free). One row if released.
MATCH (l:Lock {name: $name})
WHERE l.owner = $owner
REMOVE l.owner, l.host, l.pid, l.purpose, l.since, l.expires
RETURN count(l) AS n
