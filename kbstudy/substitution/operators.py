"""Operators a substitution maps: each names its semantics, where it runs in a workload model, and which problems'
kernels compute it.

A *place* is where the operator runs in the model. Two kinds:

* a **call** of a ``torch.nn.functional`` function (``F.gelu``, ``F.relu``, ...): the models call these by attribute
  on ``torch.nn.functional`` (modules such as ``nn.ReLU``, ``nn.LayerNorm`` and ``nn.EmbeddingBag`` call them too), so
  a substitution replaces the attribute for the time it is applied and every call goes through the guard. A call
  whose arguments give it other semantics (``F.gelu(x)`` for the ``gelu_tanh`` operator, ``F.softmax`` over another
  dimension) is not a place of that operator at all: :attr:`Operator.semantics_of` says so.
* a **module** of a given class (``LlamaRMSNorm``, the DLRM model's 26 ``nn.EmbeddingBag``): the instance's
  ``forward`` is replaced while the substitution is applied.

Problems map to operators in :data:`LEVEL1_PROBLEM_OPERATORS` (KernelBench level 1, by problem id, the same id in the
v0 and current sets) and :data:`DLRM_PROBLEM_OPERATORS` (DLRM-Bench). The rule: a problem maps to an operator when its
``Model.forward`` computes exactly that operator with default arguments (e.g. 88_MinGPTNewGelu is GELU with the tanh
approximation, GPT-2's ``F.gelu(approximate="tanh")``); 40_LayerNorm normalises over the last three dimensions, so it
maps to ``layer_norm`` and the guard refuses every last-dimension LayerNorm of the models by shape.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable

import torch
import torch.nn.functional as F

#: The ``torch.nn.functional`` originals, taken at import (before any substitution replaces an attribute).
ORIGINAL_FUNCTIONS = {name: getattr(F, name) for name in
                      ("relu", "gelu", "silu", "softmax", "layer_norm", "cross_entropy", "max_pool2d",
                       "adaptive_avg_pool2d")}


def _parameters(input, approximate="none", inplace=False, dim=None, _stacklevel=3, dtype=None,  # noqa: A002
                normalized_shape=None, weight=None, bias=None, eps=1e-5, target=None, size_average=None,
                ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0, kernel_size=None,
                stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False, output_size=None):
    """A template only: its parameters name every argument of the functions in :data:`ORIGINAL_FUNCTIONS`."""


#: Each function's parameters in order (some are builtins, which ``inspect.signature`` cannot read).
_PARAMETERS = {
    "relu": ("input", "inplace"), "gelu": ("input", "approximate"), "silu": ("input", "inplace"),
    "softmax": ("input", "dim", "_stacklevel", "dtype"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "cross_entropy": ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                      "label_smoothing"),
    "max_pool2d": ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "adaptive_avg_pool2d": ("input", "output_size"),
}
_DEFAULTS = {k: v.default for k, v in inspect.signature(_parameters).parameters.items()}
_SIGNATURES = {name: inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                          default=_DEFAULTS[p] if i else inspect.Parameter.empty)
                                        for i, p in enumerate(params)]) for name, params in _PARAMETERS.items()}


def bind_call(function: str, args: tuple, kwargs: dict) -> dict:
    """The arguments of a call of ``F.<function>`` by parameter name, defaults filled in (``max_pool2d``'s stride
    defaults to its kernel size, as in PyTorch)."""
    bound = _SIGNATURES[function].bind(*args, **kwargs)
    bound.apply_defaults()
    call = dict(bound.arguments)
    if function == "max_pool2d" and call["stride"] in (None, []):
        call["stride"] = call["kernel_size"]
    return call


def _elementwise(approximate: str | None = None) -> Callable[[dict], str | None]:
    def semantics_of(call: dict) -> str | None:
        if approximate is not None and call.get("approximate", "none") != approximate:
            return f"approximate={call.get('approximate')!r}"
        return None
    return semantics_of


def _softmax_lastdim(call: dict) -> str | None:
    x, dim = call["input"], call["dim"]
    if dim is None or dim not in (-1, x.dim() - 1) or call.get("dtype") is not None:
        return f"softmax over dim {dim}"
    return None


def _cross_entropy_default(call: dict) -> str | None:
    extra = {k: call[k] for k in ("weight", "size_average", "reduce") if call[k] is not None}
    if extra or call["reduction"] != "mean" or call["label_smoothing"] != 0.0 or call["target"].is_floating_point():
        return "cross-entropy with non-default arguments"
    return None


def _global_avg_pool(call: dict) -> str | None:
    return None if call["output_size"] in (1, (1, 1)) else f"adaptive pool to {call['output_size']}"


def _any(call: dict) -> str | None:
    return None


def _relu_backward(grad, x, out, call):
    return grad * (out > 0).to(grad.dtype)


def _gelu_backward(approximate: str):
    def backward(grad, x, out, call):
        return torch.ops.aten.gelu_backward(grad, x, approximate=approximate)
    return backward


def _silu_backward(grad, x, out, call):
    return torch.ops.aten.silu_backward(grad, x)


def _cross_entropy_backward(grad, x, out, call):
    target = call["target"]
    probs = torch.softmax(x.float(), dim=-1)
    probs[torch.arange(x.shape[0], device=x.device), target] -= 1.0
    return (probs * (grad / x.shape[0])).to(x.dtype)


@dataclasses.dataclass(frozen=True)
class Operator:
    """One operator with its semantics.

    Attributes:
        name: short name (``gelu_tanh``).
        semantics: the operator in words, as the records carry it.
        function: the ``torch.nn.functional`` function whose calls are its places (or ``None``).
        module_class: the class name of the modules that are its places (or ``None``).
        semantics_of: for a bound call, ``None`` when the call computes this operator, else what it computes instead.
        tensor_args: the call's arguments passed to the kernel, in the problem's ``get_inputs()`` order.
        init_args: the call's arguments that a problem passes to ``Model(*get_init_inputs())`` (pooling parameters):
            a place applies only where they equal the verified problem's.
        size_params: parameters that are sizes (table rows, widths): compared like shapes, so a shape-generic
            kernel takes any value; the others (pooling windows) are semantics and always compared.
        backward: ``(grad_out, input, output, call) -> grad_input`` in PyTorch, so that a forward-only kernel can sit
            in a training step (the backward stays PyTorch's); ``None``: the operator cannot take a gradient this way.
    """

    name: str
    semantics: str
    function: str | None = None
    module_class: str | None = None
    semantics_of: Callable[[dict], str | None] = _any
    tensor_args: tuple[str, ...] = ("input",)
    init_args: tuple[str, ...] = ()
    size_params: tuple[str, ...] = ()
    backward: Callable | None = None


OPERATORS: dict[str, Operator] = {op.name: op for op in (
    Operator("relu", "ReLU, elementwise", "relu", backward=_relu_backward),
    Operator("gelu", "GELU (exact, erf), elementwise", "gelu", semantics_of=_elementwise("none"),
             backward=_gelu_backward("none")),
    Operator("gelu_tanh", "GELU with the tanh approximation, elementwise", "gelu", semantics_of=_elementwise("tanh"),
             backward=_gelu_backward("tanh")),
    Operator("silu", "SiLU / Swish x * sigmoid(x), elementwise", "silu", backward=_silu_backward),
    Operator("softmax_lastdim", "softmax over the last dimension", "softmax", semantics_of=_softmax_lastdim),
    Operator("layer_norm", "LayerNorm with affine weight and bias", "layer_norm"),
    Operator("rms_norm", "RMSNorm over the last dimension with a weight (Llama)", module_class="LlamaRMSNorm"),
    Operator("cross_entropy", "cross-entropy of logits [N, C] with class targets [N], mean reduction",
             "cross_entropy", semantics_of=_cross_entropy_default, tensor_args=("input", "target"),
             backward=_cross_entropy_backward),
    Operator("max_pool2d", "2-D max pooling", "max_pool2d",
             init_args=("kernel_size", "stride", "padding", "dilation")),
    Operator("global_avg_pool2d", "2-D average pooling over the whole plane", "adaptive_avg_pool2d",
             semantics_of=_global_avg_pool, init_args=("output_size",)),
    Operator("multi_table_embedding_bag", "26 sum EmbeddingBags of a DLRM model, outputs concatenated",
             module_class="DLRMDCNv2.embeddings", size_params=("table_rows", "multi_hot", "embedding_dim")),
    Operator("dcnv2_cross", "DCN-v2 low-rank cross network", module_class="LowRankCrossNet",
             size_params=("in_features", "low_rank")),
    Operator("bottom_mlp", "DLRM bottom MLP, Linear + ReLU x 3", module_class="DLRMDCNv2.bottom",
             size_params=("num_dense_features", "hidden1", "hidden2", "out_features")),
)}

#: KernelBench level-1 problem id -> operator (the same id in the v0 and current problem sets).
LEVEL1_PROBLEM_OPERATORS = {19: "relu", 26: "gelu", 88: "gelu_tanh", 25: "silu", 23: "softmax_lastdim",
                            40: "layer_norm", 36: "rms_norm", 95: "cross_entropy", 42: "max_pool2d",
                            45: "global_avg_pool2d"}
#: DLRM-Bench problem id -> operator (our Triton kernels, the expert case).
#: Problem 1 (one EmbeddingBag) is not listed: problem 3 computes all 26 tables of the model, table 20 (problem 1's shape)
#: among them, in one launch.
DLRM_PROBLEM_OPERATORS = {3: "multi_table_embedding_bag", 10: "dcnv2_cross", 11: "bottom_mlp"}
