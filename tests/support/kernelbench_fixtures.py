"""The KernelBench fixtures of every tier (loaded by ``tests/conftest.py`` as a plugin): the shared KernelBench data.

The tests run real problems from the shared KernelBench exports at scaled sizes, through ``evaluate_batch`` with its
worker and reference processes; nothing of kbstudy is mocked. Batches are module-scoped fixtures so one run serves
several assertions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import LEADERBOARD_FILE, LEVELS_FILE, V0_FILE, kernelbench_path


@pytest.fixture(scope="session")
def kernelbench_dir() -> Path:
    """The KernelBench data folder (:func:`kernelbench_path`); skips when the data is absent."""
    path = kernelbench_path()
    missing = [f for f in (LEVELS_FILE, V0_FILE, LEADERBOARD_FILE) if not (path / f).is_file()]
    if missing:
        pytest.skip(f"shared KernelBench data not found in {path} (missing {', '.join(missing)}; "
                    f"set KBSTUDY_KERNELBENCH_DIR)")
    return path


@pytest.fixture(scope="session")
def levels_file(kernelbench_dir: Path) -> Path:
    return kernelbench_dir / LEVELS_FILE


@pytest.fixture(scope="session")
def all_problems(levels_file: Path):
    """Every problem of levels 1-3 (loaded once per session)."""
    from kbstudy.harness.problems import load_problems

    return load_problems(levels_file)


@pytest.fixture(scope="session")
def problem_by_name(all_problems):
    """Level-1 problems by file name, e.g. ``problem_by_name["19_ReLU.py"]``."""
    return {p.name: p for p in all_problems if p.level == 1}
