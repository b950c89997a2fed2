"""The reference process's side of the structural variants (``kbstudy.verdict.trials.STRUCTURAL_VARIANTS``): the
problem's ``Model`` at a shape variant's sizes, its inputs on a layout variant's strides, its parameters replaced for
``params_random``, and whether each variant applies (:func:`assess`).

A shape variant's trial is served by a second reference session built from the problem's source with its size
constants edited (``kbstudy.harness.problems.edit_sizes``), under the same seed as the first, so ``Model`` is built
and its inputs drawn as at the benchmark's sizes; the first edit set (``variant_inputs.shape_edit_sets``) whose
reference builds and runs is used, and the orchestrator edits the candidate's source the same way.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from kbstudy.harness import variant_inputs
from kbstudy.harness.failures import error_text
from kbstudy.harness.problems import edit_sizes
from kbstudy.verdict import trials as variants

#: A shape variant's cached trial (inputs and expected outputs) is kept across requests up to this size; a larger one
#: is dropped when another trial is asked for and recomputed from its seed (bit-identical) when needed again, so at
#: full size at most one variant's trial is held beside the problem's own cache.
SHAPE_KEEP_BYTES = 1 << 30


class Structural:
    """The structural variants of one :class:`~kbstudy.harness.child.reference.ReferenceSession` (its ``session``)."""

    def __init__(self, session):
        self.session = session
        self.shape_sessions: dict[int, Any] = {}  # trial -> the reference session at that variant's sizes
        self.shape_edits: dict[int, dict] = {}  # trial -> the size edits used
        self._param_models: tuple | None = None
        self._spec: list | None = None

    def parameter_spec(self) -> list[dict]:
        """``variant_inputs.parameter_spec`` of the problem's ``Model`` (at the run's precision)."""
        if self._spec is None:
            self._spec = variant_inputs.parameter_spec(self.session.model)
        return self._spec

    def param_models(self, seed: int) -> tuple:
        """``(Model at precision, its float64 twin or None)`` with ``params_random``'s values (seeded ``seed``): the
        values rounded to the precision, the float64 twin holding the same rounded values."""
        if self._param_models is None:
            s = self.session
            model = copy.deepcopy(s.model)
            reason = variant_inputs.replace_parameters(model, self.parameter_spec(), seed, s.dtype)
            if reason is not None:
                raise ValueError(reason)
            model64 = copy.deepcopy(model).to(torch.float64) if s.model64 is not None else None
            self._param_models = (model, model64)
        return self._param_models

    def _sub_job(self, trial: int, edits: dict, name: str):
        s = self.session
        extra = s.extra_trials[trial]
        return dataclasses.replace(s.job, source=edit_sizes(s.job.source, edits, name), trials=0, cache_bytes=0,
                                   extra_trials=({"trial": trial, "seed": extra.seed, "name": variants.FRESH},))

    def shape_session(self, trial: int):
        """The reference session of a shape variant's trial (chosen by :meth:`assess`). Raises ``KeyError`` if
        none was chosen."""
        return self.shape_sessions[trial]

    def drop_large(self, keep=None) -> None:
        """Drop the cached trials of the shape sessions other than ``keep``'s above :data:`SHAPE_KEEP_BYTES`."""
        for t, sub in self.shape_sessions.items():
            if t != keep and sum(sub._entry_bytes(e) for e in sub.cache.values()) > SHAPE_KEEP_BYTES:
                sub.cache.clear()

    def _choose_shape(self, trial: int, name: str) -> str | None:
        """Pick the first edit set whose reference builds and runs; ``None`` or why the variant does not apply."""
        s = self.session
        if name == "shape_larger":
            inputs, expected, _ = s.trial(0)
            nbytes = sum(x.numel() * x.element_size() for x in [*inputs, *expected] if isinstance(x, torch.Tensor))
            if nbytes > variant_inputs.LARGER_MAX_BYTES:
                return (f"the problem at this size is not small ({nbytes} bytes of inputs and outputs, above "
                        f"{variant_inputs.LARGER_MAX_BYTES}): no larger sizes")
        sets = variant_inputs.shape_edit_sets(s.job.source, name)
        if not sets:
            return "no batch_size constant" if name == "shape_batch1" else "no size constant to edit"
        errors = []
        for edits in sets:
            try:
                sub = type(s)(self._sub_job(trial, edits, name))
                sub.trial(trial)
            except Exception as exc:  # noqa: BLE001 - the reference does not take these sizes: try the next set
                errors.append(f"{edits}: {error_text(exc, 300)}")
                continue
            self.shape_sessions[trial], self.shape_edits[trial] = sub, edits
            return None
        return "the reference raised at these sizes: " + " | ".join(errors)

    def assess(self) -> dict[int, str | None]:
        """For each structural variant trial: ``None`` if it applies, else why not (the sizes, strides or parameters
        could not change, the reference raised on them, or ``kbstudy.verdict.trials.output_applicability``'s rules
        on its outputs). Never raises."""
        s = self.session
        out: dict[int, str | None] = {}
        for t, extra in sorted(s.extra_trials.items()):
            if extra.name not in variants.STRUCTURAL_VARIANTS:
                continue
            family = variants.FAMILIES[extra.name]
            try:
                if family == "shape":
                    reason = self._choose_shape(t, extra.name)
                elif family == "params":
                    reason = None if self.parameter_spec() else \
                        "the problem's Model has no floating-point parameters or buffers"
                else:
                    plain = s._make_inputs(extra.seed)
                    relaid = variant_inputs.relayout(plain, extra.name)
                    reason = None if variant_inputs.layout_changed(plain, relaid) else \
                        "no floating-point tensor input has another layout of this kind"
                if reason is None:
                    _, expected, expected64 = s.trial(t)
                    reason = variants.output_applicability(expected, expected64, s.precision, s.reference_errors(t))
            except Exception as exc:  # noqa: BLE001 - the reference cannot take this variant: not applicable
                s.cache.pop(t, None)
                reason = "the reference raised on this variant: " + error_text(exc, 500)
            out[t] = reason
        return out

    def report(self, assessed: dict[int, str | None]) -> dict:
        """What the orchestrator needs besides :meth:`assess`: the size edits of each shape trial that applies and
        ``Model``'s parameter specification (for ``params_random``)."""
        return {"structural_variants": assessed,
                "shape_edits": {t: e for t, e in self.shape_edits.items() if assessed.get(t) is None},
                "parameter_spec": self.parameter_spec() if any(
                    variants.FAMILIES.get(e.name) == "params" for e in self.session.extra_trials.values()) else None}
