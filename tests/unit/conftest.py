"""Unit tier: fast tests that start no child process and render no notebook (pure functions, records, verdict checks,
problem parsing, static scans, roofline, kernel classes, data manifest, docs). Every test here is marked ``unit``."""

from pathlib import Path

from support.chat_server import problems, problems_path  # noqa: F401 (fixtures: the generation tests' problems)
from support.tiers import mark_tier


def pytest_collection_modifyitems(items):
    mark_tier(items, Path(__file__).parent)
