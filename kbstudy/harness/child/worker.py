"""The isolated processes: a candidate worker, a CUDA build worker, and the host of the reference role.

Every candidate is loaded, built and run in a worker process of its own, started fresh for it (``spawn``), in its own
process group; the orchestrator (``kbstudy.harness.orchestrator``) never executes candidate code. A worker dies with its candidate:
a segfault, an abort, a hang or a broken CUDA context ends that one process, is recorded as the candidate's outcome, and
the next candidate gets a fresh process (so a worker whose CUDA context is broken is always replaced).

Processes are forked from a ``forkserver`` that has imported torch (and no CUDA), start *idle* and wait for a role.

Candidate worker protocol (messages from the orchestrator; replies are dicts, tensors travel as shared handles):

1. ``{"role": "worker", "job": {...}}`` -> ``{"stage": "loaded"}`` or a failure
2. ``{"op": "construct", "init_inputs": [...]}`` -> ``{"stage": "constructed"}`` or a failure
3. per trial: ``{"op": "run", "trial": t, "seed": s, "sentinel": "nan"|float, "reuse_inputs": bool,
   "survive": bool}`` then the inputs' bytes -> bytes of ``share({"outputs": [...], "forms": [...],
   "integrity": {...}})`` or a failure dict (pickled); then ``{"op": "release"}`` (the outputs are dropped, and idle
   cached GPU blocks above 1 GiB handed back: the reference process shares the GPU). With ``survive`` (the extra trials
   of ``kbstudy.verdict.trials``) a Python exception in the call is reported and the worker serves on, so the candidate's
   other verdicts and its timing survive a crash on unusual inputs;
4. ``{"op": "time", "timing": {...}, "host_check": bool, "device_time": bool}`` then the bytes of the timing pool
   (``{"pool": [input sets], "seeds": [...]}``, see ``kbstudy.harness.timing.time_pool``) -> ``{"samples": [ms, ...],
   "host_ms": float|None, "host_calls": int, "pool_size": int, "device_samples": [ms, ...]|None,
   "device_host_overran": int|None, "device_spin_us": float|None, "device_flush": str|None}`` (device time:
   ``kbstudy.harness.timing.time_device``) followed by the bytes of ``share({"checked": [(entry, call, outputs), ...]})`` (the
   sampled timed outputs and those of the device-time calls drawn for checking, kept alive until
   ``{"op": "release"}``), or a failure dict alone;
5. ``{"op": "profile"}`` (GPU) -> ``{"kernels": [[name, device us], ...]}`` or ``{"profile_error": str}``: one
   profiled call on the last timing inputs (``kbstudy.profiling.capture.profile_steps``, one warm-up call, one traced);
6. ``{"op": "exit"}``

A failure is ``{"failure": <outcome category>, "error": <message>, "stage": ...}``.

**Integrity checks** (device-agnostic; their verdicts are drawn in the reference process, ``kbstudy.verdict.checks``):

* *inputs mutated*: an exact copy of each input tensor is kept before the call and compared after it (bitwise
  equality, NaN equal to NaN); ``integrity["inputs_mutated"]`` lists the indices of changed inputs;
* *global state*: :func:`global_state_snapshot` is taken once before the candidate's source is loaded and again after
  every call; :func:`global_state_diff` lists what differs (``torch.backends`` flags, float32 matmul precision,
  deterministic mode, default dtype, grad mode, thread count, and the identity of every public callable of
  ``torch``, ``torch.nn.functional``, ``torch.linalg``, ``torch.fft``, ``torch.special``, ``torch.Tensor``,
  ``torch.nn.Module`` (inherited attributes included) and ``time``). Rebindings by torch itself (``torch.compile`` wraps ``nn.Module.__init__``) are
  told apart by where the new function's code lives (inside torch's package). The sentinel controls the worker sets
  for the call (deterministic mode, ``fill_uninitialized_memory``) are also checked right after the call, before the
  worker restores them, so a candidate cannot switch the NaN fill off for its own allocations;
* *storage reuse* (``reuse_inputs``): the trial's input values are copied into the previous trial's input tensors
  (same objects, same storage, same pointers) instead of fresh clones, so a result cached by shape, ``data_ptr`` or
  ``id`` is returned stale and judged against the new answer (``stale_output`` in ``kbstudy.harness.child.reference``).

**Second sentinel on a CPU**: a float ``sentinel`` on a CPU runs the call under :class:`FillFreshMode`, which writes
the sentinel into every floating tensor the candidate allocates through the dispatcher (``empty``, ``empty_like``,
``empty_strided``, ``new_empty``, ``new_empty_strided``) -- what ``fill_uninitialized_memory`` does with NaN.
"""

