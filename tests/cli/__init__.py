"""CLI tests: a package, so that its conftest is `cli.conftest` and never shadows `tests/conftest.py`."""
