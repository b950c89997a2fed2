"""Adversarial tier: cheating candidates as files (``candidates/``, each with its expected verdict in its header) and
the tests that evaluate them, with honest controls beside them. Every test here is marked ``adversarial``."""

from pathlib import Path

from support.tiers import mark_tier


def pytest_collection_modifyitems(items):
    mark_tier(items, Path(__file__).parent)
