"""The foundation every stage may use and that imports no stage: errors, environment (config), registries,
atomic writes, checksums, provenance, the observed KG (kg) and the metrics (pure math)."""
