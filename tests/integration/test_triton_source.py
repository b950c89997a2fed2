"""Triton's ``@jit`` needs its function's source: candidates loaded from a string must provide it.

Under ``TRITON_INTERPRET=1`` (every other CPU test) Triton never asks for the source, which hid that a compiled
(GPU) run of any Triton candidate failed at import with "@jit functions should be defined in a Python file".
Decorating needs no GPU, so this loads every Triton source we ship with the interpreter off -- in a child process:
importing triton here without ``TRITON_INTERPRET=1`` would make the interpreter tests of this session skip.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "kbstudy" / "suites" / "dlrm_bench" / "kernels").glob("*.py")) + sorted(
    (ROOT / "kbstudy" / "examples" / "triton").glob("*.py"))

CHILD = r"""
import json, sys
from kbstudy.harness.loading import load_module
report = {}
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[-1][:-3]
    try:
        module = load_module(open(path).read(), "kbstudy_test_src_" + name, "<candidate " + name + ">")
        jitted = [v for v in vars(module).values() if type(v).__name__ == "JITFunction"]
        report[name] = {"model_new": hasattr(module, "ModelNew"), "jitted": len(jitted),
                        "own_source": all(("def " + f.__name__) in f.src for f in jitted)}
    except Exception as exc:
        report[name] = {"error": type(exc).__name__ + ": " + str(exc)}
print(json.dumps(report))
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")
def test_triton_candidates_load_without_interpreter():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", CHILD, *map(str, SOURCES)], capture_output=True, text=True,
                          env=env, timeout=300, check=True)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(report) == len(SOURCES) >= 12
    for name, result in report.items():
        assert "error" not in result, (name, result)
        assert result["model_new"] or result["jitted"], name
        assert result["own_source"], name  # the source Triton hashes and compiles is the candidate's own
