"""Fixtures shared by every test tier. Being at the root of ``tests/``, this file also puts ``tests/`` on the import
path, so test modules in any tier folder import the shared helpers from ``support`` (``support.committed``,
``support.fixture_records``, ``support.helpers``), and it loads the KernelBench fixtures
(``support.kernelbench_fixtures``: ``kernelbench_dir``, ``levels_file``, ``all_problems``, ``problem_by_name``).

Tiers (tests/README.md): ``unit``, ``integration``, ``notebooks``, ``gpu``, ``adversarial``; each folder's conftest
marks its tests with the tier's marker."""

from __future__ import annotations

import pytest
import torch
from support.committed import committed_records as _committed_records

pytest_plugins = ["support.kernelbench_fixtures"]


@pytest.fixture(name="committed_records")
def committed_records_fixture():
    """:func:`support.committed.committed_records` as a fixture: ``committed_records(path, ..., file=None)`` asserts
    that the committed record folders exist (a missing one fails the test) and returns the path(s)."""
    return _committed_records


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """Each test starts with autograd on and leaves it as it found it: the reference process's session turns it off
    for its whole process (``kbstudy.harness.child.reference``), and tests that run a session in the test process
    would otherwise leave it off for every later test."""
    enabled = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    yield
    torch.set_grad_enabled(enabled)
