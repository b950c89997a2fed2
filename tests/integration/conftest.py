"""Integration tier: tests that start worker, reference, build or script processes (``evaluate_batch``, the CLI on
real batches, study and calibration runs, benchmark scripts) or talk to a loopback server (data fetch, generation).
Every test here is marked ``integration``; the generation tests' server fixtures come from ``support.chat_server``."""

from pathlib import Path

from support.chat_server import api_key_env, problems, problems_path, server, write_config  # noqa: F401 (fixtures)
from support.tiers import mark_tier


def pytest_collection_modifyitems(items):
    mark_tier(items, Path(__file__).parent)
