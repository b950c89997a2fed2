"""Candidate loaders, backend detection, JSONL round trip and null candidates."""

from __future__ import annotations

import collections
import json

import pytest

from kbstudy.harness.candidates import (
    CALIBRATION_NULLS,
    HONEST_EXTRA_NULLS,
    NULL_CANDIDATES,
    CandidateLoadError,
    detect_backend,
    load_candidates,
    make_candidate,
    null_candidates,
    write_candidates_jsonl,
)
from kbstudy.harness.problems import sha256_text


@pytest.fixture(scope="module")
def leaderboard_file(kernelbench_dir):
    return kernelbench_dir / "leaderboard_kernels.jsonl"


@pytest.fixture(scope="module")
def leaderboard(leaderboard_file):
    return load_candidates(leaderboard_file)


def test_leaderboard_loads_with_one_based_ids(leaderboard, leaderboard_file, all_problems):
    rows = [json.loads(line) for line in leaderboard_file.read_text().splitlines() if line.strip()]
    assert len(leaderboard) == len(rows) == 413
    index = {(p.level, p.problem_id): p for p in all_problems}
    first = leaderboard[0]
    assert rows[0]["level"] == 1 and rows[0]["problem_id"] == 0
    assert (first.level, first.problem_id) == (1, 1)
    assert index[(1, 1)].name == "1_Square_matrix_multiplication_.py"
    for row, cand in zip(rows, leaderboard):
        assert cand.problem_id == row["problem_id"] + 1
        assert cand.level == row["level"]
        assert cand.backend == "cuda"
        assert cand.model_config == row["display_name"]
        assert cand.source == row["code"]
        assert cand.sha256 == sha256_text(row["code"])
        assert cand.metadata["torch_speedup"] == row["torch_speedup"]
        assert cand.metadata["model"] == row["model"]
        # every shifted id names a real problem
        assert (cand.level, cand.problem_id) in index
    # the leaderboard's problem 18 (0-based) is ReLU: its kernels launch a ReLU
    relu = [c for c in leaderboard if (c.level, c.problem_id) == (1, 19)]
    assert relu and all("relu" in c.source.lower() for c in relu)
    assert collections.Counter(c.level for c in leaderboard)[1] == 264


def test_leaderboard_filters(leaderboard_file):
    only = load_candidates(leaderboard_file, levels=[1], model_configs=["claude-3.5-sonnet"])
    assert len(only) == 53
    assert {(c.level, c.model_config) for c in only} == {(1, "claude-3.5-sonnet")}
    forced = load_candidates(leaderboard_file, model_config="x", levels=[3])
    assert forced and {c.model_config for c in forced} == {"x"}


def test_folder_with_kernelbench_naming(tmp_path, problem_by_name):
    relu = problem_by_name["19_ReLU.py"]
    source = relu.source.rstrip() + "\n\nclass ModelNew(Model):\n    pass\n"
    run = tmp_path / "my-model"
    run.mkdir()
    (run / "level_1_problem_19_sample_0_kernel.py").write_text(source)
    (run / "level_1_problem_19_sample_3_kernel.py").write_text(source + "\n# another sample\n")
    (run / "notes.py").write_text("# not a candidate\n")
    cands = sorted(load_candidates(run), key=lambda c: c.sample_id)
    assert [(c.level, c.problem_id, c.sample_id) for c in cands] == [(1, 19, 0), (1, 19, 3)]
    assert {c.model_config for c in cands} == {"my-model"}
    assert {c.backend for c in cands} == {"torch"}
    assert cands[0].sha256 == sha256_text(source)
    assert cands[0].candidate_id == "my-model/L1/19/s0"
    # sub-folders name their configuration; model_config= overrides
    sub = tmp_path / "runs" / "cfg-a"
    sub.mkdir(parents=True)
    (sub / "level_1_problem_19_sample_0_kernel.py").write_text(source)
    assert {c.model_config for c in load_candidates(tmp_path / "runs")} == {"cfg-a"}
    assert {c.model_config for c in load_candidates(tmp_path / "runs", model_config="forced")} == {"forced"}


