"""Fixtures shared by every test tier. Being at the root of ``tests/``, this file also puts ``tests/`` on the import
path, so test modules in any tier folder import the shared helpers from ``support`` (``support.committed``,
``support.fixture_records``, ``support.helpers``), and it loads the KernelBench fixtures
(``support.kernelbench_fixtures``: ``kernelbench_dir``, ``levels_file``, ``all_problems``, ``problem_by_name``).

Tiers (tests/README.md): ``unit``, ``integration``, ``notebooks``, ``gpu``, ``adversarial``; each folder's conftest
marks its tests with the tier's marker."""

from __future__ import annotations

import pytest
from support.committed import committed_records as _committed_records

pytest_plugins = ["support.kernelbench_fixtures"]


@pytest.fixture(name="committed_records")
def committed_records_fixture():
    """:func:`support.committed.committed_records` as a fixture: ``committed_records(path, ..., file=None)`` asserts
    that the committed record folders exist (a missing one fails the test) and returns the path(s)."""
    return _committed_records
