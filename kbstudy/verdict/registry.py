"""The registry of checks: every check the evaluation makes, dynamic and static, by name, with its group, what it
checks, the cheat or error it stops, its source and the code that decides it (after the presets of KernelBench's
static checker, ``src/kernelbench/kernel_static_checker.py``, which names each rule and sorts it into errors and
warnings).

Groups: ``strict`` checks decide kbstudy's verdict (a failure is the record's ``kbstudy_failure``; for
``timing_output_mismatch`` the speedups are withdrawn too); ``warning`` checks are recorded beside the verdict
(a record field or metadata) and change no verdict, though some change what a record may be used for (no speedup
under ``timing_discrepancy``, no evidence from a flagged problem). ``docs/reference/verifier.md`` lists the registry
(its table is :func:`markdown_table`, checked by ``tests/unit/test_check_registry.py``, which also checks that every
failure name the code can emit is here). The variants' names come from :func:`kbstudy.verdict.checks.variant_failure`.
"""

from __future__ import annotations

import dataclasses

from kbstudy.verdict.checks import (
    ACCURACY_FAILURES,
    INTEGRITY_FAILURES,
    TIMING_OUTPUT_MISMATCH,
    variant_failure,
)
from kbstudy.verdict.trials import EXTRA_NAMES, FAMILIES, FRESH

STRICT, WARNING = "strict", "warning"
GROUPS = (STRICT, WARNING)


_KB = "KernelBench `src/kernelbench/eval.py` (commit 423217d)"


@dataclasses.dataclass(frozen=True)
class Check:
    """One check. ``name``: the failure name (``kbstudy_failure``) of a strict check, the record field or flag of a
    warning; ``group``: :data:`STRICT` or :data:`WARNING`; ``stage``: where it runs (form, coverage, values, integrity,
    variants, timing, problem, static, kernelbench); ``checks``: what it checks; ``stops``: the cheat or error it
    stops; ``source``: where it comes from (a paper, a KernelBench file, a public issue); ``where``: the code that
    decides it."""

    name: str
    group: str
    stage: str
    checks: str
    stops: str
    source: str
    where: str


_VERIFY = "kbstudy.verdict.checks.kbstudy_trial"
_ACCURACY_SOURCE = ("KernelBench issue #165 (an all-zeros output passes `allclose`); The Correctness Illusion "
                    "(arXiv 2606.20128, fp64 reference); thresholds: docs/reference/verifier.md")

_VARIANT_TEXT = {
    FRESH: ("the problem's own `get_inputs()` under seeds drawn for the run", "a kernel tuned to KernelBench's known "
            "seeds", "BackendBench issue #54 (predictable inputs)"),
    "signed": ("every floating input element with a random sign", "a ReLU that returns its input, an `abs` shortcut, "
               "kernels right only on [0, 1)", "The Correctness Illusion (arXiv 2606.20128): fixed inputs certify "
               "seeded bugs"),
    "large": ("floating inputs times 64", "overflow or saturation hidden by small inputs",
              "The Correctness Illusion (arXiv 2606.20128)"),
    "shape": ("the problem's size constants changed (odd, prime, batch 1), `Model` and `ModelNew` rebuilt",
              "a kernel hard-coded to the benchmark's one shape", "gpu-mode reference-kernels (many test shapes per "
              "problem); issue 27"),
    "layout": ("inputs with the same values and other strides (transposed, stepped, offset, channels-last)",
               "a kernel that assumes contiguous inputs", "BackendBench (OpInfo samples); issue 27"),
    "parameter": ("the module's floating parameters and buffers replaced by random values of the same scale",
                  "a kernel that relies on a weight of 1 or a bias of 0 at initialisation",
                  "robust-kbench `filter_init_impact` (SakanaAI); issue 27"),
}


def _variant_checks() -> list[Check]:
    out = []
    for name in EXTRA_NAMES:
        family = {"params": "parameter"}.get(FAMILIES.get(name), FAMILIES.get(name))
        checks, stops, source = _VARIANT_TEXT[family or name]
        what = f"`{name}`: {checks}" if family else checks
        out.append(Check(variant_failure(name), STRICT, "variants", f"an extra trial on {what}, judged by the form, "
                         "coverage, value and integrity checks", stops, source, "kbstudy.verdict.combine.combine_extra"))
    return out


