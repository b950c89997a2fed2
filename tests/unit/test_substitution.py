"""Substitution on the tiny workload configurations, in process: the mapping of operators to places in the real
models, the guard's ``not_applicable`` cases, the end-to-end check with plain-PyTorch kernels, the records' loader."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from support import substitution as S

from kbstudy.profiling import workloads
from kbstudy.substitution.adapters import module_adapters
from kbstudy.substitution.check import end_to_end_check, rel_l2
from kbstudy.substitution.kernels import shape_generic_from_variants
from kbstudy.substitution.operators import OPERATORS, bind_call
from kbstudy.substitution.places import LoadedKernel, Substitution, guard
from kbstudy.substitution.store import load_substitutions

ALL_MISSING = {name: "no kernel (test)" for name in OPERATORS}


def _discover(name: str, kernels=(), missing=None):
    torch.manual_seed(0)
    w = workloads.build(name, "cpu", tiny=True)
    sub = Substitution([LoadedKernel.load(c) for c in kernels], ALL_MISSING if missing is None else missing,
                       module_adapters())
    sub.discover(w.model, w.probe)
    return w, sub


@pytest.mark.parametrize("name, expected, absent", [
    ("gpt2_train", {"gelu_tanh", "layer_norm", "cross_entropy"}, {"gelu", "rms_norm", "relu"}),
    ("bert_infer", {"gelu", "layer_norm"}, {"gelu_tanh", "cross_entropy"}),
    ("llama_infer", {"silu", "rms_norm"}, {"layer_norm", "gelu"}),
    ("resnet50_train", {"relu", "max_pool2d", "global_avg_pool2d", "cross_entropy"}, {"gelu"}),
    ("resnet50_infer", {"relu", "max_pool2d", "global_avg_pool2d"}, {"cross_entropy"}),
    ("dlrm_dcnv2_train", {"relu", "multi_table_embedding_bag", "dcnv2_cross", "bottom_mlp"}, {"gelu"}),
    ("dlrm_dcnv2_infer", {"relu", "multi_table_embedding_bag", "dcnv2_cross", "bottom_mlp"}, {"layer_norm"}),
])
def test_operators_map_to_their_places_in_the_real_models(name, expected, absent):
    _, sub = _discover(name)
    found = {p.operator for p in sub.places.values()}
    assert expected <= found and not (absent & found)
    # with no kernel, every place is refused with the reason given, and nothing is substituted
    assert not sub.applicable and all(p.reason == "no kernel (test)" for p in sub.places.values())


def test_places_count_calls_per_step():
    _, sub = _discover("gpt2_train")
    counts = {p.operator: p.calls for p in sub.places.values()}
    cfg = workloads.build("gpt2_train", "cpu", tiny=True).config
    assert counts["gelu_tanh"] == cfg["n_layer"] and counts["layer_norm"] == 2 * cfg["n_layer"] + 1
    assert counts["cross_entropy"] == 1


def test_semantics_separate_gelu_from_its_tanh_approximation():
    x = torch.randn(3)
    tanh, exact = OPERATORS["gelu_tanh"], OPERATORS["gelu"]
    assert tanh.semantics_of(bind_call("gelu", (x,), {"approximate": "tanh"})) is None
    assert tanh.semantics_of(bind_call("gelu", (x,), {})) is not None
    assert exact.semantics_of(bind_call("gelu", (x,), {})) is None


GELU_PROBLEM = S.problem("F.gelu(x, approximate='tanh')", "[torch.rand(2, 32, 256)]")


def _guard(kernel, op, x, params=None, needs_grad=False):
    return guard(kernel, OPERATORS[op], [x], params or {}, needs_grad)


def test_guard_refuses_dtype_layout_shape_device_gradient_and_load_errors():
    k = LoadedKernel.load(S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(S.GELU_TANH)))
    assert _guard(k, "gelu_tanh", torch.rand(2, 32, 256)) is None
    assert "dtype bfloat16" in _guard(k, "gelu_tanh", torch.rand(2, 32, 256, dtype=torch.bfloat16))
    assert "layout strided" in _guard(k, "gelu_tanh", torch.rand(2, 256, 32).transpose(1, 2))
    assert "not shape-generic" in _guard(k, "gelu_tanh", torch.rand(4, 32, 256))
    generic = LoadedKernel.load(S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(S.GELU_TANH), shape_generic=True))
    assert _guard(generic, "gelu_tanh", torch.rand(4, 7)) is None
    cuda = LoadedKernel.load(S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(S.GELU_TANH), backend="cuda"))
    assert "CUDA code" in _guard(cuda, "gelu_tanh", torch.rand(2, 32, 256))
    softmax = LoadedKernel.load(S.choice("softmax_lastdim", GELU_PROBLEM, S.kernel("torch.softmax(x, -1)")))
    assert "needs a gradient" in _guard(softmax, "softmax_lastdim", torch.rand(2, 32, 256), needs_grad=True)
    broken = LoadedKernel.load(S.choice("gelu_tanh", GELU_PROBLEM, "raise RuntimeError('no build')\n"))
    assert "does not load: RuntimeError: no build" in _guard(broken, "gelu_tanh", torch.rand(2, 32, 256))
    channels_last = torch.rand(2, 8, 4, 4).contiguous(memory_format=torch.channels_last)
    assert "layout channels_last" in _guard(generic, "gelu_tanh", channels_last)


def test_guard_compares_pooling_parameters_even_for_a_shape_generic_kernel():
    problem = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
               "    def __init__(self, kernel_size, stride, padding, dilation):\n        super().__init__()\n\n"
               "def get_inputs():\n    return [torch.rand(2, 8, 32, 32)]\n\ndef get_init_inputs():\n    return [2, 2, 0, 1]\n")
    k = LoadedKernel.load(S.choice("max_pool2d", problem, S.kernel("x"), shape_generic=True))
    x = torch.rand(2, 8, 16, 16)
    same = {"kernel_size": 2, "stride": (2, 2), "padding": 0, "dilation": 1}
    assert _guard(k, "max_pool2d", x, same) is None
    assert "kernel_size=3" in _guard(k, "max_pool2d", x, {**same, "kernel_size": 3})


def test_bf16_places_are_refused_for_fp32_kernels():
    # the models on the GPU run their activations in bf16; here the input is cast to bf16 to show the refusal
    _, sub = _discover("gpt2_train", [S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(S.GELU_TANH), shape_generic=True)])
    assert [p.operator for p in sub.applicable] == ["gelu_tanh"]
    k = sub.kernels["gelu_tanh"]
    assert "kernel verified for float32 only" in _guard(k, "gelu_tanh", torch.rand(3, dtype=torch.bfloat16))


@pytest.mark.parametrize("source, passes", [(S.GELU_TANH, True), (S.WRONG_GELU, False)])
def test_end_to_end_check_passes_a_correct_gelu_and_catches_a_wrong_one(source, passes):
    w, sub = _discover("gpt2_train", [S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(source), shape_generic=True)])
    result = end_to_end_check(w.model, w.probe, sub, train=True, precision=w.precision)
    assert result["e2e_passed"] is passes
    assert set(result["e2e_rel_l2"]) == {"outputs", "loss", "grads"}
    if passes:
        assert result["e2e_rel_l2"]["grads"] < 1e-5  # the backward is PyTorch's GELU backward at the same input
    else:
        assert result["e2e_rel_l2"]["outputs"] > 1e-2


def test_substitution_is_undone_after_the_context():
    w, sub = _discover("gpt2_train", [S.choice("gelu_tanh", GELU_PROBLEM, S.kernel(S.GELU_TANH), shape_generic=True)])
    original = F.gelu
    with sub:
        assert F.gelu is not original
    assert F.gelu is original


def test_rel_l2_compares_sparse_gradients_row_for_row():
    i = torch.tensor([[0, 2, 0]])
    a = torch.sparse_coo_tensor(i, torch.ones(3, 2), (4, 2))
    b = torch.sparse_coo_tensor(torch.tensor([[2, 0, 0]]), torch.ones(3, 2), (4, 2))
    assert rel_l2([a], [b]) == pytest.approx(0.0)
    c = torch.sparse_coo_tensor(torch.tensor([[1, 0, 0]]), torch.ones(3, 2), (4, 2))
    assert rel_l2([a], [c]) == float("inf")


def test_load_substitutions_keeps_the_newest_record_per_case(tmp_path):
    rows = [{"workload": "gpt2_train", "config": "eager", "kernel_source": "llm", "hardware": "H", "outcome": "error",
             "created_utc": "2026-01-01T00:00:00"},
            {"workload": "gpt2_train", "config": "eager", "kernel_source": "llm", "hardware": "H",
             "outcome": "nothing_applicable", "saving_fraction": 0.0, "places_not_applicable": [{}, {}],
             "created_utc": "2026-01-02T00:00:00"}]
    (tmp_path / "substitutions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame = load_substitutions(tmp_path)
    assert len(frame) == 1 and frame.outcome[0] == "nothing_applicable" and frame.n_places_not_applicable[0] == 2


@pytest.mark.parametrize("name", workloads.SEVEN)
def test_every_workload_exposes_its_model_and_a_probe(name):
    torch.manual_seed(0)
    w = workloads.build(name, "cpu", tiny=True)
    outputs, loss = w.probe()
    assert isinstance(w.model, torch.nn.Module) and outputs is not None
    assert (loss is not None) == (w.mode == "train")


def test_shape_generic_comes_from_the_verifiers_variants_when_named():
    record = {"kbstudy_variants": {"fresh_seeds": "passed", "shapes": "passed", "layouts": "failed"}}
    assert shape_generic_from_variants(record, ("shapes",))
    assert not shape_generic_from_variants(record, ("shapes", "layouts"))
    assert not shape_generic_from_variants(record, ())
    assert not shape_generic_from_variants({}, ("shapes",))


def test_forward_only_cross_entropy_kernel_trains_with_pytorchs_backward():
    problem = S.problem("F.cross_entropy(x, xs[1])", "[torch.rand(64, 256), torch.randint(0, 256, (64,))]")
    kernel = S.kernel("-(torch.log_softmax(x, -1).gather(1, xs[1][:, None])).mean().detach()")  # no autograd
    w, sub = _discover("gpt2_train", [S.choice("cross_entropy", problem, kernel)])
    assert [p.operator for p in sub.applicable] == ["cross_entropy"]
    result = end_to_end_check(w.model, w.probe, sub, train=True, precision=w.precision)
    assert result["e2e_passed"] and result["e2e_rel_l2"]["grads"] < 1e-5
