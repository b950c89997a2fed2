"""Triton's ``@jit`` needs its function's source: candidates loaded from a string must provide it.

Under ``TRITON_INTERPRET=1`` (every other CPU test) Triton never asks for the source, which hid that a compiled
(GPU) run of any Triton candidate failed at import with "@jit functions should be defined in a Python file".
Decorating needs no GPU, so this runs with the interpreter switched off.
"""

from pathlib import Path

import pytest

from kbstudy.execution import load_module

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "kbstudy" / "dlrm_bench" / "kernels").glob("*.py")) + sorted(
    (ROOT / "kbstudy" / "examples" / "triton").glob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_triton_candidate_loads_without_interpreter(path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = load_module(path.read_text(), f"kbstudy_test_src_{path.stem}", f"<candidate {path.stem}>")
    jitted = [v for v in vars(module).values() if type(v).__name__ == "JITFunction"]
    assert hasattr(module, "ModelNew") or jitted
    for fn in jitted:  # the source Triton hashes and compiles is the candidate's own
        assert "def " + fn.__name__ in fn.src
