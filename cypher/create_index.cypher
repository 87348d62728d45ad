// One single-property node index ({LABEL}, {PROP}: plain identifiers; Store.ensure_index checks first
// that it does not exist, the common subset has no IF NOT EXISTS and no index names).
CREATE INDEX FOR (n:{LABEL}) ON (n.{PROP})