CHECKS: tuple[Check, ...] = (
    Check("not_a_dense_tensor", STRICT, "form", "each output is a plain strided `torch.Tensor` (exact type)",
          "a tensor subclass that overrides comparisons", "KernelBench static checker (Tensor subclasses)",
          _VERIFY + "; kbstudy.harness.child.reference.ReferenceSession.verify"),
    Check("output_count", STRICT, "form", "as many outputs as the reference", "a missing or extra output",
          _KB, _VERIFY),
    Check("shape", STRICT, "form", "each output has the reference's shape", "a wrong or broadcast shape", _KB,
          _VERIFY),
    Check("dtype", STRICT, "form", "each output has the reference's dtype", "an output in another precision",
          _KB + " (`allclose` raises on a dtype mismatch)", _VERIFY),
    Check("coverage", STRICT, "coverage", "every output element written (NaN and a finite sentinel in fresh "
          "allocations)", "a kernel that writes part of its output", "KernelBench issue #165; PyTorch "
          "`torch.utils.deterministic.fill_uninitialized_memory`", _VERIFY),
    Check("mismatch", STRICT, "values", "integer and bool outputs equal elementwise", "wrong indices or counts",
          _KB, _VERIFY),
    Check("nonfinite", STRICT, "values", "non-finite values exactly where the float64 reference has them",
          "NaN or inf produced, or lost", "FlashInfer-Bench (NaN/Inf check; arXiv 2601.00227)", _VERIFY),
    *(Check(failure, STRICT, "values", f"`{metric}` against the float64 reference within `max(T[p], 4 e_ref)`",
            {"rel_l2": "an output that is wrong on average (zeros, a constant, low precision)",
             "max_abs": "a few elements wrong at the output's scale", "elementwise":
             "wrong values near zeros of the output"}[failure], _ACCURACY_SOURCE,
            "kbstudy.verdict.checks.accuracy_failure")
      for metric, failure in ACCURACY_FAILURES.items()),
    *(Check(failure, STRICT, "integrity", text, stops, source, where) for failure, text, stops, source, where in (
        ("inputs_mutated", "the call leaves its inputs bitwise unchanged", "writing the answer into an input, "
         "zeroing inputs after use", "KernelBench PR #82 (adversarial tests)",
         "kbstudy.harness.child.integrity.inputs_equal"),
        ("global_state", "torch's flags (TF32, matmul precision, deterministic mode, threads) and functions as found "
         "before the candidate loaded", "enabling TF32 for the reference too, patching `torch.allclose` or timers",
         "CUDA-Agent issue #16 (TF32); KernelBench static checker (timer reassignment)",
         "kbstudy.harness.child.integrity.global_state_diff"),
        ("stale_output", "on the trial that reuses the previous trial's input storage with new values (some of the "
         "old ones kept), the output is not the previous trial's answer", "a result cached by pointer, shape, object "
         "or pointer plus sampled values", "KernelBench PR #82 (`result_reuse`); gpu-mode reference-kernels issue "
         "#102; CUDA-L1 (arXiv 2507.14111, caching by input address)",
         "kbstudy.harness.child.reference.ReferenceSession.verify; kbstudy.harness.fresh_inputs.keep_some"),
    ) if failure in INTEGRITY_FAILURES),
    *_variant_checks(),
    Check(TIMING_OUTPUT_MISMATCH, STRICT, "timing", "the outputs of timed calls drawn at random, each on fresh "
          "values, match the reference's answer for exactly those inputs (speedups withdrawn otherwise)",
          "an answer cached by pointer, call count or contents during timing; work skipped in timed calls",
          "gpu-mode reference-kernels issues #160 and #167 (fresh inputs per timed call); FlashInfer-Bench "
          "starter-kit issue #21 (fingerprint-keyed output cache)",
          "kbstudy.harness.timing.time_pool; kbstudy.harness.child.reference.ReferenceSession.verify_timing"),
    Check("timing_discrepancy", WARNING, "timing", "the host-synchronised time per call is at most 1.5x the event "
          "median + 20 us; otherwise the record has no speedup (no table or median uses the event time)",
          "work left on a side stream that events on the current stream do not see",
          "KernelBench PR #82 (`non_default_stream`); CUDA-L1 (arXiv 2507.14111, async-stream timing)",
          "kbstudy.harness.timing_stats.timing_discrepancy; kbstudy.records.frames.withdraw_event_only_speedups"),
    Check("custom_kernel_share", WARNING, "timing", "the share of the profiled call's device time in the candidate's "
          "own kernels", "a 'kernel' that calls vendor libraries or PyTorch only",
          "KernelGYM / Dr. Kernel (arXiv 2602.05885, decoy check); KernelBench issue #57",
          "kbstudy.harness.kernel_share"),
    Check("kernelbench_correct", WARNING, "kernelbench", "KernelBench's own verdict, reproduced: `allclose` at "
          "atol = rtol = 1e-4 (fp32) or 1e-2 on 5 fixed-seed trials", "(recorded for comparison; kbstudy's verdict "
          "decides)", _KB, "kbstudy.verdict.checks.kernelbench_trial"),
    Check("degenerate", WARNING, "problem", "the reference's output is constant, or an input has no effect on it",
          "a null candidate passing honestly on a degenerate problem (no evidence)",
          "robust-kbench `filter_input_impact` and output filters (SakanaAI)",
          "kbstudy.harness.child.reference.ReferenceSession.degeneracy"),
    Check("low_spread", WARNING, "problem", "the output's relative spread is at most 2 x T_L2[p] on every input "
          "distribution judged", "a constant output nearly passing a relative check", "KernelBench issue #165",
          "kbstudy.verdict.checks.is_low_spread"),
    Check("unjudgeable", WARNING, "problem", "the adaptive bound admits a constant output (4 e_ref >= 1, or >= the "
          "output's spread)", "a verdict that cannot tell a constant from a kernel",
          "docs/reference/verifier.md (the calibration)", "kbstudy.verdict.checks.is_unjudgeable"),
    Check("float32_only", WARNING, "static", "a CUDA source reads or writes tensors as float32 whatever their dtype "
          "(rules `_FLOAT_ACCESS`, `_FLOAT_DISPATCH`, `_FLOAT_CHECK`, `_FLOAT_ALLOC`, `_BF16_SUPPORT`, "
          "`_PY_FLOAT_GUARD`, `_PY_FLOAT_CAST`)", "a bf16 evaluation that measures PyTorch's fallback or reads the "
          "wrong bytes", "KernelBench static checker (fp32 -> fp16 warning)",
          "kbstudy.verdict.static_scan.scan_dtype_support"),
)

#: The static-scan rules each static entry covers (module-level patterns of ``kbstudy.verdict.static_scan``).
STATIC_RULES = {"float32_only": ("_FLOAT_ACCESS", "_FLOAT_DISPATCH", "_FLOAT_CHECK", "_FLOAT_ALLOC", "_BF16_SUPPORT",
                                 "_PY_FLOAT_GUARD", "_PY_FLOAT_CAST")}


def by_name() -> dict[str, Check]:
    """The registry as ``{name: Check}``. Names are unique (tested)."""
    return {c.name: c for c in CHECKS}


def strict_failures() -> set[str]:
    """The names a record's ``kbstudy_failure`` can hold."""
    return {c.name for c in CHECKS if c.group == STRICT}


def markdown_table() -> str:
    """The registry as the Markdown table of ``docs/reference/verifier.md`` ("The registry of checks")."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| check | group | stage | what it checks | what it stops | source | decided by |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in CHECKS:
        name = f"`{c.name}`"
        lines.append("| " + " | ".join(cell(x) for x in (name, c.group, c.stage, c.checks, c.stops, c.source,
                                                           f"`{c.where}`")) + " |")
    return "\n".join(lines)
