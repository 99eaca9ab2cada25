"""The test suite, a package: test modules and helpers import each other by their full name
(`from tests.helpers import servers`); pyproject's `pythonpath` puts the repository's root on
sys.path (docs/INTERNALS.md, "tests/")."""
