"""Places, the guard, and applying a substitution to a workload model.

:class:`Substitution` holds, per operator, a loaded kernel (or why there is none). ``discover(probe)`` runs the
workload's forward once with every place instrumented and the original code computing, and decides each place with
:func:`guard`; ``with substitution:`` then routes the applicable places to their kernels and leaves the others to
PyTorch. A place's key names its operator, where it runs and the shape/dtype/layout it sees
(``gelu_tanh @ F.gelu [8, 1024, 3072] bfloat16 contiguous``; ``multi_table_embedding_bag @ model (DLRMDCNv2)``).

The guard refuses (``not_applicable`` with the reason) a place where: no verified kernel exists for the operator;
the kernel does not load; the kernel is CUDA code and the place is not on a CUDA device; an input's dtype differs from
the verified one (every leaderboard kernel is float32-only: a bf16 place is refused, not cast); an input is not
contiguous (``channels_last``); a shape differs from the verified one unless the kernel is ``shape_generic``; the
place's parameters (pooling sizes, table sizes) differ from ``Model``'s verified init parameters; the place needs a
gradient and the operator has no PyTorch backward to pair with a forward-only kernel.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from kbstudy.substitution.kernels import KernelChoice, VerifiedSignature, kernel_namespace, verified_signature
from kbstudy.substitution.operators import OPERATORS, ORIGINAL_FUNCTIONS, Operator, bind_call


@dataclasses.dataclass
class LoadedKernel:
    """A kernel ready for its places: the choice, what it was verified on, and its namespace (or the load error)."""

    choice: KernelChoice
    signature: VerifiedSignature | None
    namespace: dict | None
    error: str | None = None
    instances: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def load(cls, choice: KernelChoice) -> "LoadedKernel":
        """What ``choice`` was verified on; its source is executed later, by :meth:`ensure_loaded`, and only when a
        place passes every other rule of the guard (a CUDA build costs tens of seconds)."""
        try:
            return cls(choice, verified_signature(choice), None)
        except Exception as exc:  # a problem that does not build on the meta device: no place can be checked
            return cls(choice, None, None, f"verified signature: {type(exc).__name__}: {exc}"[:300])

    def ensure_loaded(self) -> bool:
        """Execute the kernel's source once; ``False`` (and :attr:`error` set) when it raises."""
        if self.namespace is None and self.error is None:
            try:
                self.namespace = kernel_namespace(self.choice)
            except BaseException as exc:  # noqa: BLE001 - a kernel that does not load contributes nothing, recorded
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self.error = f"{type(exc).__name__}: {exc}"[:300]
        return self.error is None

    def stateless(self, device) -> nn.Module:
        """``ModelNew(*init inputs)`` on ``device`` (built once): for operators without parameters."""
        key = str(device)
        if key not in self.instances:
            with torch.device(device):
                self.instances[key] = self.namespace["ModelNew"](*self.signature.init_params.values())
        return self.instances[key]


@dataclasses.dataclass
class Place:
    """One place of an operator in a model, with the guard's decision."""

    operator: str
    where: str
    calls: int = 0
    reason: str | None = None

    @property
    def applicable(self) -> bool:
        return self.reason is None

    @property
    def key(self) -> str:
        return f"{self.operator} @ {self.where}"

    def as_dict(self) -> dict:
        return {"operator": self.operator, "where": self.where, "calls_per_step": self.calls,
                **({"reason": self.reason} if self.reason else {})}


def _layout(t: torch.Tensor) -> str:
    if t.is_contiguous():
        return "contiguous"
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    return "strided"


def _describe(tensors) -> str:
    return "; ".join(f"{list(t.shape)} {str(t.dtype).replace('torch.', '')} {_layout(t)}" for t in tensors)


