"""Test-wide set-up: the real data sets are found by the loaders' own rules (see tests/realdata.py)."""
import realdata


def pytest_configure(config):
    realdata.prepare()
