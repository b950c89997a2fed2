"""Extra correctness trials beyond KernelBench's fixed seeds: fresh seeds and other input distributions.

KernelBench judges a candidate on 5 trials whose seeds are known in advance (``torch.manual_seed(42)``), and since
v0.1 every level-1 problem draws its inputs from ``torch.rand``, i.e. [0, 1). A kernel can therefore be right on
exactly those inputs and wrong elsewhere: a ReLU that returns its input, an ``abs``-based shortcut, a kernel that
overflows or saturates on larger values, or one tuned to the fixed seeds (``harness-anchors.md`` section 2, row 11).
KernelBench's verdict is kept exactly as it is (its 5 trials); **kbstudy's verdict** gets extra trials, in this order
after KernelBench's:

* ``fresh_seeds``: ``EvalConfig.fresh_trials`` trials on the problem's own ``get_inputs()`` under seeds drawn for the
  run (``secrets``), unknown in advance; the seeds are recorded in each record's ``metadata["extra_trials"]``, and
  ``EvalConfig.extra_seeds`` replays them;
* ``signed``: ``get_inputs()`` under a drawn seed, then every element of every floating-point tensor input gets an
  independent random sign (a Rademacher factor, seeded). A [0, 1) input becomes symmetric on (-1, 1); an input that
  was already symmetric keeps its distribution (then this is one more fresh draw). Sign flips rather than ``2x - 1``:
  they keep every magnitude, so no new near-zero values appear in a divisor, a ``log`` or a normalisation;
* ``large``: ``get_inputs()`` under a drawn seed, then every floating-point tensor input is multiplied by
  :data:`LARGE_SCALE` (64, a power of two: exact in every float format unless it overflows).

Integer, bool and index tensors and non-tensor arguments (Python scalars such as a problem's scale factor) are never
altered. The transform is applied after the inputs were cast to the run's precision, so the float64 reference sees the
same (rounded) values as the candidate.

**Applicability (data-driven).** A distribution only makes sense where the problem's semantics allow it (a ``log`` of
negated probabilities is NaN; a fp16 matmul of inputs times 64 overflows). So a variant *applies* to a problem at a
precision only if, on the variant trial's own inputs (:func:`applicability`):

1. it changed at least one floating-point tensor input;
2. every floating output of the float64 reference is finite;
3. the float64 reference output is not constant: not (all elements equal, or std / RMS < 1e-6, or all zero), the rule
   of ``ReferenceRecord.degenerate_constant``; integer and bool outputs count as constant when all elements are equal;
4. the reference itself, run at the run's precision, passes kbstudy's check against the float64 reference on these
   inputs (``checks.kbstudy_trial``, with this input set's own accuracy bounds): its output is finite where the
   float64 one is, so an honest kernel's can be;
5. these inputs are judgeable at the run's precision (``checks.is_unjudgeable`` of the reference's own relative L2
   error and the output's relative spread on them is false): the check, whose bounds widen to ``REFERENCE_FACTOR``
   times that error (checks v4, ``docs/reference/verifier.md``), still rejects every constant output.
   Before checks v4 the bounds were fixed, and rule 4 also required the reference to be within them.

Otherwise the variant is recorded as ``"n.a."`` with the reason (``ReferenceRecord.metadata["variants"]``,
``EvaluationRecord.metadata["variant_notes"]``) and its trial is not run. Fresh-seed trials draw from the problem's
own distribution and always apply.

**Structural variants** (:data:`STRUCTURAL_VARIANTS`, after the value variants): the same operator at other sizes,
on other memory layouts and with other parameter values, each a family of its own (:data:`FAMILIES`):

* ``shape``: the problem's size constants edited (``kbstudy.harness.variant_inputs.shape_edits``): ``shape_prime``
  (every size to a smaller prime: odd, and a multiple of no power of two above 1), ``shape_batch1`` (``batch_size``
  1), ``shape_larger`` (every size to a larger prime, only where the problem at the run's size is small); ``Model``
  and ``ModelNew`` are both rebuilt at the new sizes under the run's seed;
* ``layout``: the trial's values on other strides (``kbstudy.harness.variant_inputs.relayout``):
  ``layout_transposed`` (the last two dimensions' storage order swapped), ``layout_strided`` (a slice with step 2
  and a storage offset), ``layout_channels_last`` (4-D inputs);
* ``params``: ``params_random``, the floating-point parameters and buffers of ``Model`` and ``ModelNew`` replaced by
  the same random values of the same scale (``kbstudy.harness.variant_inputs.parameter_draws``).

They apply by rules 2-5 above on their own outputs (rule 1 is replaced by: the sizes, strides or parameters changed
and the reference accepts them). A candidate that passes every trial at the benchmark's shape, layout and parameters
and fails a family's trial gets that family's class (:data:`FAMILY_CLASSES`, :func:`variant_classes`), e.g.
``correct_at_benchmark_shape_only``: recorded, and not kbstudy-correct.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from typing import Any, Sequence

from kbstudy.verdict.checks import REFERENCE_FACTOR, is_unjudgeable, kbstudy_trial, reference_errors, relative_spread

#: The distributions of the extra trials besides fresh seeds, in trial order.
VARIANTS = ("signed", "large")
#: Name of the fresh-seed trials in ``kbstudy_variants``.
FRESH = "fresh_seeds"
#: The structural variants by family (module docstring), in trial order.
SHAPE_VARIANTS = ("shape_prime", "shape_batch1", "shape_larger")
LAYOUT_VARIANTS = ("layout_transposed", "layout_strided", "layout_channels_last")
PARAM_VARIANTS = ("params_random",)
STRUCTURAL_VARIANTS = (*SHAPE_VARIANTS, *LAYOUT_VARIANTS, *PARAM_VARIANTS)
#: Family of each structural variant.
FAMILIES = {**{n: "shape" for n in SHAPE_VARIANTS}, **{n: "layout" for n in LAYOUT_VARIANTS},
            **{n: "params" for n in PARAM_VARIANTS}}
#: The class of a candidate correct everywhere but on a family's trials.
FAMILY_CLASSES = {"shape": "correct_at_benchmark_shape_only", "layout": "correct_for_contiguous_only",
                  "params": "correct_for_initial_parameters_only"}
#: Every name that can appear as a key of ``EvaluationRecord.kbstudy_variants``.
EXTRA_NAMES = (FRESH, *VARIANTS, *STRUCTURAL_VARIANTS)
#: The factor of the ``large`` variant (a power of two, so the scaling itself rounds nothing).
LARGE_SCALE = 64.0
#: Verdict values of ``kbstudy_variants``.
PASSED, FAILED, NOT_APPLICABLE = "passed", "failed", "n.a."
#: An output is constant when std / RMS of its finite float64 values is below this (as ``reference.CONSTANT_REL_STD``).
CONSTANT_REL_STD = 1e-6


@dataclasses.dataclass(frozen=True)
class ExtraTrial:
    """One extra trial: its index among all trials (after KernelBench's), its input seed and its distribution name
    (:data:`FRESH` or one of :data:`VARIANTS`)."""

    trial: int
    seed: int
    name: str

    def as_dict(self) -> dict:
        return {"trial": self.trial, "seed": self.seed, "name": self.name}


def draw_seeds(n: int) -> list[int]:
    """``n`` seeds in [0, 2**32 - 1) from the operating system's generator (``secrets``): unknown in advance."""
    return [secrets.randbelow(2**32 - 1) for _ in range(n)]


def plan_extra_trials(first_trial: int, fresh: int, variants: Sequence[str] = VARIANTS,
                      seeds: Sequence[int] | None = None, structural: Sequence[str] = ()) -> list[ExtraTrial]:
    """The extra trials of a run: ``fresh`` fresh-seed trials, then one trial per variant, then one per structural
    variant (:data:`STRUCTURAL_VARIANTS`), numbered from ``first_trial`` (the number of KernelBench trials).

    ``seeds``: one per extra trial, in that order (to replay a run, from ``metadata["extra_trials"]``; seeds for
    the fresh and value trials alone leave the structural trials' to be drawn); ``None`` draws them (:func:`draw_seeds`). Raises ``ValueError`` for an unknown variant, a negative count or a wrong number
    of seeds.
    """
    unknown = [v for v in variants if v not in VARIANTS]
    unknown += [v for v in structural if v not in STRUCTURAL_VARIANTS]
    if unknown:
        raise ValueError(f"unknown input variants {unknown}; known: {list(VARIANTS + STRUCTURAL_VARIANTS)}")
    if fresh < 0:
        raise ValueError("fresh_trials must be >= 0")
    names = [FRESH] * fresh + list(variants) + list(structural)
    if seeds is None:
        seeds = draw_seeds(len(names))
    elif structural and len(seeds) == fresh + len(variants):
        # the seeds of a record made before the structural variants: replayed, the structural trials' drawn
        seeds = [*seeds, *draw_seeds(len(structural))]
    if len(seeds) != len(names):
        raise ValueError(f"{len(seeds)} seeds given for {len(names)} extra trials ({names})")
    return [ExtraTrial(first_trial + i, int(s) % (2**32 - 1), name) for i, (s, name) in enumerate(zip(seeds, names))]


def transform_inputs(inputs: Sequence[Any], name: str, seed: int) -> list:
    """The inputs of a variant trial: ``signed`` flips the sign of each element of each floating-point tensor at
    random (generator seeded with ``seed + position``, on the tensor's device); ``large`` multiplies each
    floating-point tensor by :data:`LARGE_SCALE`; :data:`FRESH` returns the inputs unchanged. Other values pass
    through. Returns new tensors (the inputs are not modified). Raises ``ValueError`` for an unknown name."""
    import torch  # loaded on first use: the analyses import this module's constants without torch

    if name == FRESH:
        return list(inputs)
    if name not in VARIANTS:
        raise ValueError(f"unknown input variant {name!r}")
    out = []
    for k, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            if name == "signed":
                gen = torch.Generator(device=x.device).manual_seed((int(seed) + k) % (2**63))
                signs = torch.randint(0, 2, x.shape, generator=gen, device=x.device, dtype=torch.int8)
                x = torch.where(signs.bool(), -x, x)
            else:
                x = x * LARGE_SCALE
        out.append(x)
    return out


def is_constant(x) -> bool:
    """Is an output constant? Floating: over its finite elements, none, all zero, all equal (more than one), or
    std / RMS < :data:`CONSTANT_REL_STD`. Integer/bool: more than one element, all equal. Non-tensors: ``False``."""
    import torch  # loaded on first use: the analyses import this module's constants without torch

    if not isinstance(x, torch.Tensor):
        return False
    flat = x.reshape(-1)
    if not (flat.is_floating_point() or flat.is_complex()):
        return flat.numel() > 1 and bool((flat == flat[0]).all())
    flat = flat.to(torch.float64)
    flat = flat[torch.isfinite(flat)]
    n = flat.numel()
    if n == 0:
        return True
    rms = math.sqrt(float((flat * flat).sum()) / n)
    if rms == 0.0:
        return True
    if n == 1:
        return False
    return bool((flat == flat[0]).all()) or float(flat.std(unbiased=False)) <= CONSTANT_REL_STD * rms


def applicability(original: Sequence[Any], transformed: Sequence[Any], expected: Sequence[Any],
                  expected64: Sequence[Any], precision: str, reference_metrics: dict | None = None) -> str | None:
    """Why a variant does not apply on these inputs, or ``None`` if it does (module docstring, rules 1-5).

    Args:
        original: the trial's inputs before the transform (as ``get_inputs()`` gave them, cast to the precision).
        transformed: the inputs after it.
        expected: the reference's outputs at the run's precision on ``transformed``.
        expected64: the float64 reference's outputs on ``transformed``.
        precision: ``fp32``, ``fp16`` or ``bf16``.
        reference_metrics: ``e_ref`` of these inputs (``checks.reference_errors(expected, expected64)``, computed
            here when ``None``).
    """
    import torch  # loaded on first use: the analyses import this module's constants without torch

    changed = any(isinstance(a, torch.Tensor) and a.is_floating_point() and not torch.equal(a, b)
                  for a, b in zip(original, transformed))
    if not changed:
        return "no floating-point tensor input changed"
    return output_applicability(expected, expected64, precision, reference_metrics)


def output_applicability(expected: Sequence[Any], expected64: Sequence[Any], precision: str,
                         reference_metrics: dict | None = None) -> str | None:
    """Rules 2-5 of :func:`applicability` on a variant's reference outputs alone (the structural variants, whose
    rule 1 is that the reference accepted the new sizes, strides or parameters): why it does not apply, or
    ``None``."""
    import torch  # loaded on first use: the analyses import this module's constants without torch

    floating = [x for x in expected64 if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())]
    if any(not bool(torch.isfinite(x).all()) for x in floating):
        return "the float64 reference output is not finite"
    tensors = [x for x in expected64 if isinstance(x, torch.Tensor)]
    if tensors and all(is_constant(x) for x in tensors):
        return "the float64 reference output is constant"
    if reference_metrics is None:
        reference_metrics = reference_errors(expected, expected64)
    own = kbstudy_trial(expected, expected64, expected, precision, "nan", reference_metrics)
    if not own.passed:
        return f"the reference at {precision} fails kbstudy's check on these inputs ({own.failure}: {own.detail})"
    spread = relative_spread(expected64)
    if is_unjudgeable(reference_metrics.get("rel_l2_error"), spread):
        limit = f"the output's relative spread ({spread:.3g})" if spread is not None and spread < 1 else "1"
        return (f"unjudgeable at {precision} on these inputs: {REFERENCE_FACTOR:g} x the reference's own "
                f"relative L2 error ({reference_metrics['rel_l2_error']:.3g}) is at least {limit}")
    return None


