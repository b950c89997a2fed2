"""The reference process: owns one problem's reference model, its inputs, its expected outputs and its timings.

No candidate is ever loaded here, so the eager and ``torch.compile`` baselines cannot be affected by a candidate's
global-state changes (TF32 flags, patched torch functions), and the candidate's process never holds the expected
outputs: it receives inputs, and its outputs are judged here (``kbstudy.verdict.checks``).

Inputs and expected outputs per trial are computed lazily and cached up to ``cache_bytes``; a trial evicted from the
cache is recomputed from its seed, which gives bit-identical inputs (same generator, same device).

Requests (``kbstudy.harness.protocol``, whose message classes document each reply; tensors travel as packets,
``kbstudy.harness.transfer``): ``InitInputs``, ``Inputs`` (a trial index, KernelBench's trials then the extra trials
of ``kbstudy.verdict.trials``, or ``"timing_pool"``), ``Verify`` and ``VerifyTiming`` (each followed by the packet
of the candidate's outputs), ``TimeBaselines``, ``Close``.
A request that fails is answered by an :class:`~kbstudy.harness.protocol.ErrorReply` and the process serves on.

The job (:class:`~kbstudy.harness.protocol.ReferenceJob`) carries ``extra_trials`` (``kbstudy.verdict.trials.ExtraTrial.as_dict()`` of each extra trial: index, seed,
distribution) and ``timing_pool_bytes`` (the pool's cap, ``kbstudy.harness.timing.pool_size``). Which variants apply to the
problem is decided here, on each variant trial's own inputs (:meth:`ReferenceSession.variant_applicability`); the
structural variants' sizes, layouts and parameters are ``child/structural.py``'s.
"""

from __future__ import annotations

import collections
import copy
from typing import Any

import torch

from kbstudy.harness import fresh_inputs, transfer, variant_inputs
from kbstudy.harness import timing as timing_mod
from kbstudy.harness.child.structural import Structural
from kbstudy.harness.failures import classify_exception, error_text
from kbstudy.harness.loading import load_module
from kbstudy.harness.protocol import (
    Close,
    ErrorReply,
    InitInputs,
    Inputs,
    ReferenceJob,
    TimeBaselines,
    Verify,
    VerifyTiming,
    reference_request,
)
from kbstudy.harness.tensors import cast_input, flatten_outputs, kernelbench_trial_seeds, set_seed, torch_dtype
from kbstudy.verdict import checks as verify
from kbstudy.verdict import trials as variants

#: A reference output is constant when std / RMS of its float64 values is below this (or all elements are equal).
CONSTANT_REL_STD = 1e-6
#: An output is unchanged by an input's replacement when |r' - r| <= RTOL |r| + ATOL_REL RMS(r) everywhere.
UNCHANGED_RTOL = 1e-9
UNCHANGED_ATOL_REL = 1e-12


def _is_low_spread(outputs64, precision: str) -> bool:
    """``kbstudy.verdict.checks.is_low_spread`` of the first floating output of ``outputs64`` (float64 reference outputs)."""
    first = verify.first_floating_stats(outputs64)
    if first is None:
        return verify.is_low_spread(0, None, precision)
    flat, rms, std = first
    return verify.is_low_spread(flat.numel(), std / rms if rms > 0 else None, precision)


