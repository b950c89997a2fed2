"""Test tiers by folder: each tier folder's ``conftest.py`` marks every test under it with the tier's marker, so
``pytest -m unit`` (or ``-m "not integration"``, ...) selects tiers as the folders do."""

from __future__ import annotations

from pathlib import Path

import pytest

TIERS = ("unit", "integration", "notebooks", "gpu", "adversarial")


def mark_tier(items: list[pytest.Item], folder: Path) -> None:
    """Add the marker named after ``folder`` (a tier folder) to each of ``items`` that lives under it. The hook that
    calls this sees every collected item, not only its folder's."""
    tier = folder.name
    assert tier in TIERS, f"{folder} is not a tier folder ({', '.join(TIERS)})"
    for item in items:
        if folder in item.path.parents:
            item.add_marker(getattr(pytest.mark, tier))
