"""Environment variables set for the duration of one step (Triton's interpreter for a CPU run, the notebook kernel's
``PYTHONPATH``), restored afterwards."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator


@contextlib.contextmanager
def scoped_environ(**values: str | None) -> Iterator[None]:
    """Set (or, with ``None``, unset) environment variables for the duration of the block, then restore them."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
