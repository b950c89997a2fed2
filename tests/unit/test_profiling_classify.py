"""The kernel-name and ATen-operator classifiers, on fixtures of real kernel names.

``fixtures/kernel_names.csv``: hand-written names (several GPU generations, libraries, Inductor).
``fixtures/h200_kernel_names.csv``: every distinct kernel name of the committed H200 records (both folders profiled at
commit b42557e: ``outputs/records/profiles/h200/eager`` and ``outputs/records/profiles/h200/eager-kernel-tables``, whose
kernel tables fill the two runs the first one skipped), each reviewed by hand; ``top_ops`` are the launching operators
seen, ``review_note`` says why where the category is not obvious or a rule was changed for it.
"""

import csv
import json

import pytest
from support.committed import RECORDS, REPO, committed_records

from kbstudy.harness.kernel_classes import (
    CATEGORIES,
    KERNEL_RULES,
    classify_kernel,
    classify_kernel_source,
    classify_op,
    classify_op_source,
)
from kbstudy.records.store import iter_jsonl

FIXTURES = REPO / "tests" / "profiling" / "fixtures"
FIXTURE = FIXTURES / "kernel_names.csv"
H200_FIXTURE = FIXTURES / "h200_kernel_names.csv"
H200_FOLDERS = [RECORDS / "profiles" / "h200" / name for name in ("eager", "eager-kernel-tables")]


def _fixture_rows(path=FIXTURE):
    with path.open(newline="") as fh:
        return [(r["name"], r["expected_category"]) for r in csv.DictReader(fh)]


@pytest.mark.parametrize("path,min_rows", [(FIXTURE, 50), (H200_FIXTURE, 200)], ids=["hand", "h200"])
def test_fixture_is_well_formed(path, min_rows):
    rows = _fixture_rows(path)
    assert len(rows) >= min_rows
    assert {cat for _, cat in rows} <= set(CATEGORIES)
    assert len({n for n, _ in rows}) == len(rows), "duplicate names in the fixture"


@pytest.mark.parametrize("name,expected", _fixture_rows(), ids=lambda v: str(v)[:60])
def test_fixture_kernel_name_category(name, expected):
    assert classify_kernel(name) == expected


@pytest.mark.parametrize("name,expected", _fixture_rows(H200_FIXTURE), ids=lambda v: str(v)[:60])
def test_h200_kernel_name_category(name, expected):
    # by the name rules alone: no launching operator to fall back on
    assert classify_kernel_source(name) == (expected, "name_rule")


def test_h200_fixture_holds_every_recorded_name():
    """The fixture holds exactly the distinct kernel names of both H200 folders, by their kernel tables and by their
    ``kernel_names.json`` bundles (which must agree), with the category each bundle recorded unless a review note
    says a rule was changed for the name."""
    committed_records(*H200_FOLDERS, file="kernels.jsonl")
    recorded = {r["name"] for f in H200_FOLDERS for r in iter_jsonl(f / "kernels.jsonl")
                if r.get("level", "kernel") == "kernel"}
    bundles = [json.loads((f / "kernel_names.json").read_text())["names"] for f in H200_FOLDERS]
    assert {d["name"] for b in bundles for d in b} == recorded
    with H200_FIXTURE.open(newline="") as fh:
        rows = {r["name"]: r for r in csv.DictReader(fh)}
    assert recorded - set(rows) == set(), ("new H200 kernel names: add them (kbstudy profile fixture-from-names "
                                           "--prune ... --fixture tests/profiling/fixtures/h200_kernel_names.csv)")
    assert set(rows) - recorded == set()
    for d in (d for b in bundles for d in b):
        row = rows[d["name"]]
        assert row["expected_category"] == d["category"] or "was " in row["review_note"], d["name"]


def test_rule_order_resolves_ambiguous_names():
    # a cuDNN convolution kernel says "implicit_gemm": convolution wins over GEMM
    assert classify_kernel("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64") \
        == "convolution"
    # Inductor kernels are Triton even when their fused name mentions softmax or layer norm
    assert classify_kernel("triton_red_fused__softmax_native_layer_norm_7") == "triton"
    # cuDNN SDPA mentions neither attention nor conv explicitly but is attention, not convolution (cudnn) or GEMM
    assert classify_kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128") == "attention"
    # cuDNN batch norm is normalization, not convolution
    assert classify_kernel("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>(...)") == "normalization"
    # cuBLAS split-K reduce is part of the GEMM, not a reduction
    assert classify_kernel("void splitKreduce_kernel<32, 16, int, float, float>(...)") == "gemm"
    # cuDNN SDPA helpers live in cudnn::fusion / mention cudnn: attention, not convolution
    assert classify_kernel("void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*)") == "attention"
    assert classify_kernel("at::cuda::philox::unpack_cudnn(at::PhiloxCudaState, long*, long*)") == "attention"
    # index_add's functor is called ReduceAdd: still an indexing (scatter-add) kernel, not a reduction
    assert classify_kernel("void at::native::indexFuncLargeIndex<float, long, unsigned int, 2, 2, -2, true, "
                           "at::native::(anonymous namespace)::ReduceAdd>(...)") == "elementwise"
    # a real ATen reduction still is one
    assert classify_kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
                           "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(...)") \
        == "reduction"


def test_unmatched_kernel_falls_back_to_launching_operator():
    name = "void at_cuda_detail::some_new_helper<long>(long*)"
    assert classify_kernel(name) == "other"
    assert classify_kernel(name, op="aten::_embedding_bag_backward") == "embedding"
    assert classify_kernel(name, op="autograd::engine::evaluate_function: X") == "other"
    # the source says which: the fallback must not pass for a name rule
    assert classify_kernel_source(name) == ("other", "none")
    assert classify_kernel_source(name, op="aten::_embedding_bag_backward") == ("embedding", "op_fallback")
    assert classify_kernel_source("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", op="aten::mm") == ("gemm", "name_rule")
    assert classify_op_source("aten::addmm") == ("gemm", "op_rule")
    assert classify_op_source("ProfilerStep#3") == ("other", "none")


@pytest.mark.parametrize("op,expected", [
    ("aten::addmm", "gemm"), ("aten::mm", "gemm"), ("aten::bmm", "gemm"), ("aten::linear", "gemm"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
    ("aten::_scaled_dot_product_efficient_attention", "attention"),
    ("aten::mkldnn_convolution", "convolution"), ("aten::convolution_backward", "convolution"),
    ("aten::_embedding_bag", "embedding"), ("aten::embedding_dense_backward", "embedding"),
    ("aten::_coalesce", "embedding"),
    ("aten::native_layer_norm", "normalization"), ("aten::native_batch_norm_backward", "normalization"),
    ("aten::_softmax", "softmax"), ("aten::_log_softmax_backward_data", "softmax"),
    ("aten::sum", "reduction"), ("aten::mean", "reduction"), ("aten::nll_loss_forward", "reduction"),
    ("aten::max_pool2d_with_indices", "reduction"),
    ("aten::add", "elementwise"), ("aten::mul_", "elementwise"), ("aten::copy_", "elementwise"),
    ("aten::gelu", "elementwise"), ("aten::_foreach_addcdiv_", "elementwise"),
    ("aten::add_.Tensor", "elementwise"),
    ("c10d::allreduce_", "communication"),
    ("autograd::engine::evaluate_function: AddmmBackward0", "other"), ("ProfilerStep#3", "other"),
])
def test_op_category(op, expected):
    assert classify_op(op) == expected


def test_every_rule_names_a_known_category_and_a_source():
    for cat, pattern, source in KERNEL_RULES:
        assert cat in CATEGORIES and pattern and source
