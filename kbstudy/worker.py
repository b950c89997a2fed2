"""The isolated processes: a candidate worker, a CUDA build worker, and the host of the reference role.

Every candidate is loaded, built and run in a worker process of its own, started fresh for it (``spawn``), in its own
process group; the orchestrator (``kbstudy.evaluate``) never executes candidate code. A worker dies with its candidate:
a segfault, an abort, a hang or a broken CUDA context ends that one process, is recorded as the candidate's outcome, and
the next candidate gets a fresh process (so a worker whose CUDA context is broken is always replaced).

Processes are forked from a ``forkserver`` that has imported torch (and no CUDA), start *idle* and wait for a role.

Candidate worker protocol (messages from the orchestrator; replies are dicts, tensors travel as shared handles):

1. ``{"role": "worker", "job": {...}}`` -> ``{"stage": "loaded"}`` or a failure
2. ``{"op": "construct", "init_inputs": [...]}`` -> ``{"stage": "constructed"}`` or a failure
3. per trial: ``{"op": "run", "trial": t, "seed": s, "sentinel": "nan"|float}`` then the inputs' bytes
   -> bytes of ``share({"outputs": [...]})`` or a failure dict (pickled); then ``{"op": "release"}``
4. ``{"op": "time", "timing": {...}}`` then the timing inputs' bytes -> ``{"samples": [ms, ...]}`` or a failure
5. ``{"op": "exit"}``

A failure is ``{"failure": <outcome category>, "error": <message>, "stage": ...}``.
"""

from __future__ import annotations

import os
import sys
import time


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
    from kbstudy import execution

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
            from kbstudy import reference

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


def _build(conn, job: dict) -> None:
    """Load (and so compile) a candidate's source with no GPU work, to fill the build cache in parallel."""
    from kbstudy import execution

    started = time.perf_counter()
    try:
        module = execution.load_module(job["source"], "kbstudy_candidate", job.get("filename", "<candidate>"))
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
        from kbstudy import execution

        failure = {"failure": execution.classify_exception(exc, stage), "error": execution.error_text(exc),
                   "stage": stage}
        if packed:
            self.conn.send_bytes(execution.pack_error(failure))
        else:
            self.conn.send(failure)

    def serve(self) -> None:
        import torch

        from kbstudy import execution

        torch.set_grad_enabled(False)
        self.dtype = execution.torch_dtype(self.job["precision"])
        try:
            module = execution.load_module(self.job["source"], "kbstudy_candidate", self.job.get("filename", "<candidate>"))
            if not hasattr(module, "ModelNew"):
                raise AttributeError("the candidate source defines no ModelNew")
            self.model_cls = module.ModelNew
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
                if not self._run(request):
                    return
            elif op == "release":
                self.outputs = None
            elif op == "time":
                if not self._time(request):
                    return

    def _construct(self, init_inputs) -> bool:
        import torch

        from kbstudy import execution

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

        from kbstudy import execution

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
        import torch

        from kbstudy import execution

        try:
            inputs = self._receive_inputs()
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run", packed=True)
            return False
        sentinel = request.get("sentinel", "nan")
        deterministic = torch.are_deterministic_algorithms_enabled()
        fill = torch.utils.deterministic.fill_uninitialized_memory
        try:
            if sentinel == "nan":
                # PyTorch fills fresh allocations (at::empty and friends, also from C++ extensions) with NaN, or the
                # integer maximum, while deterministic algorithms are on; warn_only keeps ops without a
                # deterministic implementation running
                torch.use_deterministic_algorithms(True, warn_only=True)
                torch.utils.deterministic.fill_uninitialized_memory = True
            elif self.device.startswith("cuda"):
                self._poison_allocator(int(request.get("output_bytes", 0)), float(sentinel))
            execution.set_seed(int(request["seed"]))
            out = self.model(*inputs)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize(self.device)
            outputs = execution.flatten_outputs(out)
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run", packed=True)
            return False
        finally:
            torch.use_deterministic_algorithms(deterministic, warn_only=True)
            torch.utils.deterministic.fill_uninitialized_memory = fill
        del inputs
        self.outputs = outputs
        # the verdicts need the output's real type (a tensor subclass can override comparisons); a subclass defined
        # by the candidate cannot be unpickled elsewhere, so send plain tensors and the type names beside them
        forms = [f"{type(o).__module__}.{type(o).__qualname__}" for o in outputs]
        outputs = [o.as_subclass(torch.Tensor) if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor else o
                   for o in outputs]
        try:
            payload = execution.pack_shared({"outputs": outputs, "forms": forms})
        except BaseException as exc:  # noqa: BLE001 - e.g. an output object that cannot be pickled
            self.fail(exc, "run", packed=True)
            return False
        self.conn.send_bytes(payload)
        return True

    def _time(self, request: dict) -> bool:
        from kbstudy import timing

        try:
            inputs = self._receive_inputs()
            model = self.model
            samples = timing.time_callable(lambda: model(*inputs), device=self.device, **request.get("timing", {}))
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run")
            return False
        self.conn.send({"samples": samples})
        return True
