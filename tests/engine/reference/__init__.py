"""A frozen copy of the SRC engine as of commit e09fd49 (before the export speed work of issue 14).

The fast engine in pipeline/engine/ must give the same utilities: tests/engine/test_reference.py and
benchmarks/check_exports.py compare the two on random queries of every type. Do not "improve" this copy:
it is the yardstick. Only its imports differ from the original (they point at this package)."""
