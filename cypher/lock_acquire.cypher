// Compare-and-set: take the lock $name for $owner when it is free, already $owner's, past its lease, or
// held by $stale (an owner the caller found dead). Returns a row with n > 0 when taken, none otherwise.
// Run lock_ensure first: this query only updates existing nodes. Its first SET writes every node of
// the name before any owner is read: that takes the write lock (FalkorDB takes its graph's write lock
// at a query's first write and holds it to the end; Neo4j locks the nodes written), so two clients can
// never both read the lock free. A rare duplicate node (two first-time MERGEs) is harmless: the lock is
// taken only when ALL nodes of the name are free, and then on all of them.
MATCH (l:Lock {name: $name})
SET l.touched = $now
WITH collect(l) AS copies
WHERE all(x IN copies WHERE x.owner IS NULL OR x.owner = $owner OR x.owner = $stale OR x.expires < $now)
UNWIND copies AS l
SET l.owner = $owner, l.host = $host, l.pid = $pid, l.purpose = $purpose, l.since = $now,
    l.expires = $now + $lease
RETURN count(l) AS n