from __future__ import annotations

import os
import sys
import time


# ------------------------------------------------------------------------------------------------ integrity

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
    import importlib
    import inspect
    import time as time_mod
    import types
    import warnings

    import torch
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
    import os.path

    import torch

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
    import torch

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
    import torch

    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


#: Bytes of a host-held pristine copy moved to the device per comparison step (:func:`_equal_across_devices`).
COMPARE_CHUNK_BYTES = 256 << 20


def _equal_across_devices(a, b) -> bool:
    """:func:`inputs_equal` of two tensors of the same shape and dtype, one in host memory and one on a device.

    The comparison runs on the device, ``COMPARE_CHUNK_BYTES`` of the host tensor at a time: comparing on the host
    instead (the device tensor copied down, then elementwise on the CPU) took about 15 s per call for an 8 GB input
    (level-1 4_Matrix_vector_multiplication_ at full size, H200 host shared with CUDA builds, session 5), minutes per
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
#: worker's own clone starved the reference process of memory on the same GPU (session 4, H200).
PRISTINE_HOST_BYTES = 1 << 30

#: ...but only when the device cannot spare it: a copy above ``PRISTINE_HOST_BYTES`` stays on the device while it
#: needs at most this fraction of the device's free memory. A host copy costs a pageable round trip per call (copy
#: down before, 256 MB chunks up for the comparison after): 4-7 s per call for 4-8 GB inputs on the H200 (level-1 4,
#: 5, 97 and 100: 15-66 s per candidate in ``stage_seconds.run``, session 6), against milliseconds on the device.
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
    import torch

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
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

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


def _apply_env(env: dict) -> None:
    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = str(value)


def process_main(conn, warm_device: str | None = None) -> None:
    """Entry point of every child process: become a process-group leader, import torch, optionally create the CUDA
    context ahead (``warm_device``: context creation costs seconds, and a spare process can pay it while the previous
    candidate runs), report ``idle``, then take the role the first message gives (``worker``, ``build`` or
    ``reference``)."""
    try:
        os.setpgrp()  # the orchestrator kills the whole group (nvcc, ninja, compile workers) on a timeout
    except OSError:
        pass
    from kbstudy.harness import execution

    execution.use_shared_file_system()
    import torch

    if warm_device and warm_device.startswith("cuda"):
        torch.zeros(1, device=warm_device)  # creates the context; the first real allocation is then cheap
    conn.send({"status": "idle", "pid": os.getpid()})
    message = conn.recv()
    if message.get("role") == "exit":
        return
    _apply_env(message.get("env"))
    role = message["role"]
    try:
        if role == "worker":
            CandidateWorker(conn, message["job"]).serve()
        elif role == "build":
            _build(conn, message["job"])
        elif role == "reference":
            from kbstudy.harness.child import reference

            reference.serve(conn, message["job"])
    finally:
        try:
            conn.close()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            # skip interpreter teardown: extension modules and CUDA contexts of broken candidates can hang or crash
            # at exit, and nothing is left to save
            os._exit(0)


#: niceness of a CUDA build process (0 normal, 19 lowest): builds share the machine with timed processes
BUILD_NICENESS = 10


def _json_scalar(value):
    """``value`` if JSON has it (bool, int, float, str, None), else its ``str``."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def autotuned_configs(module) -> dict:
    """What the Triton autotuners defined at the top level of a candidate's ``module`` chose, after its calls:
    ``{name: {"configs": n, "chosen": {key: config}, "timings_ms": {config: ms}}}``, where ``key`` is the autotuner's
    cache key as a string (its ``key`` arguments' values and the tensors' dtypes), ``config`` a config's keyword
    arguments with ``num_warps``, ``num_stages`` (``Config.all_kwargs``), and ``timings_ms`` the benchmark of each
    config for the last key tuned (``Autotuner.configs_timings``: the candidate's own ``do_bench`` result, a median
    or a list of quantiles, in ms; ``None`` for a config that failed). Autotuners under other wrappers (e.g.
    ``triton.heuristics``, which keeps what it wraps as ``.fn``) are found too. An autotuner with one config (e.g.
    under ``TRITON_INTERPRET=1``) never benchmarks and reports ``best_config`` as its one choice. ``{}`` without
    Triton or autotuners. Read from attributes of ``triton.runtime.autotuner.Autotuner`` (Triton 3.x); never raises:
    a candidate's chosen configs are evidence beside its record (why one run's kernel took another config than the
    last), not part of any verdict."""
    from kbstudy.records.schema import _finite_or_none

    try:
        from triton.runtime.autotuner import Autotuner
    except Exception:  # noqa: BLE001 - no Triton here: nothing was autotuned through it
        return {}

    def kwargs_of(config) -> dict:
        try:
            return {str(k): _json_scalar(v) for k, v in config.all_kwargs().items()}
        except Exception:  # noqa: BLE001 - another Triton's Config
            return {"config": str(config)}

    found = {}
    for name, value in sorted(vars(module).items()):
        try:  # (a candidate's own object may raise anything on attribute access)
            for _ in range(4):  # an autotuner under other wrappers (e.g. triton.heuristics), which keep it as .fn
                if isinstance(value, Autotuner) or not hasattr(value, "fn"):
                    break
                value = value.fn
        except Exception:  # noqa: BLE001
            continue
        if not isinstance(value, Autotuner):
            continue
        try:
            chosen = {str(key): kwargs_of(config) for key, config in dict(getattr(value, "cache", {}) or {}).items()}
            best = getattr(value, "best_config", None)
            if not chosen and best is not None:
                chosen = {"(one config)": kwargs_of(best)}
            timings = getattr(value, "configs_timings", None) or {}
            # a failed config's time is inf, which JSON lacks: None, as the records' writer maps it
            found[name] = _finite_or_none({
                "configs": len(getattr(value, "configs", []) or []), "chosen": chosen,
                "timings_ms": {str(c): ([float(x) for x in t] if isinstance(t, (list, tuple)) else float(t))
                               for c, t in timings.items()}})
        except Exception as exc:  # noqa: BLE001
            found[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return found


def _load_candidate(job: dict):
    """``(module, stale build locks removed)``: the candidate's source run as module ``kbstudy_candidate``, inside
    ``execution.extensions_lock`` (a build killed earlier may have left torch's lock file, which would be waited on
    until the load timeout). The one way the build process and the worker load a candidate. Raises what the source
    raises."""
    from kbstudy.harness import execution

    with execution.extensions_lock() as stale:
        module = execution.load_module(job["source"], "kbstudy_candidate", job.get("filename", "<candidate>"))
    return module, stale


def _build(conn, job: dict) -> None:
    """Load (and so compile) a candidate's source with no GPU work, to fill the build cache in parallel.

    Runs at a lower CPU priority (``BUILD_NICENESS``, inherited by nvcc and ninja): builds overlap the timing of
    earlier problems (``kbstudy.harness.orchestrator.BuildQueue``), whose processes must keep the CPUs first."""
    from kbstudy.harness import execution

    try:
        os.nice(BUILD_NICENESS)
    except OSError:  # not permitted here: build at normal priority
        pass

    started = time.perf_counter()
    try:
        module, stale = _load_candidate(job)
        if stale:
            print(f"kbstudy: removed {len(stale)} stale extension build lock(s): {', '.join(map(str, stale))}",
                  file=sys.stderr)
        ok = hasattr(module, "ModelNew")
        conn.send({"built": ok, "error": None if ok else "source defines no ModelNew",
                   "seconds": time.perf_counter() - started})
    except BaseException as exc:  # noqa: BLE001
        conn.send({"built": False, "error": execution.error_text(exc), "category": execution.classify_exception(exc, "load"),
                   "seconds": time.perf_counter() - started})


class CandidateWorker:
    """Runs one candidate (lives inside its worker process)."""

    def __init__(self, conn, job: dict):
        self.conn = conn
        self.job = job
        self.device = job["device"]
        self.model = None

    def fail(self, exc: BaseException, stage: str, packed: bool = False) -> None:
        """Report a failure: a plain message, or (``packed``) an error packet where shared bytes were expected."""
        from kbstudy.harness import execution

        failure = {"failure": execution.classify_exception(exc, stage), "error": execution.error_text(exc),
                   "stage": stage}
        if packed:
            self.conn.send_bytes(execution.pack_error(failure))
        else:
            self.conn.send(failure)

    def serve(self) -> None:
        import torch

        from kbstudy.harness import execution

        torch.set_grad_enabled(False)
        self.dtype = execution.torch_dtype(self.job["precision"])
        self.state_before = global_state_snapshot()  # before any candidate code runs
        self.last_inputs = None
        self.timing_inputs = None
        self.timed_outputs = None
        try:
            module, _ = _load_candidate(self.job)
            if not hasattr(module, "ModelNew"):
                raise AttributeError("the candidate source defines no ModelNew")
            self.model_cls = module.ModelNew
            self.module = module
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "load")
            return
        self.conn.send({"stage": "loaded"})
        while True:
            request = self.conn.recv()
            op = request["op"]
            if op == "exit":
                return
            if op == "construct":
                if not self._construct(request["init_inputs"]):
                    return
            elif op == "run":
                if not self._run(request) and not request.get("survive"):
                    return
            elif op == "release":
                self.outputs = None
                self.timed_outputs = None
                self._release_cached_memory()
            elif op == "time":
                if not self._time(request):
                    return
            elif op == "profile":
                self._profile()

    def _release_cached_memory(self) -> None:
        """Hand the caching allocator's idle blocks back to the driver once a trial is judged, when they exceed
        ``PRISTINE_HOST_BYTES``: the reference process shares the GPU and builds the next trial's inputs (and their
        float64 copies) while this process waits, and the pristine copies and poisoned blocks of the last trial would
        otherwise stay reserved here (45_Average_Pooling_2D at fp32, a 16 GiB input: out of memory on the H200,
        session 12). Small problems keep their blocks: releasing them every trial would only add allocation time."""
        if not self.device.startswith("cuda"):
            return
        import torch

        if torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device) > PRISTINE_HOST_BYTES:
            torch.cuda.empty_cache()

    def _construct(self, init_inputs) -> bool:
        import torch

        from kbstudy.harness import execution

        try:
            execution.set_seed(self.job.get("seed", 42))
            model = self.model_cls(*init_inputs)
            if isinstance(model, torch.nn.Module):
                model = model.to(device=self.device, dtype=self.dtype)
            self.model = model
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "construct")
            return False
        self.conn.send({"stage": "constructed"})
        return True

    def _receive_inputs(self) -> list:
        import torch

        from kbstudy.harness import execution

        shared = execution.unshare(self.conn.recv_bytes())  # forwarded payload, tag already stripped
        # private copies: the shared ones belong to the reference process, and the candidate may write its inputs
        inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in shared]
        del shared
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
            torch.cuda.ipc_collect()
        return inputs

    def _poison_allocator(self, nbytes: int, value: float) -> None:
        """Fill free blocks of the CUDA caching allocator with ``value`` so unwritten output keeps it."""
        import torch

        free, _ = torch.cuda.mem_get_info(self.device)
        big = min(max(4 * nbytes, 64 << 20), int(0.5 * free))
        blocks = [torch.full((big // 4,), value, dtype=torch.float32, device=self.device)]
        # the small pool (allocations under 1 MiB) lives in separate 2 MiB segments
        blocks += [torch.full(((512 << 10) // 4,), value, dtype=torch.float32, device=self.device) for _ in range(64)]
        torch.cuda.synchronize(self.device)
        del blocks

    def _run(self, request: dict) -> bool:
        import contextlib

        import torch

        from kbstudy.harness import execution

        try:
            if not request.get("reuse_inputs"):
                self.last_inputs = None  # only a storage-reuse trial needs them; a full-size input set is GBs
            inputs = self._receive_inputs()
            if request.get("reuse_inputs") and self._same_layout(self.last_inputs, inputs):
                # same tensor objects and storage as the previous trial, new values (see the module docstring)
                for old, new in zip(self.last_inputs, inputs):
                    if isinstance(old, torch.Tensor):
                        old.copy_(new)
                inputs = self.last_inputs
                reused = True
            else:
                reused = False
            pristine = [pristine_copy(x) for x in inputs]
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run", packed=True)
            return False
        sentinel = request.get("sentinel", "nan")
        deterministic = torch.are_deterministic_algorithms_enabled()
        fill = torch.utils.deterministic.fill_uninitialized_memory
        tampered: list[str] = []
        mode = contextlib.nullcontext()
        try:
            if sentinel == "nan":
                # PyTorch fills fresh allocations (at::empty and friends, also from C++ extensions) with NaN, or the
                # integer maximum, while deterministic algorithms are on; warn_only keeps ops without a
                # deterministic implementation running
                torch.use_deterministic_algorithms(True, warn_only=True)
                torch.utils.deterministic.fill_uninitialized_memory = True
            elif self.device.startswith("cuda"):
                self._poison_allocator(int(request.get("output_bytes", 0)), float(sentinel))
            else:
                mode = FillFreshMode(float(sentinel))
            execution.set_seed(int(request["seed"]))
            with mode:
                out = self.model(*inputs)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize(self.device)
            if sentinel == "nan":
                if not torch.are_deterministic_algorithms_enabled():
                    tampered.append("torch.are_deterministic_algorithms_enabled() switched off during the call")
                if not torch.utils.deterministic.fill_uninitialized_memory:
                    tampered.append("torch.utils.deterministic.fill_uninitialized_memory switched off during the call")
            outputs = execution.flatten_outputs(out)
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run", packed=True)
            return False
        finally:
            torch.use_deterministic_algorithms(deterministic, warn_only=True)
            torch.utils.deterministic.fill_uninitialized_memory = fill
        integrity = {
            "inputs_mutated": [i for i, (x, y) in enumerate(zip(pristine, inputs)) if not inputs_equal(x, y)],
            "global_state": tampered + global_state_diff(self.state_before, global_state_snapshot()),
            "reused_inputs": reused,
            # where the pristine copies were kept (host memory costs a round trip per call: pristine_on_host)
            "pristine_on_host": [i for i, x in enumerate(pristine)
                                 if hasattr(x, "device") and x.device.type == "cpu" and self.device != "cpu"],
        }
        del pristine
        self.last_inputs = inputs
        self.outputs = outputs
        # the verdicts need the output's real type (a tensor subclass can override comparisons); a subclass defined
        # by the candidate cannot be unpickled elsewhere, so send plain tensors and the type names beside them
        forms = [f"{type(o).__module__}.{type(o).__qualname__}" for o in outputs]
        outputs = [o.as_subclass(torch.Tensor) if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor else o
                   for o in outputs]
        try:
            payload = execution.pack_shared({"outputs": outputs, "forms": forms, "integrity": integrity})
        except BaseException as exc:  # noqa: BLE001 - e.g. an output object that cannot be pickled
            self.fail(exc, "run", packed=True)
            return False
        self.conn.send_bytes(payload)
        return True

    @staticmethod
    def _same_layout(old, new) -> bool:
        """True if ``old`` (the previous trial's inputs) can take ``new``'s values in place: same count, and each
        tensor pair has the same shape, dtype and device (non-tensors equal)."""
        import torch

        if old is None or len(old) != len(new):
            return False
        for a, b in zip(old, new):
            if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
                return False
            if isinstance(a, torch.Tensor):
                if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
                    return False
            elif not inputs_equal(a, b):
                return False
        return True

    def _time(self, request: dict) -> bool:
        """Time the candidate over the timing pool (protocol step 4): fresh values in the same buffers for every call,
        seeded per pool entry, the outputs of each entry's first and last timed call kept for the reference to check,
        and on a GPU the host-synchronised cross-check and, if asked, the device time."""
        import torch

        from kbstudy.harness import execution

        from kbstudy.harness import timing

        try:
            shared = execution.unshare(self.conn.recv_bytes())  # read-only: copied into private buffers per call
            model = self.model
            result = timing.time_pool(lambda *args: model(*args), shared["pool"], seeds=shared["seeds"],
                                      device=self.device, keep_outputs=True,
                                      host_check=bool(request.get("host_check")),
                                      device_time=bool(request.get("device_time")), **request.get("timing", {}))
            self.timing_inputs = result.inputs
            del shared
            # plain tensors (a subclass defined by the candidate cannot be unpickled in the reference process)
            checked = [(entry, call, [o.as_subclass(torch.Tensor) if isinstance(o, torch.Tensor) else o
                                      for o in outputs]) for entry, call, outputs in result.checked]
            payload = execution.pack_shared({"checked": checked})
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run")
            return False
        self.timed_outputs = checked
        dev = result.device
        self.conn.send({"samples": result.samples, "host_ms": result.host_ms, "host_calls": result.host_calls,
                        "pool_size": result.pool_size, "device_samples": dev.samples if dev else None,
                        "device_host_overran": dev.host_overran if dev else None,
                        "device_spin_us": dev.spin_us if dev else None,
                        "device_flush": dev.flush if dev else None,
                        "autotuned": autotuned_configs(self.module)})
        self.conn.send_bytes(payload)
        return True

    def _profile(self) -> None:
        """One profiled call on the last timing inputs (protocol step 5); any failure is reported, not fatal."""
        from kbstudy.harness import execution

        try:
            from kbstudy.profiling.capture import profile_steps

            model, inputs = self.model, self.timing_inputs
            if inputs is None:
                raise RuntimeError("profile requested before timing")
            result = profile_steps(lambda: model(*inputs), self.device, wait=0, warmup=1, active=1)
            kernels = [[str(name), float(us)] for name, us in zip(result.table["name"], result.table["time_us"])]
            self.conn.send({"kernels": kernels})
        except BaseException as exc:  # noqa: BLE001 - e.g. CUPTI unavailable: recorded, the verdicts stand
            self.conn.send({"profile_error": execution.error_text(exc, 1000)})
