"""Problem versions (v0 names, what changed since v0), operator categories of both versions, and the static scan of
float32-only CUDA kernels, on the shared KernelBench data."""

from __future__ import annotations

import collections

import pytest

from kbstudy.analysis.headline import DTYPE_ERROR_RE
from kbstudy.harness.candidates import load_candidates, make_candidate, write_candidates_jsonl
from kbstudy.harness.problems import (
    PAPER_CATEGORIES,
    V0_NAMES,
    load_problems,
    operator_category,
    paper_category,
    version_changes,
)
from kbstudy.verdict.static_scan import DTYPE_SCAN_KEY, scan_dtype_support


@pytest.fixture(scope="module")
def v0_problems(kernelbench_dir):
    return load_problems(kernelbench_dir / "kernelbench_v0_problems.jsonl")


@pytest.fixture(scope="module")
def leaderboard_level1(kernelbench_dir):
    return load_candidates(kernelbench_dir / "leaderboard_kernels.jsonl", levels=[1])


def test_every_level1_problem_of_both_versions_has_a_paper_category(all_problems, v0_problems):
    for problems in (all_problems, v0_problems):
        level1 = [p for p in problems if p.level == 1]
        assert len(level1) == 100
        assert not [p.name for p in level1 if operator_category(p.name) == "other"]
        assert {paper_category(p.name) for p in level1} <= set(PAPER_CATEGORIES)
    current = collections.Counter(paper_category(p.name) for p in all_problems if p.level == 1)
    assert current == {"convolution": 35, "matmul": 18, "activation": 15, "reduction": 11, "normalization": 8,
                       "pooling": 6, "loss": 6, "other": 1}  # other: 97_ScaledDotProductAttention (attention)
    v0 = collections.Counter(paper_category(p.name) for p in v0_problems if p.level == 1)
    assert v0 == {"convolution": 34, "matmul": 18, "activation": 15, "reduction": 12, "normalization": 8,
                  "pooling": 6, "loss": 7}
    assert paper_category("attention") == "other" and paper_category("dlrm") == "other"
    assert paper_category("87_conv_pointwise_2D.py") == "convolution"


def test_v0_problems_replaced_in_v0_1_keep_their_own_names(v0_problems, all_problems):
    v0 = {(p.level, p.problem_id): p for p in v0_problems}
    current = {(p.level, p.problem_id): p for p in all_problems}
    assert v0[(1, 50)].name == "50_Product_reduction_over_a_dimension.py" and "torch.prod" in v0[(1, 50)].source
    assert v0[(1, 97)].name == "97_CosineSimilarityLoss.py" and "cosine_similarity" in v0[(1, 97)].source
    assert current[(1, 50)].name.startswith("50_conv_standard_2D")
    assert v0[(1, 50)].category == "reduction" and v0[(1, 97)].category == "loss"
    for key, name in V0_NAMES.items():
        assert v0[key].name == name != current[key].name
    assert v0[(1, 19)].name == current[(1, 19)].name == "19_ReLU.py"  # the others keep the current names


def test_version_changes_level1(v0_problems, all_problems):
    changes = version_changes([p for p in v0_problems if p.level == 1], [p for p in all_problems if p.level == 1])
    assert len(changes) == 100
    by_kind = collections.defaultdict(list)
    for c in changes:
        by_kind[c.change].append(c.problem_id)
    assert by_kind["replaced"] == [50, 97]
    assert by_kind["reference_changed"] == [12, 38, 92]  # diag@B -> broadcast, sum -> mean, exclusive cumsum fixed
    assert len(by_kind["sizes_or_inputs"]) == 95 and not by_kind["identical"]
    same = [p for p in all_problems if p.level == 1][:3]
    assert {c.change for c in version_changes(same, same)} == {"identical"}


def test_every_level1_leaderboard_kernel_is_float32_only(leaderboard_level1):
    assert len(leaderboard_level1) == 264
    scans = [c.metadata[DTYPE_SCAN_KEY] for c in leaderboard_level1]
    assert all(s["float32_only"] and not s["bf16_support"] for s in scans)
    first = collections.Counter(s["evidence"][0].split(" (")[0] for s in scans)
    assert first == {"data_ptr<float>": 257, "AT_DISPATCH_FLOATING_TYPES: float and double only": 7}
    guarded = [c for c, s in zip(leaderboard_level1, scans) if s["torch_fallback"]]
    assert [(c.model_config, c.problem_id) for c in guarded] == [("gpt-o1", 48)]  # its ModelNew checks float32
    assert scan_dtype_support(leaderboard_level1[0].source).as_metadata() == scans[0]


def test_scan_recognises_bf16_paths_casts_and_other_backends(leaderboard_level1):
    float_src = next(c.source for c in leaderboard_level1 if c.model_config == "claude-3.5-sonnet")
    dispatch = float_src.replace("data_ptr<float>", "data_ptr<scalar_t>") + (
        "\n# AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), \"k\", ([&] {}));\n")
    # the dispatch line sits in a Python comment, not a C++ one: the scan reads the whole source, so it counts
    assert scan_dtype_support(dispatch).bf16_support and not scan_dtype_support(dispatch).float32_only
    commented = float_src.replace("data_ptr<float>()", "data_ptr<float>() /* data_ptr<float> */")
    assert scan_dtype_support(commented).float32_only
    cast = float_src.replace("def forward(self, ", "def forward(self, *a):\n        a = [t.float() for t in a]\n"
                                                   "    def _unused(self, ", 1)
    assert scan_dtype_support(cast).casts_to_float32 and not scan_dtype_support(cast).float32_only
    triton_src = "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr):\n    pass\n"
    assert scan_dtype_support(triton_src).as_metadata()["float32_only"] is False
    assert DTYPE_SCAN_KEY not in make_candidate(triton_src, level=1, problem_id=1, model_config="t").metadata


def test_scan_is_recorded_on_candidates_and_survives_a_round_trip(leaderboard_level1, tmp_path):
    path = write_candidates_jsonl(leaderboard_level1[:3], tmp_path / "c.jsonl")
    again = load_candidates(path)
    assert [c.metadata for c in again] == [c.metadata for c in leaderboard_level1[:3]]


@pytest.mark.parametrize("message", [
    # the messages torch 2.13 raises for a float32-only extension given bf16/fp16 tensors (a data_ptr<float>()
    # and an AT_DISPATCH_FLOATING_TYPES extension, built with load_inline and called on CPU tensors)
    "RuntimeError: expected scalar type Float but found BFloat16",
    "RuntimeError: expected scalar type Float but found Half",
    "NotImplementedError: \"softplus_cuda\" not implemented for 'BFloat16'",
    # the leaderboard kernels' own checks (gpt-o1 29, gemini-1.5-flash 96)
    "RuntimeError: input must be a float tensor",
    "RuntimeError: predictions must be float",
])
def test_dtype_error_messages_are_recognised(message):
    assert DTYPE_ERROR_RE.search(message)


def test_other_errors_are_not_dtype_errors():
    for message in ("TypeError: ModelNew.forward() takes 3 positional arguments but 4 were given",
                    "run: no reply within 60 s", "CUDA error: an illegal memory access was encountered"):
        assert not DTYPE_ERROR_RE.search(message)
