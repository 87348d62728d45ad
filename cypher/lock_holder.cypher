// Who holds the lock $name (no row: free). With duplicate nodes of the name, any holder is the holder.
MATCH (l:Lock {name: $name})
WHERE l.owner IS NOT NULL
RETURN l.owner AS owner, l.host AS host, l.pid AS pid, l.purpose AS purpose, l.since AS since,
       l.expires AS expires
LIMIT 1
