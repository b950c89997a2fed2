"""kbstudy's own Triton candidates (``kbstudy/examples/triton``) against their problems' references, on CPU under
Triton's interpreter (``TRITON_INTERPRET=1``).

Two checks per candidate and dtype (fp32, bf16):

* the problem's own ``get_inputs()`` at ``size_scale = 0.0625`` (the CPU study's sizes);
* hand-picked odd shapes (not multiples of any block size, with negative values), which exercise the masks.

Tolerances: fp32 ``atol = rtol = 1e-4`` (KernelBench's fp32 tolerance); bf16 ``atol = rtol = 2e-2`` against the
reference evaluated in fp32 on the same bf16-rounded inputs (bf16 keeps 8 significant bits: one rounding of the
output alone is up to 2**-8 ~ 3.9e-3 relative).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

# Triton decides at *import* time whether its own @jit helpers (tl.sum, tl.max, tl.zeros_like, ...) are interpreted,
# so TRITON_INTERPRET must be set before the first ``import triton`` in the process. If another test module imported
# triton first, these tests re-run this file in a fresh interpreter (see test_in_fresh_process).
_FRESH = "triton" not in sys.modules
os.environ["TRITON_INTERPRET"] = "1"

import pytest
import torch

from kbstudy.harness.candidates import load_candidates
from kbstudy.harness.problems import load_problems, scale_source
from kbstudy.pipeline.data import resolve_kernelbench_dir

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "kbstudy" / "examples" / "triton"
KERNELBENCH = resolve_kernelbench_dir(required=False)
PROBLEMS_JSONL = KERNELBENCH / "kernelbench_levels_1-3.jsonl"
SIZE_SCALE = 0.0625
TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}

triton = pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not PROBLEMS_JSONL.exists(), reason=f"KernelBench problems not found: {PROBLEMS_JSONL}")
in_process = pytest.mark.skipif(not _FRESH, reason="triton was imported before TRITON_INTERPRET=1; see test_in_fresh_process")

EXAMPLE_FILES = sorted(EXAMPLES.glob("level_*_problem_*_sample_*_kernel.py"))
EXAMPLE_IDS = [int(re.search(r"problem_(\d+)_", f.name).group(1)) for f in EXAMPLE_FILES]


def _odd_case(problem_id: int) -> tuple[list, list]:
    """(init_inputs, inputs) with shapes that are not multiples of any block size, and negative values."""
    g = torch.Generator().manual_seed(1234)
    randn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    cases = {
        1: ([], [randn(67, 45), randn(45, 91)]),
        5: ([], [randn(37, 1001), -2.5]),
        23: ([], [randn(5, 5000) * 10]),
        36: ([7], [randn(3, 7, 5, 9)]),
        40: ([(5, 6, 7)], [randn(3, 5, 6, 7)]),
    }
    return cases.get(problem_id, ([], [randn(37, 1001) * 4]))


def _namespace(source: str, name: str) -> dict:
    ns: dict = {"__name__": name}
    exec(compile(source, name, "exec"), ns)  # noqa: S102 -- trusted sources: the problem and our own example
    return ns


def _cast(values: list, dtype: torch.dtype) -> list:
    return [v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def _check(problem_ns: dict, candidate_ns: dict, init_inputs: list, inputs: list, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    ref = problem_ns["Model"](*init_inputs)
    new = candidate_ns["ModelNew"](*init_inputs)
    new.load_state_dict(ref.state_dict())  # same parameters (a problem without parameters has an empty state dict)
    inputs = _cast(inputs, dtype)
    with torch.no_grad():
        expected = ref.float()(*_cast(inputs, torch.float32))
        got = new.to(dtype)(*inputs)
    assert got.dtype == dtype, f"output dtype {got.dtype}, expected {dtype}"
    assert got.shape == expected.shape
    tol = TOL[dtype]
    torch.testing.assert_close(got.float(), expected, atol=tol, rtol=tol)


@pytest.fixture(scope="module")
def problems() -> dict:
    return {p.problem_id: p for p in load_problems(PROBLEMS_JSONL, levels=[1], problem_ids=EXAMPLE_IDS)}


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.mark.skipif(_FRESH, reason="triton was first imported here, with the interpreter on: the tests ran in-process")
def test_in_fresh_process():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_examples_load_as_a_candidate_set():
    candidates = load_candidates(EXAMPLES, model_config="kbstudy-triton-examples")
    assert len(candidates) == len(EXAMPLE_FILES) >= 8
    assert {c.backend for c in candidates} == {"triton"}
    assert {c.level for c in candidates} == {1}


@in_process
@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[f.stem for f in EXAMPLE_FILES])
def test_example_matches_reference_at_scaled_size(path, dtype, problems):
    problem = problems[int(re.search(r"problem_(\d+)_", path.name).group(1))]
    problem_ns = _namespace(scale_source(problem.source, SIZE_SCALE), problem.name)
    candidate_ns = _namespace(path.read_text(), path.name)
    torch.manual_seed(42)
    _check(problem_ns, candidate_ns, problem_ns["get_init_inputs"](), problem_ns["get_inputs"](), dtype)


@in_process
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[f.stem for f in EXAMPLE_FILES])
def test_example_masks_odd_shapes(path, dtype, problems):
    problem_id = int(re.search(r"problem_(\d+)_", path.name).group(1))
    problem_ns = _namespace(problems[problem_id].source, problems[problem_id].name)
    candidate_ns = _namespace(path.read_text(), path.name)
    init_inputs, inputs = _odd_case(problem_id)
    _check(problem_ns, candidate_ns, init_inputs, inputs, dtype)


@in_process
def test_a_wrong_kernel_fails_the_check(problems):
    """The check can fail: a ReLU candidate that forgets the last partial block is caught at an odd shape."""
    source = (EXAMPLES / "level_1_problem_19_sample_0_kernel.py").read_text()
    broken = source.replace("relu_kernel[(triton.cdiv(n, BLOCK),)]", "relu_kernel[(max(1, n // BLOCK),)]")
    assert broken != source
    problem_ns = _namespace(problems[19].source, problems[19].name)
    init_inputs, inputs = _odd_case(19)
    with pytest.raises(AssertionError):
        _check(problem_ns, _namespace(broken, "broken"), init_inputs, inputs, torch.float32)