def test_folder_without_candidates(tmp_path):
    (tmp_path / "19_ReLU.py").write_text("x = 1\n")
    with pytest.raises(CandidateLoadError):
        load_candidates(tmp_path)


def test_missing_and_malformed(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_candidates(tmp_path / "nope.jsonl")
    bad = tmp_path / "cands.jsonl"
    bad.write_text(json.dumps({"level": 1, "problem_id": 19, "code": "x", "model_config": "m"}) + "\n{not json\n")
    with pytest.raises(CandidateLoadError, match=r"cands\.jsonl:2\b"):
        load_candidates(bad)
    bad.write_text(json.dumps({"level": 1, "problem_id": 19, "model_config": "m"}) + "\n")
    with pytest.raises(CandidateLoadError, match="code"):
        load_candidates(bad)
    bad.write_text(json.dumps({"level": 1, "problem_id": 19, "code": "x"}) + "\n")
    with pytest.raises(CandidateLoadError, match="model configuration"):
        load_candidates(bad)
    bad.write_text("\n")
    with pytest.raises(CandidateLoadError):
        load_candidates(bad)
    other = tmp_path / "cands.txt"
    other.write_text("")
    with pytest.raises(CandidateLoadError):
        load_candidates(other)


def test_detect_backend(leaderboard):
    torch_src = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
    triton_src = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\n"
                  "def k(x_ptr):\n    pass\n")
    cuda_src = ("from torch.utils.cpp_extension import load_inline\nsrc = '__global__ void k() {}'\n"
                "mod = load_inline(name='m', cpp_sources='', cuda_sources=src)\n")
    assert detect_backend(torch_src) == "torch"
    assert detect_backend(triton_src) == "triton"
    assert detect_backend(cuda_src) == "cuda"
    assert detect_backend(triton_src + cuda_src) == "cuda"  # needs nvcc either way
    assert {detect_backend(c.source) for c in leaderboard} == {"cuda"}
    assert make_candidate(triton_src, level=1, problem_id=1, model_config="m").backend == "triton"
    with pytest.raises(CandidateLoadError):
        make_candidate(torch_src, level=1, problem_id=1, model_config="m", backend="opencl")


def test_write_candidates_jsonl_round_trip(tmp_path, leaderboard, problem_by_name):
    picked = [c for c in leaderboard if c.level == 1][:5]
    picked += null_candidates(problem_by_name["19_ReLU.py"])
    path = write_candidates_jsonl(picked, tmp_path / "out" / "cands.jsonl")
    again = load_candidates(path)
    fields = lambda c: (c.level, c.problem_id, c.source, c.sha256, c.backend, c.model_config, c.sample_id,  # noqa: E731
                        c.metadata, c.candidate_id)
    assert [fields(c) for c in again] == [fields(c) for c in picked]
    # written ids are the loaded (1-based) ones: reading the file again must not shift them a second time
    assert again[0].problem_id == picked[0].problem_id


def test_null_candidates(problem_by_name):
    softmax = problem_by_name["23_Softmax.py"]
    nulls = null_candidates(softmax)
    assert [c.model_config for c in nulls] == [f"null:{k}" for k in NULL_CANDIDATES]
    assert NULL_CANDIDATES[:3] == ("reference", "zeros", "mean")
    assert set(CALIBRATION_NULLS) == set(NULL_CANDIDATES) - {"reference", *HONEST_EXTRA_NULLS}
    for c in nulls:
        assert (c.level, c.problem_id, c.backend) == (1, 23, "torch")
        assert c.source.startswith(softmax.source.rstrip())
        assert "class ModelNew(Model)" in c.source
        compile(c.source, c.candidate_id, "exec")
    assert len({c.sha256 for c in nulls}) == len(NULL_CANDIDATES)
    assert [c.model_config for c in null_candidates(softmax, ["zeros"])] == ["null:zeros"]
    with pytest.raises(KeyError):
        null_candidates(softmax, ["ones"])


def test_unknown_null_kind_names_the_known_ones(problem_by_name):
    with pytest.raises(KeyError, match="unknown null candidate 'foo'; choose from .*'zeros'"):
        null_candidates(problem_by_name["19_ReLU.py"], ["foo"])
