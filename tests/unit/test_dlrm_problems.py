"""DLRM-Bench problems: all twelve load like KernelBench problems, scale, run on CPU and are deterministic."""

import time

import pytest
import torch

from kbstudy.harness.candidates import load_candidates
from kbstudy.harness.problems import load_problems, scale_source
from kbstudy.suites.dlrm_bench import (
    DLRM_LEVEL,
    KERNELS_DIR,
    MODEL_CONFIG,
    PROBLEMS_DIR,
    exec_source,
    load_dlrm_candidates,
    load_dlrm_problems,
)

PROBLEMS = load_dlrm_problems()


def test_twelve_problems_load_like_kernelbench():
    assert [p.problem_id for p in PROBLEMS] == list(range(1, 13))
    assert {p.version for p in PROBLEMS} == {"dlrm"}
    assert {p.level for p in PROBLEMS} == {DLRM_LEVEL}
    again = load_problems(PROBLEMS_DIR, level=DLRM_LEVEL, version="dlrm")
    assert [p.sha256 for p in again] == [p.sha256 for p in PROBLEMS]
    for p in PROBLEMS:
        assert "MLPerf DLRM-v2" in p.source, p.name  # every source cites where its shapes come from


def test_candidates_cover_every_problem():
    cands = load_dlrm_candidates()
    assert sorted(c.problem_id for c in cands) == list(range(1, 13))
    assert {(c.level, c.backend, c.model_config, c.sample_id) for c in cands} == {(DLRM_LEVEL, "triton", MODEL_CONFIG, 0)}
    assert len(load_candidates(KERNELS_DIR)) == 12


def test_full_size_shapes_follow_mlperf():
    ns = {p.problem_id: p.source for p in PROBLEMS}
    assert "batch_size = 8192" in ns[1] and "embedding_dim = 128" in ns[1]
    assert "num_embeddings = 4000000" in ns[1]
    assert "multi_hot_sizes = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)" in ns[3]
    assert "low_rank = 512" in ns[10]


def test_scaling_shrinks_sizes_but_not_structure():
    src = scale_source(PROBLEMS[0].source, 1 / 16)
    consts = exec_source(src, "scaled_1")
    assert consts["batch_size"] == 512 and consts["num_embeddings"] == 250000
    ten = exec_source(load_dlrm_problems(1 / 16, [10])[0].source, "scaled_10")
    assert ten["num_layers"] == 3 and ten["num_sparse_features"] == 26  # hyper-parameters below 32 stay


@pytest.mark.parametrize("problem", load_dlrm_problems(1 / 16), ids=lambda p: p.name)
def test_problem_runs_on_cpu_at_one_sixteenth_in_under_two_seconds(problem):
    ns = exec_source(problem.source, problem.name)
    t0 = time.perf_counter()
    torch.manual_seed(42)
    model = ns["Model"](*ns["get_init_inputs"]())
    torch.manual_seed(0)
    inputs = ns["get_inputs"]()
    with torch.no_grad():
        out = model(*inputs)
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0, f"{problem.name}: {elapsed:.2f} s on CPU at 1/16"
    for o in out if isinstance(out, tuple) else (out,):  # problem 5 returns (rows, new rows, new state)
        assert torch.isfinite(o.double()).all()
        assert o.abs().sum() > 0
    # deterministic given the torch seed
    torch.manual_seed(0)
    inputs2 = ns["get_inputs"]()
    assert all(torch.equal(a, b) for a, b in zip(inputs, inputs2))
