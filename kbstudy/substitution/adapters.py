"""Module places: how a kernel's ``ModelNew`` takes the place of a module of a workload model.

Each adapter says which modules are places (``find``), what the guard sees there (``place_inputs``: the tensors
passed to the kernel and the parameters compared with ``Model``'s verified init parameters), what else refuses the
place (``refuse``: parameter dtypes, gradients), and the forward that replaces the module's (``forward``). The kernel's
``ModelNew`` is built on the ``meta`` device and given the model's own submodules (tables, linear layers), so it
computes with the model's parameters and allocates none of its own.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from kbstudy.profiling.recommender_models import DLRMDCNv2, LowRankCrossNet
from kbstudy.profiling.transformer_models import LlamaRMSNorm


def _instances(cls):
    return lambda model: [(path or "model", m) for path, m in model.named_modules() if isinstance(m, cls)]


def _param_dtype_reason(module: nn.Module, kernel) -> str | None:
    want = {"fp32": torch.float32, "bf16": torch.bfloat16}.get(kernel.choice.precision)
    dtypes = {p.dtype for p in module.parameters()}
    if want is not None and dtypes != {want}:
        names = sorted(str(d).replace("torch.", "") for d in dtypes)
        return f"parameters {'/'.join(names)}; kernel verified with {kernel.choice.precision} parameters"
    return None


def _meta_model_new(kernel, init_args) -> nn.Module:
    with torch.device("meta"):
        return kernel.namespace["ModelNew"](*init_args)


class _EmbeddingBags(torch.autograd.Function):
    """The 26-table kernel's forward with the gradient eager ``nn.EmbeddingBag(mode="sum")`` gives its tables:
    sparse (uncoalesced COO, one row per lookup) when the bags are ``sparse=True``, else dense."""

    @staticmethod
    def forward(ctx, new, indices, multi_hot, sparse_grad, *weights):
        ctx.save_for_backward(indices)
        ctx.multi_hot, ctx.sparse_grad, ctx.shapes = multi_hot, sparse_grad, [w.shape for w in weights]
        return new(indices)

    @staticmethod
    def backward(ctx, grad):
        (indices,) = ctx.saved_tensors
        grads, col = [], 0
        for t, (hot, shape) in enumerate(zip(ctx.multi_hot, ctx.shapes)):
            ids = indices[:, col:col + hot].reshape(-1)
            rows = grad[:, t * shape[1]:(t + 1) * shape[1]].repeat_interleave(hot, dim=0)
            col += hot
            if ctx.sparse_grad:
                grads.append(torch.sparse_coo_tensor(ids.unsqueeze(0), rows, shape))
            else:
                grads.append(torch.zeros(shape, dtype=grad.dtype, device=grad.device).index_add_(0, ids, rows))
        return (None, None, None, None, *grads)


class MultiTableEmbeddingBag:
    """DLRM-Bench problem 3 in place of the DLRM model's 26 ``nn.EmbeddingBag`` lookups (the model's ``forward`` is
    replaced: the 26 index tensors are concatenated, as the problem takes them, and one launch computes every bag)."""

    find = staticmethod(_instances(DLRMDCNv2))

    def __init__(self):
        self._multi_hot: dict[int, list[int]] = {}

    def place_inputs(self, module, args, kwargs):
        sparse = args[1]
        self._multi_hot[id(module)] = [int(s.shape[1]) for s in sparse]
        bags = list(module.embeddings)
        return [torch.cat(sparse, dim=1)], {"table_rows": [b.num_embeddings for b in bags],
                                            "multi_hot": self._multi_hot[id(module)],
                                            "embedding_dim": bags[0].embedding_dim}

    def refuse(self, kernel, module, needs_grad):
        if any(b.mode != "sum" for b in module.embeddings):
            return "an EmbeddingBag is not mode='sum'"
        return _param_dtype_reason(module.embeddings, kernel)

    def forward(self, kernel, module):
        bags = module.embeddings
        multi_hot = self._multi_hot[id(module)]
        new = _meta_model_new(kernel, ([b.num_embeddings for b in bags], multi_hot, bags[0].embedding_dim))
        new.bags = bags
        sparse_grad = bool(bags[0].sparse)

        def forward(dense, sparse):
            indices = torch.cat(sparse, dim=1)
            weights = [b.weight for b in bags]
            if torch.is_grad_enabled() and weights[0].requires_grad:
                emb = _EmbeddingBags.apply(new, indices, multi_hot, sparse_grad, *weights)
            else:
                emb = new(indices)
            x = torch.cat([module.bottom(dense), emb], dim=1)
            return module.top(module.crossnet(x)).squeeze(1)

        return forward


class _ForwardOnlyModule:
    """A module place whose kernel is forward-only (no backward): refused where the place needs a gradient."""

    children: tuple[str, ...] = ()

    def refuse(self, kernel, module, needs_grad):
        if needs_grad:
            return "the place needs a gradient; the kernel is forward-only"
        return _param_dtype_reason(module, kernel)

    def forward(self, kernel, module):
        new = _meta_model_new(kernel, list(kernel.signature.init_params.values()))
        for name, child in self.bind(module).items():
            setattr(new, name, child)
        return new.forward


class DCNv2Cross(_ForwardOnlyModule):
    """DLRM-Bench problem 10 in place of ``LowRankCrossNet`` (the kernel's ``V``/``W`` are the module's)."""

    find = staticmethod(_instances(LowRankCrossNet))

    def place_inputs(self, module, args, kwargs):
        return [args[0]], {"in_features": module.V[0].in_features, "low_rank": module.V[0].out_features,
                           "num_layers": len(module.V)}

    def bind(self, module):
        return {"V": module.V, "W": module.W}


class BottomMLP(_ForwardOnlyModule):
    """DLRM-Bench problem 11 in place of the DLRM model's bottom MLP (``nn.Sequential`` of Linear + ReLU)."""

    @staticmethod
    def find(model):
        return [(f"{path or 'model'}.bottom", m.bottom) for path, m in model.named_modules()
                if isinstance(m, DLRMDCNv2)]

    def place_inputs(self, module, args, kwargs):
        linears = [m for m in module if isinstance(m, nn.Linear)]
        sizes = [linears[0].in_features] + [m.out_features for m in linears]
        return [args[0]], dict(zip(("num_dense_features", "hidden1", "hidden2", "out_features"), sizes))

    def bind(self, module):
        return {"layers": nn.ModuleList(m for m in module if isinstance(m, nn.Linear))}


class RMSNorm(_ForwardOnlyModule):
    """Llama's RMSNorm: the level-1 RMSNorm problem normalises a 4-D tensor over dimension 1 with no weight, so no
    kernel of it binds to a weighted last-dimension RMSNorm: every place is refused after the guard's checks."""

    find = staticmethod(_instances(LlamaRMSNorm))

    def place_inputs(self, module, args, kwargs):
        return [args[0]], {}

    def refuse(self, kernel, module, needs_grad):
        return "the kernel's problem normalises over dimension 1 without a weight; the place has a weight"


#: Module-place operator -> adapter (see :class:`kbstudy.substitution.places.Substitution`).
def module_adapters() -> dict:
    adapters = {"multi_table_embedding_bag": MultiTableEmbeddingBag(), "dcnv2_cross": DCNv2Cross(),
                "bottom_mlp": BottomMLP(), "rms_norm": RMSNorm()}
    return {name: (a.find, a) for name, a in adapters.items()}