def summarize_extra(names: Sequence[str], results: Sequence[tuple[ExtraTrial, Any]],
                    not_applicable: dict[str, str]) -> dict[str, str]:
    """``kbstudy_variants``: for each name in ``names`` (the run's extra-trial names, :data:`FRESH` first),
    ``"n.a."`` if it is in ``not_applicable``, else ``"failed"`` if any of its trials failed (a ``KbstudyTrial``
    with ``passed`` false), else ``"passed"``. Names without a result and not marked n.a. are left out."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(names):
        if name in not_applicable:
            out[name] = NOT_APPLICABLE
            continue
        trials = [r for spec, r in results if spec.name == name]
        if trials:
            out[name] = PASSED if all(r.passed for r in trials) else FAILED
    return out


def variant_classes(kbstudy_variants: dict | None, default_correct: bool) -> list[str]:
    """The classes (:data:`FAMILY_CLASSES`) of a candidate: for each structural family with a ``"failed"`` variant,
    its class, where the candidate passed every other trial (``default_correct``: kbstudy's check on KernelBench's
    trials, the fresh seeds and the value variants). ``[]`` otherwise, in :data:`FAMILY_CLASSES` order."""
    if not default_correct or not kbstudy_variants:
        return []
    failed = {FAMILIES[name] for name, verdict in kbstudy_variants.items() if name in FAMILIES and verdict == FAILED}
    return [cls for family, cls in FAMILY_CLASSES.items() if family in failed]
