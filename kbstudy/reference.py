"""The reference process: owns one problem's reference model, its inputs, its expected outputs and its timings.

No candidate is ever loaded here, so the eager and ``torch.compile`` baselines cannot be affected by a candidate's
global-state changes (TF32 flags, patched torch functions), and the candidate's process never holds the expected
outputs: it receives inputs, and its outputs are judged here (``kbstudy.verify``).

Inputs and expected outputs per trial are computed lazily and cached up to ``cache_bytes``; a trial evicted from the
cache is recomputed from its seed, which gives bit-identical inputs (same generator, same device).

Protocol (requests from the orchestrator over a ``multiprocessing`` connection; tensors travel as shared handles,
see ``kbstudy.execution.share``):

* ``{"op": "init_inputs"}`` -> ``{"init_inputs": [...]}``
* ``{"op": "inputs", "trial": t}`` -> a packet (``execution.pack_shared`` of the inputs, or ``pack_error``);
  ``t`` is a trial index or ``"timing"``
* ``{"op": "verify", "trial": t, "sentinel": s}`` then bytes of the candidate's shared outputs
  -> ``{"kernelbench": KernelBenchTrial, "kbstudy": KbstudyTrial}``
* ``{"op": "time", "eager": bool, "compile": bool}`` -> ``{"eager": [ms...], "compile": [ms...], "compile_error": ...}``
* ``{"op": "close"}``
"""

from __future__ import annotations

import collections
import copy
from typing import Any

from kbstudy import execution, verify


class ReferenceSession:
    """One problem's reference at one precision on one device (lives inside the reference process)."""

    def __init__(self, job: dict):
        import torch

        self.job = job
        self.device = job["device"]
        self.precision = job["precision"]
        self.dtype = execution.torch_dtype(self.precision)
        self.trial_seeds = execution.kernelbench_trial_seeds(job["trials"], job.get("seed", 42))
        self.timing_seed = job.get("seed", 42)
        self.input_device = self.device if job.get("inputs_on_device", True) else "cpu"
        self.cache_bytes = int(job.get("cache_bytes", 8 << 30))
        self.cache: collections.OrderedDict[Any, tuple] = collections.OrderedDict()
        torch.set_grad_enabled(False)
        self.module = execution.load_module(job["source"], "kbstudy_reference_problem", job.get("filename", "<problem>"))
        execution.set_seed(self.timing_seed)
        init = self.module.get_init_inputs()
        self.init_inputs = [execution.cast_input(x, self.device, self.dtype) for x in init]
        execution.set_seed(self.timing_seed)
        model = self.module.Model(*self.init_inputs)
        if isinstance(model, torch.nn.Module):
            model = model.to(device=self.device, dtype=self.dtype)
        self.model = model
        # float64 twin of the model at precision (bf16 runs keep their bf16-rounded weights, upcast)
        self.reference_dtype = "float64"
        try:
            self.model64 = copy.deepcopy(model).to(torch.float64) if isinstance(model, torch.nn.Module) else model
        except Exception:  # a module that cannot be deep-copied: judge against the precision reference
            self.model64, self.reference_dtype = None, str(self.dtype).replace("torch.", "")

    # ------------------------------------------------------------------------------------------------ trials
    def _make_inputs(self, seed: int) -> list:
        import torch

        execution.set_seed(seed)
        with torch.device(self.input_device):
            raw = self.module.get_inputs()
        return [execution.cast_input(x, self.device, self.dtype) for x in raw]

    def _seed_of(self, trial) -> int:
        return self.timing_seed if trial == "timing" else self.trial_seeds[int(trial)]

    def trial(self, trial) -> tuple[list, list | None, list | None]:
        """(inputs, expected outputs at precision, expected float64 outputs) of a trial; expected outputs are computed
        only for correctness trials, not for the timing inputs."""
        if trial in self.cache:
            self.cache.move_to_end(trial)
            return self.cache[trial]
        import torch

        seed = self._seed_of(trial)
        inputs = self._make_inputs(seed)
        expected = expected64 = None
        if trial != "timing":
            execution.set_seed(seed)
            expected = execution.flatten_outputs(self.model(*inputs))
            expected64 = self._reference64(inputs, seed, expected)
        entry = (inputs, expected, expected64)
        self.cache[trial] = entry
        self._evict(keep=trial)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
        return entry

    def _reference64(self, inputs: list, seed: int, expected: list) -> list:
        import torch

        if self.model64 is None:
            return expected
        try:
            inputs64 = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                        for x in inputs]
            execution.set_seed(seed)
            return execution.flatten_outputs(self.model64(*inputs64))
        except Exception:
            # some kernels have no float64 implementation on some devices: fall back to the precision reference
            self.model64, self.reference_dtype = None, str(self.dtype).replace("torch.", "")
            return expected

    def _entry_bytes(self, entry) -> int:
        import torch

        total = 0
        for part in entry:
            for x in part or []:
                if isinstance(x, torch.Tensor):
                    total += x.numel() * x.element_size()
        return total

    def _evict(self, keep) -> None:
        while len(self.cache) > 1 and sum(self._entry_bytes(e) for e in self.cache.values()) > self.cache_bytes:
            oldest = next(k for k in self.cache if k != keep)
            del self.cache[oldest]

    def verify(self, trial, outputs: list, sentinel, forms: list[str] | None = None) -> dict:
        _, expected, expected64 = self.trial(trial)
        kb = verify.kernelbench_trial(expected, outputs, self.precision)
        if any(form != "torch.Tensor" for form in forms or []):
            # the worker sent plain views of what the candidate returned; its real types are in ``forms``
            kbs = verify.KbstudyTrial(False, "not_a_dense_tensor", None, None, f"output types {forms}")
        else:
            kbs = verify.kbstudy_trial(expected, expected64, outputs, self.precision, sentinel)
        return {"kernelbench": kb, "kbstudy": kbs}

    # ------------------------------------------------------------------------------------------------ timing
    def time(self, eager: bool, compiled: bool, timing: dict) -> dict:
        import torch

        from kbstudy import timing as timing_mod

        inputs, _, _ = self.trial("timing")
        result: dict[str, Any] = {"eager": None, "compile": None, "compile_error": None}
        if eager:
            result["eager"] = timing_mod.time_callable(lambda: self.model(*inputs), device=self.device, **timing)
        if compiled:
            try:
                torch._dynamo.reset()
                compiled_model = torch.compile(self.model)  # Inductor, default mode (as KernelBench's baseline files)
                result["compile"] = timing_mod.time_callable(lambda: compiled_model(*inputs), device=self.device,
                                                             **timing)
            except Exception as exc:  # a reference Inductor cannot compile is a finding, not a dead batch
                result["compile_error"] = execution.error_text(exc, 2000)
        return result

    def describe(self) -> dict:
        import torch

        _, expected, _ = self.trial(0)
        first = expected[0] if expected else None
        return {
            "output_shape": list(first.shape) if isinstance(first, torch.Tensor) else None,
            "output_dtype": str(first.dtype).replace("torch.", "") if isinstance(first, torch.Tensor) else None,
            "output_bytes": sum(x.numel() * x.element_size() for x in expected if isinstance(x, torch.Tensor)),
            "reference_dtype": self.reference_dtype,
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        }


