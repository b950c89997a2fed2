"""The kernel-name and ATen-operator classifiers, on a fixture of real kernel names."""

import csv
from pathlib import Path

import pytest

from kbstudy.profiling.classify import CATEGORIES, KERNEL_RULES, classify_kernel, classify_op

FIXTURE = Path(__file__).parent / "fixtures" / "kernel_names.csv"


def _fixture_rows():
    with FIXTURE.open(newline="") as fh:
        return [(r["name"], r["expected_category"]) for r in csv.DictReader(fh)]


def test_fixture_is_well_formed():
    rows = _fixture_rows()
    assert len(rows) >= 50
    assert {cat for _, cat in rows} <= set(CATEGORIES)
    assert len({n for n, _ in rows}) == len(rows), "duplicate names in the fixture"


@pytest.mark.parametrize("name,expected", _fixture_rows(), ids=lambda v: str(v)[:60])
def test_fixture_kernel_name_category(name, expected):
    assert classify_kernel(name) == expected


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


def test_unmatched_kernel_falls_back_to_launching_operator():
    name = "void at_cuda_detail::some_new_helper<long>(long*)"
    assert classify_kernel(name) == "other"
    assert classify_kernel(name, op="aten::_embedding_bag_backward") == "embedding"
    assert classify_kernel(name, op="autograd::engine::evaluate_function: X") == "other"


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
