// The node of lock $name, created free on first use (it stays: a lock node without owner is free).
MERGE (l:Lock {name: $name})
