// Extend the lease of $name while $owner holds it; n = 0 means the lock was taken from $owner.
MATCH (l:Lock {name: $name})
WHERE l.owner = $owner
SET l.expires = $now + $lease
RETURN count(l) AS n
