"""The audit of one server or many: versions, groups, suites, signature schemes, PQ verdicts,
run through one Scheduler (`run.py` assembles the report)."""
