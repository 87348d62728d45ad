// Who holds the lock $name (no row, or a null owner: free).
MATCH (l:Lock {name: $name})
RETURN l.owner AS owner, l.host AS host, l.pid AS pid, l.purpose AS purpose, l.since AS since,
       l.expires AS expires
