"""The test suite's pytest plugins, loaded by tests/conftest.py."""
