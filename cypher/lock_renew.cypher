// Extend the lease of $name while $owner holds it; no row means the lock was taken from $owner.
MATCH (l:Lock {name: $name})
WHERE l.owner = $owner
SET l.expires = $now + $lease
RETURN l.owner AS owner
