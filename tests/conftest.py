"""Fixtures shared by every test tier. Being at the root of ``tests/``, this file also puts ``tests/`` on the import
path, so test modules in any tier folder import the shared helpers from ``support`` (``support.committed``,
``support.fixture_records``, ``support.helpers``), and it loads the KernelBench fixtures
(``support.kernelbench_fixtures``: ``kernelbench_dir``, ``levels_file``, ``all_problems``, ``problem_by_name``).

Tiers (tests/README.md): ``unit``, ``integration``, ``notebooks``, ``gpu``, ``adversarial``; each folder's conftest
marks its tests with the tier's marker."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support.committed import committed_records as _committed_records

pytest_plugins = ["support.kernelbench_fixtures"]

#: the longest test files, run first: `make test` hands whole files to two pytest-xdist workers (``--dist loadfile``),
#: so a long file handed out last would leave one worker running it alone. A scheduling hint only: a file missing here
#: runs in collection order after these (slowest first, from ``pytest --durations=0`` on a 2-core machine)
LONGEST_FIRST = (
    "integration/test_ray_batch.py", "integration/test_leaderboard_analysis.py", "integration/test_study.py",
    "integration/test_calibration.py", "integration/test_dlrm_kernels_edge.py", "integration/test_examples_triton.py",
    "integration/test_concurrency.py", "integration/test_soak.py", "integration/test_outcomes.py",
    "integration/test_build_queue.py", "integration/test_cli.py", "integration/test_containment.py",
    "notebooks/test_notebooks_render.py", "notebooks/test_notebooks_03_04.py", "integration/test_dlrm_evaluate.py",
    "integration/test_verdicts.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    tests = Path(__file__).parent

    def order(item):
        name = item.path.relative_to(tests).as_posix() if tests in item.path.parents else ""
        return rank.get(name, len(rank))

    items.sort(key=order)  # stable: within a file, and among the rest, collection order is kept


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