def _same(a, b) -> bool:
    """Parameters compared as PyTorch reads them: a pooling size 3 equals (3, 3); lists equal tuples."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (list, tuple)):
        a, b = b, a
    if isinstance(b, (list, tuple)):
        return all(_same(a, y) for y in b)
    return a == b


def guard(kernel: LoadedKernel | None, op: Operator, tensors, place_params: dict, needs_grad: bool,
          missing: str | None = None) -> str | None:
    """``None`` when ``kernel`` may compute this place, else why not (module docstring lists the rules)."""
    if kernel is None:
        return missing or "no kernel for this operator"
    if kernel.error:
        return f"kernel does not load: {kernel.error}"
    sig, choice = kernel.signature, kernel.choice
    if choice.backend == "cuda" and any(t.device.type != "cuda" for t in tensors):
        return f"kernel is CUDA code; the place runs on {tensors[0].device.type}"
    if len(tensors) != len(sig.shapes):
        return f"{len(tensors)} inputs; kernel verified with {len(sig.shapes)}"
    for t, dtype in zip(tensors, sig.dtypes):
        if t.dtype != dtype:
            return (f"input dtype {str(t.dtype).replace('torch.', '')}; kernel verified for "
                    f"{str(dtype).replace('torch.', '')} only")
    for t in tensors:
        if not t.is_contiguous():
            return f"input layout {_layout(t)}; kernel verified on contiguous inputs"
    if not choice.shape_generic:
        for t, shape in zip(tensors, sig.shapes):
            if tuple(t.shape) != tuple(shape):
                return f"shape {list(t.shape)} differs from the verified {list(shape)} (kernel not shape-generic)"
    for name, value in place_params.items():
        if choice.shape_generic and name in op.size_params:
            continue
        if name not in sig.init_params:
            return f"place has {name}={value!r}; the kernel's problem has no such parameter"
        if not _same(sig.init_params[name], value):
            return f"{name}={value!r} differs from the verified {sig.init_params[name]!r}"
    if needs_grad and op.backward is None and op.module_class is None:
        return "the place needs a gradient; the kernel is forward-only and the operator has no PyTorch backward here"
    if not kernel.ensure_loaded():
        return f"kernel does not load: {kernel.error}"
    return None


class _ForwardKernel(torch.autograd.Function):
    """A forward-only kernel inside autograd: the forward is the kernel's, the backward the operator's PyTorch one."""

    @staticmethod
    def forward(ctx, run, backward, call, x, *rest):
        out = run(x, *rest)
        ctx.save_for_backward(x, out)
        ctx.backward_fn, ctx.call, ctx.n_rest = backward, call, len(rest)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        return (None, None, None, ctx.backward_fn(grad, x, out, ctx.call)) + (None,) * ctx.n_rest


class Substitution:
    """Kernels for operators, applied to one model's places (module docstring).

    Args:
        kernels: loaded kernels, at most one per operator.
        missing: operators to map without a kernel (their places are found and refused), with the reason.
        module_adapters: per module-place operator, ``(find(model) -> [(path, module)], adapter)``; see
            :mod:`kbstudy.substitution.adapters`.
    """

    def __init__(self, kernels: list[LoadedKernel], missing: dict[str, str] | None = None,
                 module_adapters: dict | None = None):
        self.kernels = {k.choice.operator: k for k in kernels}
        self.missing = dict(missing or {})
        self.operators = [OPERATORS[name] for name in sorted(set(self.kernels) | set(self.missing))]
        self.module_adapters = module_adapters or {}
        self.places: dict[str, Place] = {}
        self._recording = False
        self._saved: list[tuple] = []
        self.model: nn.Module | None = None

    # ------------------------------------------------------------------------------------------------- functional

    def _functional_wrapper(self, function: str) -> Callable:
        original = ORIGINAL_FUNCTIONS[function]
        ops = [op for op in self.operators if op.function == function]

        def substituted(*args, **kwargs):
            call = bind_call(function, args, kwargs)
            for op in ops:
                if op.semantics_of(call) is not None:
                    continue
                tensors = [call[name] for name in op.tensor_args]
                key = f"{op.name} @ F.{function} {_describe(tensors)}"
                place = self.places.get(key)
                if self._recording:
                    if place is None:
                        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
                        params = {n: call[n] for n in op.init_args}
                        reason = guard(self.kernels.get(op.name), op, tensors, params, needs_grad,
                                       self.missing.get(op.name))
                        place = self.places[key] = Place(op.name, f"F.{function} {_describe(tensors)}", 0, reason)
                    place.calls += 1
                elif place is not None and place.applicable:
                    return self._run(op, tensors, call)
                break
            return original(*args, **kwargs)

        return substituted

    def _run(self, op: Operator, tensors, call):
        module = self.kernels[op.name].stateless(tensors[0].device)
        if torch.is_grad_enabled() and tensors[0].requires_grad:
            return _ForwardKernel.apply(module, op.backward, call, *tensors)
        return module(*tensors)

    # ---------------------------------------------------------------------------------------------------- modules

    def _module_places(self, model: nn.Module):
        for op in self.operators:
            if op.module_class is None or op.name not in self.module_adapters:
                continue
            find, adapter = self.module_adapters[op.name]
            for path, module in find(model):
                yield op, path, module, adapter

    def _record_module(self, op: Operator, path: str, module: nn.Module, adapter) -> None:
        original = module.forward

        def recording(*args, **kwargs):
            tensors, params = adapter.place_inputs(module, args, kwargs)
            key = f"{op.name} @ {path} ({type(module).__name__})"
            if key not in self.places:
                needs_grad = torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters())
                kernel = self.kernels.get(op.name)
                reason = guard(kernel, op, tensors, params, needs_grad, self.missing.get(op.name))
                if reason is None:
                    reason = adapter.refuse(kernel, module, needs_grad)
                self.places[key] = Place(op.name, f"{path} ({type(module).__name__}) {_describe(tensors)}", 0, reason)
            self.places[key].calls += 1
            return original(*args, **kwargs)

        module.forward = recording
        self._saved.append(module)

    def _apply_module(self, op: Operator, path: str, module: nn.Module, adapter) -> None:
        key = f"{op.name} @ {path} ({type(module).__name__})"
        place = self.places.get(key)
        if place is not None and place.applicable:
            module.forward = adapter.forward(self.kernels[op.name], module)
            self._saved.append(module)

    # -------------------------------------------------------------------------------------------------- interface

    def _patch_functions(self) -> None:
        for function in sorted({op.function for op in self.operators if op.function}):
            self._saved.append((function, getattr(F, function)))
            setattr(F, function, self._functional_wrapper(function))

    def _restore(self) -> None:
        for item in reversed(self._saved):
            if isinstance(item, tuple):
                setattr(F, item[0], item[1])
            else:
                item.__dict__.pop("forward", None)
        self._saved.clear()

    def discover(self, model: nn.Module, probe: Callable[[], object]) -> list[Place]:
        """Run ``probe()`` once (the original code computing) with every place instrumented; decide each place."""
        self.model, self.places = model, {}
        self._recording = True
        try:
            self._patch_functions()
            for op, path, module, adapter in self._module_places(model):
                self._record_module(op, path, module, adapter)
            probe()
        finally:
            self._restore()
            self._recording = False
        return list(self.places.values())

    @property
    def applicable(self) -> list[Place]:
        return [p for p in self.places.values() if p.applicable]

    @property
    def not_applicable(self) -> list[Place]:
        return [p for p in self.places.values() if not p.applicable]

    def operators_without_places(self) -> list[str]:
        found = {p.operator for p in self.places.values()}
        return [op.name for op in self.operators if op.name not in found]

    def __enter__(self) -> "Substitution":
        if self.model is None:
            raise RuntimeError("call discover(model, probe) before applying the substitution")
        self._patch_functions()
        for op, path, module, adapter in self._module_places(self.model):
            self._apply_module(op, path, module, adapter)
        return self

    def __exit__(self, *exc) -> None:
        self._restore()


def count_calls(places) -> dict[str, int]:
    """Calls per step by operator."""
    out: dict[str, int] = collections.Counter()
    for p in places:
        out[p.operator] += p.calls
    return dict(out)
