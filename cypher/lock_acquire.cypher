// Compare-and-set: take the lock $name for $owner when it is free, already $owner's, past its lease, or
// held by $stale (an owner the caller found dead). Returns one row when taken, none when held by another.
// The first SET writes the node before its owner is read: on Neo4j that takes the node's write lock, so
// two clients cannot both read it free; FalkorDB runs write queries one at a time anyway.
MERGE (l:Lock {name: $name})
SET l.touched = $now
WITH l
WHERE l.owner IS NULL OR l.owner = $owner OR l.owner = $stale OR l.expires < $now
SET l.owner = $owner, l.host = $host, l.pid = $pid, l.purpose = $purpose, l.since = $now,
    l.expires = $now + $lease
RETURN l.owner AS owner