def serve(conn, job: dict) -> None:
    """The reference role's loop (see the module docstring). Any exception while setting up is reported as
    ``{"error": ...}`` and ends the process; the orchestrator records ``reference_error`` for the problem."""
    try:
        session = ReferenceSession(job)
        conn.send({"status": "ready", **session.describe()})
    except BaseException as exc:  # noqa: BLE001 - the reference failing is a recorded outcome
        conn.send({"error": execution.error_text(exc), "category": execution.classify_exception(exc, "run")})
        return
    while True:
        request = conn.recv()
        op = request["op"]
        try:
            if op == "close":
                return
            if op == "init_inputs":
                conn.send({"init_inputs": session.init_inputs})
            elif op == "inputs":
                try:
                    inputs, _, _ = session.trial(request["trial"])
                    packet = execution.pack_shared(inputs)
                except BaseException as exc:  # noqa: BLE001
                    packet = execution.pack_error({"error": execution.error_text(exc),
                                                   "category": execution.classify_exception(exc, "run")})
                conn.send_bytes(packet)
            elif op == "verify":
                outputs = execution.unshare(conn.recv_bytes())
                result = session.verify(request["trial"], outputs.get("outputs", []), request.get("sentinel", "nan"),
                                        outputs.get("forms"))
                del outputs
                conn.send(result)
            elif op == "time":
                conn.send(session.time(request.get("eager", True), request.get("compile", False),
                                       request.get("timing", {})))
            else:
                conn.send({"error": f"unknown op {op!r}"})
        except BaseException as exc:  # noqa: BLE001 - reported to the orchestrator; the process serves on
            conn.send({"error": execution.error_text(exc), "category": execution.classify_exception(exc, "run")})