class ReferenceSession:
    """One problem's reference at one precision on one device (lives inside the reference process)."""

    def __init__(self, job: ReferenceJob | dict):
        """``job``: a :class:`~kbstudy.harness.protocol.ReferenceJob` (or its wire dict)."""
        job = job if isinstance(job, ReferenceJob) else ReferenceJob.from_wire(job)
        self.job = job
        self.device = job.device
        self.precision = job.precision
        self.dtype = torch_dtype(self.precision)
        self.trial_seeds = kernelbench_trial_seeds(job.trials, job.seed)
        self.extra_trials = {int(t["trial"]): variants.ExtraTrial(int(t["trial"]), int(t["seed"]), t["name"])
                             for t in job.extra_trials}
        self.timing_seed = job.seed
        self.timing_pool_bytes = int(job.timing_pool_bytes)
        self._pool: tuple[list, list] | None = None
        self.input_device = self.device if job.inputs_on_device else "cpu"
        self.cache_bytes = int(job.cache_bytes)
        self.cache: collections.OrderedDict[Any, tuple] = collections.OrderedDict()
        # e_ref per input set (kbstudy.verdict.checks.reference_errors): a few floats each, kept after the trial is evicted
        self._reference_errors: dict[Any, dict] = {}
        self._default_worst: dict | None = None  # worst_reference_errors, once computed
        torch.set_grad_enabled(False)
        self.module = load_module(job.source, "kbstudy_reference_problem", job.filename)
        set_seed(self.timing_seed)
        init = self.module.get_init_inputs()
        self.init_inputs = [cast_input(x, self.device, self.dtype) for x in init]
        set_seed(self.timing_seed)
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
        self.structural = Structural(self)

    # ------------------------------------------------------------------------------------------------ trials
    def _make_inputs(self, seed: int, variant: str | None = None) -> list:
        """``get_inputs()`` under ``seed`` on the input device, floating tensors cast to the precision, then moved to
        the device; ``variant`` (a name of ``kbstudy.verdict.trials.VARIANTS``) transforms the floating tensors."""
        set_seed(seed)
        with torch.device(self.input_device):
            raw = self.module.get_inputs()
        inputs = [cast_input(x, self.device, self.dtype) for x in raw]
        if variant in variants.VARIANTS:
            inputs = variants.transform_inputs(inputs, variant, seed)
        return inputs

    def _seed_of(self, trial) -> int:
        if isinstance(trial, tuple) and trial[0] == "timing":
            return self.timing_pool_seeds()[int(trial[1])]
        t = int(trial)
        if t in self.extra_trials:
            return self.extra_trials[t].seed
        return self.trial_seeds[t]

    def _variant_of(self, trial) -> str | None:
        extra = self.extra_trials.get(trial) if isinstance(trial, int) else None
        return extra.name if extra is not None else None

    def trial(self, trial) -> tuple[list, list, list]:
        """(inputs, expected outputs at precision, expected float64 outputs) of a trial: a correctness trial index
        (KernelBench's, then the extra trials; the job's ``reuse_trial`` keeps some of the trial before's elements,
        ``kbstudy.harness.fresh_inputs.keep_some``) or ``("timing", e)``, the inputs of timing-pool entry ``e``
        regenerated from its seed (bit-identical to the pool's, which a candidate's process can reach through shared
        memory), or ``("timing", e, mix)``, a timed call's inputs (``kbstudy.harness.fresh_inputs.mixed``)."""
        self.structural.drop_large(keep=trial)  # at full size, one shape variant's trial at a time
        if trial in self.cache:
            self.cache.move_to_end(trial)
            return self.cache[trial]
        name = self._variant_of(trial)
        if variants.FAMILIES.get(name) == "shape":  # served at the variant's sizes (child/structural.py)
            return self.structural.shape_session(trial).trial(trial)
        self._make_room()
        seed = self._seed_of(trial)
        if isinstance(trial, tuple) and len(trial) > 2 and trial[2] is not None:
            # a timed call's inputs: two pool entries mixed with the call's weight (kbstudy.harness.fresh_inputs)
            pool, entry = self.timing_pool()[0], int(trial[1])
            inputs = fresh_inputs.mixed(pool[entry], pool[(entry + 1) % len(pool)], float(trial[2]))
        elif self.job.reuse_trial is not None and trial == self.job.reuse_trial and trial > 0:
            # the storage-reuse trial keeps some of the previous trial's elements (kbstudy.harness.fresh_inputs)
            inputs = fresh_inputs.keep_some(self.trial(trial - 1)[0], self._make_inputs(seed, name), seed)
        else:
            inputs = self._make_inputs(seed, name)
        model, model64 = self.model, self.model64
        if variants.FAMILIES.get(name) == "layout":
            inputs = variant_inputs.relayout(inputs, name)
        elif variants.FAMILIES.get(name) == "params":
            model, model64 = self.structural.param_models(self.extra_trials[trial].seed)
        set_seed(seed)
        expected = flatten_outputs(model(*inputs))
        expected64 = self._reference64(inputs, seed, expected, model64 if model is not self.model else None)
        entry = (inputs, expected, expected64)
        self.cache[trial] = entry
        self._evict(keep=trial)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
        return entry

    def reference_errors(self, trial) -> dict:
        """``e_ref`` of one input set (a trial index or ``("timing", e)``, as :meth:`trial`): the accuracy metrics of
        the reference at the run's precision against the float64 reference on that set's inputs, worst over the
        outputs (``kbstudy.verdict.checks.reference_errors``: ``{metric: float | None}``, dimensionless). The bounds of
        kbstudy's accuracy check on that input set are ``max(T_m, REFERENCE_FACTOR * e_ref[m])``. Computed once per
        input set; where float64 is unavailable (``reference_dtype`` is the precision's) every value is 0."""
        key = trial if isinstance(trial, tuple) else int(trial)
        if key not in self._reference_errors:
            _, expected, expected64 = self.trial(trial)
            self._reference_errors[key] = verify.reference_errors(expected, expected64)
        return self._reference_errors[key]

    def bound_errors(self, trial) -> dict:
        """The ``e_ref`` that kbstudy's accuracy bounds scale on an input set: per metric, the larger of that set's
        own :meth:`reference_errors` and the worst over KernelBench's fixed-seed trials (dimensionless; ``None``
        where neither measured it). Why the worst too: on an ill-conditioned problem the reference's own error varies
        from one draw to the next (KLDiv at bf16, 1/64 size: 5.5e-3 to 8.5e-2 over three trials), and an honest kernel
        that sums in another order must not fail on the draw where the reference happened to round well."""
        own, worst = self.reference_errors(trial), self.worst_reference_errors()
        return {m: max((v for v in (own.get(m), worst.get(m)) if v is not None), default=None)
                for m in set(own) | set(worst)}

    def worst_reference_errors(self) -> dict:
        """Per metric, the worst :meth:`reference_errors` over KernelBench's fixed-seed trials (dimensionless; a metric
        no trial measured is absent). Computed once: :meth:`bound_errors` and :meth:`problem_flags` read it."""
        if self._default_worst is None:
            worst: dict = {}
            for t in range(len(self.trial_seeds)):
                for metric, value in self.reference_errors(t).items():
                    if value is not None:
                        worst[metric] = value if worst.get(metric) is None else max(worst[metric], value)
            self._default_worst = worst
        return self._default_worst

    def _reference64(self, inputs: list, seed: int, expected: list, model64=None) -> list:
        """The float64 reference's outputs (``model64``: a variant's float64 model instead of the problem's)."""
        model64 = self.model64 if model64 is None else model64
        if model64 is None:
            return expected
        try:
            inputs64 = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                        for x in inputs]
            set_seed(seed)
            return flatten_outputs(model64(*inputs64))
        except Exception:
            if model64 is not self.model64:
                return expected
            # some kernels have no float64 implementation on some devices: fall back to the precision reference
            self.model64, self.reference_dtype = None, str(self.dtype).replace("torch.", "")
            return expected

    def _entry_bytes(self, entry) -> int:
        total = 0
        for part in entry:
            for x in part or []:
                if isinstance(x, torch.Tensor):
                    total += x.numel() * x.element_size()
        return total

    def release_cached_memory(self) -> None:
        """Hand the CUDA caching allocator's free blocks back to the driver after each request. The candidate's process
        is another process on the same GPU: at full size one verify (float64 copies of ~1e9-element outputs) peaks at
        tens of GB, and memory this process keeps reserved after it is memory the candidate's next trial cannot get
        (an H200 calibration ran out of memory on level-1 problems 38, 39 and 45 this way). The cached
        trials themselves stay (``cache_bytes``)."""
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    def _make_room(self) -> None:
        """Evict before building a new trial, not only after: at full size one entry can be as large as the whole
        cache (45_Average_Pooling_2D's fp32 input is 16 GiB), and keeping the old entry while the new one and its
        float64 copies (32 GiB more) are built took this process to 64 GiB beside a candidate process of as much, more than the
        H200's 140 GB. Room is made for one entry the size of the largest cached one, which is what
        :meth:`_evict` would otherwise free after the build: with entries of one size (one problem's trials) the cache
        keeps as many as before; with unequal ones it may keep one fewer (an evicted trial is rebuilt from its seed,
        bit-identical, so only time is lost)."""
        if not self.cache:
            return
        incoming = max(self._entry_bytes(e) for e in self.cache.values())
        while self.cache and sum(self._entry_bytes(e) for e in self.cache.values()) + incoming > self.cache_bytes:
            self.cache.popitem(last=False)

    def _evict(self, keep) -> None:
        while len(self.cache) > 1 and sum(self._entry_bytes(e) for e in self.cache.values()) > self.cache_bytes:
            oldest = next(k for k in self.cache if k != keep)
            del self.cache[oldest]

    def verify(self, trial, outputs: list, sentinel, forms: list[str] | None = None,
               integrity: dict | None = None, kernelbench: bool = True) -> dict:
        """Both verdicts on one trial's candidate outputs, then the integrity checks.

        Args:
            trial: correctness trial index.
            outputs: the candidate's outputs (plain tensors; their real types are in ``forms``).
            sentinel: ``"nan"`` or the float the unwritten memory held (see ``verify.kbstudy_trial``).
            forms: ``module.qualname`` of each output's type as the candidate returned it.
            integrity: the candidate process's report: ``inputs_mutated`` (input indices), ``global_state`` (lines of
                ``integrity.global_state_diff``), ``reused_inputs`` (this trial ran on the previous trial's storage).
            kernelbench: also run KernelBench's check (``False`` for kbstudy's extra trials, which KernelBench's
                verdict does not include; its entry is then ``None``).
        Returns ``{"kernelbench": KernelBenchTrial | None, "kbstudy": KbstudyTrial, "integrity": dict}``. kbstudy's
        accuracy bounds scale with :meth:`bound_errors` (this trial's own e_ref, or the worst fixed-seed one if larger). An integrity violation fails kbstudy's trial
        (``inputs_mutated`` > ``global_state`` > ``stale_output``); ``stale_output`` is a failed value check on a
        storage-reuse trial whose outputs pass kbstudy's check against the *previous* trial's expected outputs (a
        result cached by shape, pointer or object identity).
        """
        _, expected, expected64 = self.trial(trial)
        kb = verify.kernelbench_trial(expected, outputs, self.precision) if kernelbench else None
        if any(form != "torch.Tensor" for form in forms or []):
            # the candidate process sent plain views of what the candidate returned; its real types are in ``forms``
            kbs = verify.KbstudyTrial(False, "not_a_dense_tensor", None, None, f"output types {forms}",
                                      sentinel=verify.sentinel_label(sentinel))
        else:
            kbs = verify.kbstudy_trial(expected, expected64, outputs, self.precision, sentinel,
                                       self.bound_errors(trial))
        integrity = dict(integrity or {})
        if integrity.get("inputs_mutated"):
            kbs = verify.integrity_failure(kbs, "inputs_mutated",
                                           f"inputs {integrity['inputs_mutated']} changed by the call")
        elif integrity.get("global_state"):
            kbs = verify.integrity_failure(kbs, "global_state", "; ".join(integrity["global_state"])[:2000])
        elif (integrity.get("reused_inputs") and int(trial) > 0
              and kbs.failure in ("mismatch", "nonfinite", *verify.ACCURACY_FAILURES.values())):
            _, previous, previous64 = self.trial(int(trial) - 1)
            if verify.kbstudy_trial(previous, previous64, outputs, self.precision, sentinel,
                                    self.bound_errors(int(trial) - 1)).passed:
                integrity["stale_output"] = True
                kbs = verify.integrity_failure(kbs, "stale_output", f"trial {trial} ran on trial {int(trial) - 1}'s "
                                               "input storage with new values and returned trial "
                                               f"{int(trial) - 1}'s answer")
        # form agreement measured directly (an integrity failure can take the place of a shape failure above)
        shape_ok = len(outputs) == len(expected) and all(
            isinstance(o, torch.Tensor) and isinstance(e, torch.Tensor) and o.shape == e.shape
            for o, e in zip(outputs, expected))
        dtype_ok = shape_ok and all(o.dtype == e.dtype for o, e in zip(outputs, expected))
        return {"kernelbench": kb, "kbstudy": kbs, "integrity": integrity, "shape_ok": shape_ok, "dtype_ok": dtype_ok}

    # ------------------------------------------------------------------------------------------------ degeneracy
    def _outputs64(self, inputs: list, seed: int) -> list:
        """The float64 reference's outputs on ``inputs`` (the precision reference's where float64 is unavailable)."""
        set_seed(seed)
        if self.model64 is None:
            return flatten_outputs(self.model(*inputs))
        inputs64 = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                    for x in inputs]
        return flatten_outputs(self.model64(*inputs64))

    @staticmethod
    def _unchanged(a: list, b: list, rms: float) -> bool:
        for x, y in zip(a, b):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
                if x != y:
                    return False
                continue
            if x.shape != y.shape:
                return False
            x64, y64 = x.to(torch.float64), y.to(torch.float64)
            same_nan = torch.isnan(x64) & torch.isnan(y64)
            close = (x64 - y64).abs() <= UNCHANGED_RTOL * y64.abs() + UNCHANGED_ATOL_REL * rms
            if not bool((close | same_nan | (x64 == y64)).all()):
                return False
        return True

    def degeneracy(self) -> dict:
        """Is the problem degenerate, so that a null candidate can pass it honestly? (A finding about the problem.)

        * ``degenerate_constant``: the first trial's float64 output (first floating output) is all zero or empty, or
          has more than one element and all of them equal, or ``std(r) / RMS(r) < CONSTANT_REL_STD`` over its finite
          elements;
        * ``degenerate_inputs``: indices ``i`` of tensor inputs such that replacing input ``i`` alone by a fresh draw
          (``get_inputs()`` under seed ``trial_seed[0] + 1``) leaves every output within
          ``UNCHANGED_RTOL |r| + UNCHANGED_ATOL_REL RMS(r)`` of the original (same seed for the model's own RNG); an
          input whose fresh draw equals the original is not tested.

        Returns ``{"output_rms": float|None (output units), "output_rel_std": float|None, "degenerate_constant":
        bool|None, "degenerate_inputs": list[int]|None, "degenerate": bool|None, "degeneracy_error": str|None}``;
        ``None`` values and an error text when the check itself failed (it never raises).
        """
        result = {"output_rms": None, "output_rel_std": None, "degenerate_constant": None,
                  "degenerate_inputs": None, "degenerate": None, "degeneracy_error": None}
        try:
            inputs, expected, expected64 = self.trial(0)
            first = verify.first_floating_stats(expected64)
            rms = 0.0
            if first is not None:
                flat, rms, std = first
                n = flat.numel()
                result["output_rms"] = rms
                result["output_rel_std"] = std / rms if rms > 0 else None
                # a single element has no spread to measure: only a zero counts (input dependence is tested below)
                result["degenerate_constant"] = bool(n == 0 or rms == 0.0 or (n > 1 and (
                    bool((flat == flat[0]).all()) or std <= CONSTANT_REL_STD * rms)))
            else:
                result["degenerate_constant"] = False  # integer/bool outputs: judged exactly, no scale
            seed = self.trial_seeds[0] if self.trial_seeds else self.timing_seed
            fresh = self._make_inputs((seed + 1) % (2**32))
            base = self._outputs64(inputs, seed) if self.model64 is None else expected64
            unchanged = []
            for i, (x, y) in enumerate(zip(inputs, fresh)):
                if not isinstance(x, torch.Tensor) or ReferenceSession._unchanged([y], [x], 0.0):
                    continue  # not a tensor, or the fresh draw is the same value: cannot tell
                replaced = list(inputs)
                replaced[i] = y
                if self._unchanged(self._outputs64(replaced, seed), base, rms):
                    unchanged.append(i)
            result["degenerate_inputs"] = unchanged
            result["degenerate"] = bool(result["degenerate_constant"] or unchanged)
        except Exception as exc:  # noqa: BLE001 - a finding we could not establish is recorded as unknown
            result["degeneracy_error"] = error_text(exc, 1000)
        finally:
            # the fresh draws and their float64 outputs can be as large as a trial: hand the memory back before the
            # candidates arrive (an OOM here must not starve the verdicts)
            fresh = replaced = None  # noqa: F841
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
        return result

    # ------------------------------------------------------------------------------------------------ variants
    def variant_applicability(self) -> dict[int, str | None]:
        """For each extra trial of a variant distribution: ``None`` if the variant applies, else why not (the rules of
        ``kbstudy.verdict.trials.applicability``, judged on that trial's own inputs; a reference that raises on them makes
        the variant not applicable). Fresh-seed trials always apply and are not listed. Never raises."""
        out: dict[int, str | None] = {}
        for t, extra in sorted(self.extra_trials.items()):
            if extra.name not in variants.VARIANTS:
                continue
            try:
                inputs, expected, expected64 = self.trial(t)
                original = self._make_inputs(extra.seed)
                out[t] = variants.applicability(original, inputs, expected, expected64, self.precision,
                                                self.reference_errors(t))
            except Exception as exc:  # noqa: BLE001 - the reference cannot take these inputs: not applicable
                self.cache.pop(t, None)
                out[t] = "the reference raised on these inputs: " + error_text(exc, 500)
        return out

    # ------------------------------------------------------------------------------------------------ timing
    def timing_pool_seeds(self) -> list[int]:
        """Seeds of the timing pool's entries: the run's seed (KernelBench's timing inputs) + entry index."""
        return self.timing_pool()[1]

    def timing_pool(self) -> tuple[list, list[int]]:
        """The timing pool (built once): ``(input sets, seeds)``, entry ``e`` = ``get_inputs()`` under seed
        ``seed + e``. Its size is ``kbstudy.harness.timing.pool_size`` of the first set's tensor bytes under the job's
        ``timing_pool_bytes``."""
        if self._pool is None:
            first = self._make_inputs(self.timing_seed)
            set_bytes = sum(x.numel() * x.element_size() for x in first if isinstance(x, torch.Tensor))
            n = timing_mod.pool_size(set_bytes, self.timing_pool_bytes)
            seeds = [(self.timing_seed + e) % (2**32 - 1) for e in range(n)]
            self._pool = ([first] + [self._make_inputs(s) for s in seeds[1:]], seeds)
        return self._pool

    def time(self, eager: bool, compiled: bool, timing: dict) -> dict:
        """Eager and ``torch.compile`` timings of the reference over the timing pool (``kbstudy.harness.timing.time_pool``:
        the same pool, seeding and loop as the candidates). Returns ``{"eager": [ms...] | None, "compile": [ms...] |
        None, "compile_error": str | None, "pool_size": int}``; a failure of ``torch.compile`` is reported, not
        raised."""
        pool, seeds = self.timing_pool()
        result: dict[str, Any] = {"eager": None, "compile": None, "compile_error": None, "pool_size": len(pool)}
        if eager:
            model = self.model
            result["eager"] = timing_mod.time_pool(lambda *a: model(*a), pool, seeds=seeds, device=self.device,
                                                   **timing).samples
        if compiled:
            try:
                torch._dynamo.reset()
                compiled_model = torch.compile(self.model)  # Inductor, default mode (as KernelBench's baseline files)
                result["compile"] = timing_mod.time_pool(lambda *a: compiled_model(*a), pool, seeds=seeds,
                                                         device=self.device, **timing).samples
            except Exception as exc:  # a reference Inductor cannot compile is a finding, not a dead batch
                result["compile_error"] = error_text(exc, 2000)
        return result

    def verify_timing(self, checked: list, check: str) -> dict:
        """Judge a candidate's sampled timed outputs (``kbstudy.harness.timing.PoolTiming.checked``) against the reference's
        answers for their pool entries (inputs regenerated from the entries' seeds).

        Args:
            checked: ``[(entry, timed call index, outputs, mix), ...]``: the call's inputs were pool entries ``entry``
                and ``entry + 1`` mixed with weight ``mix`` (``kbstudy.harness.fresh_inputs.mixed``; no ``mix`` or
                ``None``: the entry's own inputs).
            check: ``"kbstudy"`` (kbstudy's per-trial check with the NaN sentinel, for a kbstudy-correct candidate) or
                ``"kernelbench"`` (KernelBench's ``allclose``, for a candidate only KernelBench's verdict passed):
                the check the candidate's verdict rests on, so an honest kernel's timed outputs pass it as its
                trials did (KernelBench's absolute tolerance would otherwise fail honest kbstudy-correct kernels by
                chance on a new input set, and it passes any stale answer that is small enough).
        Returns ``{"ok": bool, "checked": int, "mismatches": [{"entry", "call", "detail"}, ...]}`` (at most 10
        mismatches listed). Raises ``ValueError`` for an unknown check.
        """
        if check not in ("kbstudy", "kernelbench"):
            raise ValueError(f"unknown check {check!r}")
        mismatches = []
        for entry, call, outputs, *mix in checked:
            key = ("timing", int(entry), float(mix[0]) if mix and mix[0] is not None else None)
            _, expected, expected64 = self.trial(key)
            if check == "kbstudy":
                result = verify.kbstudy_trial(expected, expected64, outputs, self.precision, "nan",
                                              self.bound_errors(key))
                detail = None if result.passed else f"{result.failure}: {result.detail}"
            else:
                result = verify.kernelbench_trial(expected, outputs, self.precision)
                detail = None if result.passed else f"kernelbench: {result.note}"
            if detail is not None:
                mismatches.append({"entry": int(entry), "call": int(call), "detail": detail})
            if key[2] is not None:  # one call's inputs, never asked for again: keep the cache for the trials
                self.cache.pop(key, None)
                self._reference_errors.pop(key, None)
        return {"ok": not mismatches, "checked": len(checked), "mismatches": mismatches[:10]}

    # ------------------------------------------------------------------------------------------------ flags
    def problem_flags(self, degeneracy: dict, applicability: dict | None = None) -> dict:
        """The reference's own accuracy at the run's precision and the problem's flags (``docs/reference/verifier.md``, "The
        replacement check", step 2), once per problem, precision and size:

        * ``reference_<metric>`` for each metric of ``kbstudy.verdict.checks.ACCURACY_METRICS``: the worst over KernelBench's
          fixed-seed trials of :meth:`reference_errors` (dimensionless; ``None`` where no trial measured it);
        * ``low_spread``: ``kbstudy.verdict.checks.is_low_spread`` of the first floating output of trial 0 (elements and
          ``output_rel_std`` from ``degeneracy``), *and* of every input variant that applies (``applicability``, as
          :meth:`variant_applicability` returns it: ``{trial: None}`` where it applies). KernelBench's U[0, 1) inputs
          make long sums nearly constant (bf16 matmuls at full size have a relative spread of ~0.01), but a verdict
          also judged on signed inputs, whose outputs spread, is evidence: there a constant fails (``variant_signed``),
          so such a problem is not flagged. ``low_spread_default`` keeps the default inputs' answer alone (the finding
          about KernelBench's own check); both ``None`` when the degeneracy check itself failed;
        * ``unjudgeable``: ``kbstudy.verdict.checks.is_unjudgeable`` of ``reference_rel_l2_error`` and ``output_rel_std``
          (from ``degeneracy``), rescued where a variant applies: the adaptive bound admits a constant output.

        Never raises: a reference that fails on a trial leaves the metrics ``None`` and records ``flags_error``.
        """
        result: dict[str, Any] = {f"reference_{m}": None for m in verify.ACCURACY_METRICS}
        result.update(low_spread=None, low_spread_default=None, unjudgeable=None, flags_error=None)
        try:
            result.update({f"reference_{m}": v for m, v in self.worst_reference_errors().items()})
            if degeneracy.get("degeneracy_error") is None:
                low = _is_low_spread(self.trial(0)[2], self.precision)
                result["low_spread_default"] = low
                for t, reason in sorted((applicability or {}).items()):
                    if low and reason is None:  # this variant applies: does its output spread?
                        low = _is_low_spread(self.trial(t)[2], self.precision)
                result["low_spread"] = low
            # rescued like low_spread: a value variant applies (rule 5 made it judgeable on its own inputs)
            rescued = any(reason is None for reason in (applicability or {}).values())
            result["unjudgeable"] = verify.is_unjudgeable(result["reference_rel_l2_error"],
                                                          degeneracy.get("output_rel_std"), rescued)
        except Exception as exc:  # noqa: BLE001 - recorded as unknown, as the degeneracy check does
            result["flags_error"] = error_text(exc, 1000)
        return result

    def describe(self) -> dict:
        """What the orchestrator records about the reference: first output's shape and dtype, bytes of all outputs,
        the dtype the kbstudy verdict compares against, TF32 flags, :meth:`degeneracy`'s fields, :meth:`problem_flags`'
        fields, and ``variants`` (:meth:`variant_applicability`: ``{extra trial index: None | reason it does not
        apply}``)."""
        _, expected, _ = self.trial(0)
        first = expected[0] if expected else None
        applicability = self.variant_applicability()
        degeneracy = self.degeneracy()
        return {
            "variants": applicability,
            # structural variants (shape, layout, parameters): not part of the problem flags' rescue, which asks for
            # other input values (the value variants) only
            **self.structural.report(self.structural.assess()),
            "output_shape": list(first.shape) if isinstance(first, torch.Tensor) else None,
            "output_dtype": str(first.dtype).replace("torch.", "") if isinstance(first, torch.Tensor) else None,
            "output_bytes": sum(x.numel() * x.element_size() for x in expected if isinstance(x, torch.Tensor)),
            "reference_dtype": self.reference_dtype,
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
            **degeneracy,
            **self.problem_flags(degeneracy, applicability),
        }


