"""Notebooks tier: notebook rendering (papermill), nbval re-runs, the rendered sources and the report tables of the
rendered notebooks. Every test here is marked ``notebooks``."""

from pathlib import Path

from support.tiers import mark_tier


def pytest_collection_modifyitems(items):
    mark_tier(items, Path(__file__).parent)
