"""The stages of the data flow (docs/architecture.md): ingest of a user's KG (user_ingest, synth), export,
the one answering stage (answer; its callers ask, stored_queries), evaluate, writeback and browse, and the
reproduction that runs them in order (reproduce, reproduce_baselines)."""
