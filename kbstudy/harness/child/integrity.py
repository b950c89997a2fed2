"""Integrity checks made inside the candidate process; their verdicts are drawn in the reference process
(``kbstudy.verdict.checks``). Device-agnostic:

* *inputs mutated*: an exact copy of each input tensor (:func:`pristine_copy`) is kept before the call and compared
  after it (:func:`inputs_equal`: bitwise equality, NaN equal to NaN); the indices of changed inputs are reported;
* *global state*: :func:`global_state_snapshot` is taken once before the candidate's source is loaded and again after
  every call; :func:`global_state_diff` lists what differs (``torch.backends`` flags, float32 matmul precision,
  deterministic mode, default dtype, grad mode, thread count, and the identity of every public callable of
  ``torch``, ``torch.nn.functional``, ``torch.linalg``, ``torch.fft``, ``torch.special``, ``torch.Tensor``,
  ``torch.nn.Module`` (inherited attributes included) and ``time``). Rebindings by torch itself (``torch.compile``
  wraps ``nn.Module.__init__``) are told apart by where the new function's code lives (inside torch's package). The
  sentinel controls the candidate process sets for the call (deterministic mode, ``fill_uninitialized_memory``) are
  also checked right after the call (``child/candidate.py``), before they are restored, so a candidate cannot switch
  the NaN fill off for its own allocations;
* *storage reuse*: a trial's input values are copied into the previous trial's input tensors (same objects, same
  storage, same pointers) instead of fresh clones, so a result cached by shape, ``data_ptr`` or ``id`` is returned
  stale and judged against the new answer (``stale_output`` in ``kbstudy.harness.child.reference``).

**Second sentinel on a CPU**: a float sentinel on a CPU runs the call under :class:`FillFreshMode`, which writes the
sentinel into every floating tensor the candidate allocates through the dispatcher (``empty``, ``empty_like``,
``empty_strided``, ``new_empty``, ``new_empty_strided``) -- what ``fill_uninitialized_memory`` does with NaN.
"""

from __future__ import annotations

import importlib
import inspect
import os.path
import time as time_mod
import types
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: Namespaces whose callables' identities are part of the global state (a reference or the harness calls them).
_IDENTITY_NAMESPACES = ("torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special", "torch.Tensor",
                        "torch.nn.Module", "time")

#: Global flags and settings, by the expression that reads them.
_FLAGS = (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "torch.backends.cudnn.allow_tf32",
    "torch.backends.cudnn.benchmark",
    "torch.backends.cudnn.deterministic",
    "torch.backends.cudnn.enabled",
    "torch.backends.mkldnn.enabled",
    "torch.get_float32_matmul_precision()",
    "torch.are_deterministic_algorithms_enabled()",
    "torch.utils.deterministic.fill_uninitialized_memory",
    "torch.get_default_dtype()",
    "torch.is_grad_enabled()",
    "torch.get_num_threads()",
)


def global_state_snapshot() -> dict:
    """The global state a candidate must leave alone: ``{name: value}`` for each of :data:`_FLAGS` (a flag that cannot
    be read on this build maps to ``"<unreadable>"``), and ``{"<namespace>.<attr>": object}`` for every public
    callable of :data:`_IDENTITY_NAMESPACES` (every attribute, dunders included, of ``torch.Tensor`` and
    ``torch.nn.Module``). Objects, not ``id()`` values, are kept so an id cannot be recycled."""
    import torch.utils.deterministic  # noqa: F401 - read by a flag expression

    state: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. get_float32_matmul_precision's deprecation notice
        for expr in _FLAGS:
            try:
                state[expr] = eval(expr, {"torch": torch})  # noqa: S307 - fixed expressions above
            except Exception:  # noqa: BLE001 - a flag this build lacks
                state[expr] = "<unreadable>"
    for name in _IDENTITY_NAMESPACES:
        classes = {"torch.Tensor": torch.Tensor, "torch.nn.Module": torch.nn.Module, "time": time_mod}
        ns = classes[name] if name in classes else importlib.import_module(name)
        if name in ("torch.Tensor", "torch.nn.Module"):
            # every attribute, inherited ones included (Tensor.__eq__ lives on torch._C.TensorBase), read statically
            # so a classmethod or property is the stored object, not a fresh binding
            items = [(attr, inspect.getattr_static(ns, attr)) for attr in dir(ns)]
        else:
            items = [(attr, value) for attr, value in list(vars(ns).items()) if not attr.startswith("_")]
        for attr, value in items:
            if callable(value) or isinstance(value, (classmethod, staticmethod)):
                if not isinstance(value, types.ModuleType):
                    state[f"{name}.{attr}"] = value
    return state


def _torch_internal(value) -> bool:
    """True if ``value`` is a function whose code lives in torch's package (torch rebinding its own functions)."""
    code = getattr(value, "__code__", None)
    root = os.path.dirname(torch.__file__)
    return code is not None and os.path.abspath(code.co_filename).startswith(root + os.sep)


