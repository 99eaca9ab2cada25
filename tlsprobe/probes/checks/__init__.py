"""The checks of `tlsprobe scan` beyond the key-exchange audit, each returning a `CheckResult`
(tlsprobe/model/checks.py) with its typed details: one module per active check (connections
of its own), in the one shape base.py documents (_template.py); active.py is their static
catalog and runs them, derived.py holds the checks read off the audit, catalog.py resolves
the names a user gives."""
