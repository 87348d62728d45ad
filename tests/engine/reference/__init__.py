"""A frozen copy of the SRC engine as of commit e09fd49 (before the speed work on exports).

The fast engine in pipeline/engine/ must give the same utilities: tests/engine/test_reference.py compares
the two on random queries of every type. Do not "improve"
this copy: it is the yardstick. Only its imports differ from the original (they point at this package).
calibration.py is pipeline/methods/calibration.py of the same commit: the "before" of calibration L's timing."""