def global_state_diff(before: dict, after: dict) -> list[str]:
    """What changed between two :func:`global_state_snapshot` results, as readable lines (empty: nothing).

    A flag is reported as ``"<expr>: <before> -> <after>"``; a callable rebound or removed as ``"<name> replaced"`` /
    ``"<name> removed"``, except a rebinding to a function defined inside torch's own package (torch's lazy wrappers).
    Names that appear only in ``after`` are ignored (lazy imports add attributes)."""
    changes = []
    for key, old in before.items():
        if key not in after:
            changes.append(f"{key} removed")
            continue
        new = after[key]
        if key in _FLAGS:
            if new != old:
                changes.append(f"{key}: {old!r} -> {new!r}")
        elif new is not old and not _torch_internal(new):
            changes.append(f"{key} replaced")
    return changes


def inputs_equal(a, b) -> bool:
    """Whether input ``b`` still equals its pristine copy ``a`` (tensors: same shape, dtype and values by ``==``, with
    NaN equal to NaN, so a sign flip of a zero goes unseen; others: ``==``). One of the two may be in host memory
    (:func:`pristine_copy`): then the comparison runs on the other's device (:func:`_equal_across_devices`)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.device != b.device:  # a pristine copy kept in host memory (see pristine_copy)
            return _equal_across_devices(a, b)
        return _equal_same_device(a, b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return a is b


def _equal_same_device(a, b) -> bool:
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


#: Bytes of a host-held pristine copy moved to the device per comparison step (:func:`_equal_across_devices`).
COMPARE_CHUNK_BYTES = 256 << 20


def _equal_across_devices(a, b) -> bool:
    """:func:`inputs_equal` of two tensors of the same shape and dtype, one in host memory and one on a device.

    The comparison runs on the device, ``COMPARE_CHUNK_BYTES`` of the host tensor at a time: comparing on the host
    instead (the device tensor copied down, then elementwise on the CPU) took about 15 s per call for an 8 GB input
    (level-1 4_Matrix_vector_multiplication_ at full size, H200 host shared with CUDA builds), minutes per
    candidate. Non-contiguous tensors are compared whole on the host, as before."""
    host, dev = (a, b) if a.device.type == "cpu" else (b, a)
    if not (host.is_contiguous() and dev.is_contiguous()):
        return _equal_same_device(host, dev.to(host.device))
    h, d = host.reshape(-1), dev.reshape(-1)
    step = max(1, COMPARE_CHUNK_BYTES // max(1, host.element_size()))
    for start in range(0, h.numel(), step):
        if not _equal_same_device(h[start:start + step].to(d.device), d[start:start + step]):
            return False
    return True


#: Inputs larger than this may keep their pristine copy (the inputs-mutated check) in host memory: at full size one
#: level-1 input can be 17 GB (45_Average_Pooling_2D, 4.3e9 float32 elements), and a second device copy beside the
#: candidate process's own clone starved the reference process of memory on the same GPU (H200).
PRISTINE_HOST_BYTES = 1 << 30

#: ...but only when the device cannot spare it: a copy above ``PRISTINE_HOST_BYTES`` stays on the device while it
#: needs at most this fraction of the device's free memory. A host copy costs a pageable round trip per call (copy
#: down before, 256 MB chunks up for the comparison after): 4-7 s per call for 4-8 GB inputs on the H200 (level-1 4,
#: 5, 97 and 100: 15-66 s per candidate in ``stage_seconds.run``), against milliseconds on the device.
PRISTINE_DEVICE_FREE_FRACTION = 0.25


def pristine_on_host(nbytes: int, free_bytes: int | None) -> bool:
    """Whether a pristine copy of ``nbytes`` bytes goes to host memory: above ``PRISTINE_HOST_BYTES`` and more than
    ``PRISTINE_DEVICE_FREE_FRACTION`` of the device's ``free_bytes`` (``None``: unknown, so the host)."""
    if nbytes <= PRISTINE_HOST_BYTES:
        return False
    return free_bytes is None or nbytes > PRISTINE_DEVICE_FREE_FRACTION * free_bytes


def pristine_copy(x):
    """An exact copy of input ``x`` taken before the call, for :func:`inputs_equal` after it: on the input's device,
    or in host memory for a large tensor the device cannot spare the memory for (:func:`pristine_on_host`; a device
    copy that runs out of memory falls back to the host); non-tensors are returned as they are."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.device.type == "cpu":
        return x.clone()
    nbytes = x.numel() * x.element_size()
    free = None
    if nbytes > PRISTINE_HOST_BYTES and x.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(x.device)
    if not pristine_on_host(nbytes, free):
        try:
            return x.clone()
        except torch.OutOfMemoryError:
            if nbytes <= PRISTINE_HOST_BYTES:
                raise
            torch.cuda.empty_cache()
    return x.to("cpu", copy=True)


class FillFreshMode:
    """A ``TorchDispatchMode`` (built lazily: torch is imported in the child) that fills every floating tensor created
    by ``aten.empty*``/``new_empty*`` with ``value``: the second sentinel of coverage on a CPU."""

    def __new__(cls, value: float):
        aten = torch.ops.aten
        fresh = {aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
                 aten.new_empty.default, aten.new_empty_strided.default}

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if func in fresh and isinstance(out, torch.Tensor) and out.is_floating_point():
                    out.fill_(value)
                return out

        return _Mode()
