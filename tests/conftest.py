"""Fixtures shared by every test folder. Being at the root of ``tests/``, this file also puts ``tests/`` on the import
path, so test modules in any folder import the shared helpers (``committed``, ``fixture_records``)."""

from __future__ import annotations

import pytest

from committed import committed_records as _committed_records


@pytest.fixture(name="committed_records")
def committed_records_fixture():
    """:func:`committed.committed_records` as a fixture: ``committed_records(path, ..., file=None)`` asserts that the
    committed record folders exist (a missing one fails the test) and returns the path(s)."""
    return _committed_records