def _error(exc: BaseException) -> dict:
    return ErrorReply(error_text(exc), classify_exception(exc, "run")).to_wire()


def serve(conn, job: ReferenceJob) -> None:
    """The reference role's loop (see the module docstring). Any exception while setting up is reported as an
    :class:`~kbstudy.harness.protocol.ErrorReply` and ends the process; the orchestrator records ``reference_error``
    for the problem."""
    try:
        session = ReferenceSession(job)
        conn.send({"status": "ready", **session.describe()})
    except BaseException as exc:  # noqa: BLE001 - the reference failing is a recorded outcome
        conn.send(_error(exc))
        return
    while True:
        wire = conn.recv()
        request = reference_request(wire)
        try:
            if isinstance(request, Close):
                return
            if isinstance(request, InitInputs):
                owner = session if request.trial is None else session.structural.shape_session(request.trial)
                conn.send({"init_inputs": owner.init_inputs})
            elif isinstance(request, Inputs):
                try:
                    if request.trial == "timing_pool":
                        pool, seeds = session.timing_pool()
                        packet = transfer.pack_shared({"pool": pool, "seeds": seeds})
                    else:
                        inputs, _, _ = session.trial(request.trial)
                        packet = transfer.pack_shared(inputs)
                except BaseException as exc:  # noqa: BLE001
                    packet = transfer.pack_error(_error(exc))
                conn.send_bytes(packet)
            elif isinstance(request, Verify):
                outputs = transfer.unshare(conn.recv_bytes())
                result = session.verify(request.trial, outputs.get("outputs", []), request.sentinel,
                                        outputs.get("forms"), outputs.get("integrity"), kernelbench=request.kernelbench)
                del outputs
                conn.send(result)
            elif isinstance(request, VerifyTiming):
                payload = transfer.unshare(conn.recv_bytes())
                result = session.verify_timing(payload.get("checked", []), request.check)
                del payload
                conn.send(result)
            elif isinstance(request, TimeBaselines):
                conn.send(session.time(request.eager, request.compile, request.timing))
            else:
                conn.send(ErrorReply(f"unknown op {wire.get('op')!r}").to_wire())
        except BaseException as exc:  # noqa: BLE001 - reported to the orchestrator; the process serves on
            conn.send(_error(exc))
        finally:
            session.release_cached_memory()
