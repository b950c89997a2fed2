"""GPU tier: tests that need a CUDA device (run on the GPU machine with ``make test-gpu``). Every test here is marked
``gpu`` and skipped where CUDA is not available, so ``make test`` on a CPU machine collects and skips them."""

from pathlib import Path

import pytest
import torch
from support.tiers import mark_tier

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    mark_tier(items, HERE)
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if HERE in item.path.parents:
                item.add_marker(skip)
